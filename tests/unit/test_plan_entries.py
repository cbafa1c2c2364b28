"""Issue 39: a route plan carries the EP table's entry of each EP its stages run on, looked up once
where the plan is made (bundle/routing.py); the rooms after it (the availability check, the derived
folder's name) read the entry from the plan instead of looking the EP up again."""

from __future__ import annotations

import pytest

from tests.unit.bundle_fakes import CONFIG_TARGET, ep_target, make_bundle, pipeline_config
from winml_perf.bundle.config import load_config
from winml_perf.bundle.derive import _folder_prefix
from winml_perf.bundle.routing import check_available, plan_route
from winml_perf.ep import table as eps
from winml_perf.support.errors import EPUnavailableError

QNN = "QNNExecutionProvider"
CPU = "CPUExecutionProvider"


def test_the_plan_carries_the_entry_of_every_ep_its_stages_run_on(tmp_path):
    config = load_config(make_bundle(tmp_path, pipeline_config()))
    as_configured = plan_route(config, CONFIG_TARGET)
    assert as_configured.entries == {ep: eps.EPS[ep] for ep in {s.ep_after for s in as_configured.stages}}
    forced = plan_route(config, ep_target("qnn"), ["context"])
    assert set(forced.entries) == {s.ep_after for s in forced.stages} and forced.entries[QNN] is eps.EPS[QNN]
    assert forced.ep_alias == "qnn" and _folder_prefix(forced) == "qnn"


def test_the_availability_check_reads_the_entry_the_plan_carries(tmp_path, monkeypatch):
    plan = plan_route(load_config(make_bundle(tmp_path, pipeline_config())), CONFIG_TARGET)
    monkeypatch.setattr(eps, "install_sentence", lambda _ep: pytest.fail("looked up again"))
    monkeypatch.setattr(eps, "ep_alias", lambda _ep: pytest.fail("looked up again"))
    with pytest.raises(EPUnavailableError, match=r"stage `context` wants QNN, .*to get it: qnn: pip install"):
        check_available(plan, {CPU})
