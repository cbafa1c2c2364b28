"""A record's content does not change when its building gets faster (issue 37): the run records of
fake sessions (tests/unit/record_golden.py), clock readings scrubbed, have the digests recorded on
the code before (9c80097) in tests/golden/record_digests.json, byte for byte. A metric added to the table
since is left out of the text digested (its own test holds its values): adding one changes no digest."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.unit.record_golden import CASES, case_text
from winml_perf.model.metrics import METRICS

GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "record_digests.json").read_text())
RECORDED_METRICS: list[str] = GOLDEN["metrics"]


def test_every_case_has_a_recorded_digest():
    assert sorted(GOLDEN["cases"]) == sorted(CASES)


def test_every_metric_the_digests_hold_is_still_in_the_table_in_its_order():
    """A recorded metric renamed, dropped or moved changes the digests too; this says which."""
    assert [m.name for m in METRICS if m.name in RECORDED_METRICS] == RECORDED_METRICS


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_record_text_is_the_recorded_one(name):
    text = case_text(name, RECORDED_METRICS)
    assert json.loads(text)["cells"][0]["status"] == "ok"
    newer = [m.name for m in METRICS if m.name not in RECORDED_METRICS]
    assert hashlib.sha256(text.encode()).hexdigest() == GOLDEN["cases"][name], (
        f"the record of case {name} changed (metrics newer than the digests left out: {newer or 'none'}):"
        " `python -m tests.unit.record_golden DIR` on both trees and diff"
    )


def test_a_metric_newer_than_the_digests_is_left_out_and_nothing_else():
    """Leaving a metric out of the recorded ones takes out only its keys: the record's text with them
    removed by hand (tpot_ms stands for a new metric: it is summarised, no other key starts with its name)."""
    dropped = "tpot_ms"
    full = json.loads(case_text("n7", RECORDED_METRICS))
    partial = json.loads(case_text("n7", [name for name in RECORDED_METRICS if name != dropped]))
    cell = full["cells"][0]
    for section in (cell["metrics"], cell["summary"], cell["uncertainty"]["metrics"]):
        del section[dropped]
    del cell["uncertainty"]["within_process_metrics"][dropped]
    assert partial == full and dropped not in json.dumps(partial)


def test_perf_format_json_prints_the_run_record_built_once(capsys, monkeypatch):
    """`perf --format json` writes the document it already built (not a second to_dict) and that
    text is the record's, exactly as run_text writes it."""
    from tests.unit.record_golden import case_run
    from winml_perf.commands import perf_report
    from winml_perf.model.record import RunRecord
    from winml_perf.publish.render import run_text

    run = case_run("n200_jitter")
    doc = run.to_dict()
    expected = run_text(run, "json")
    calls = []
    real = RunRecord.to_dict
    monkeypatch.setattr(RunRecord, "to_dict", lambda self: calls.append(1) or real(self))
    perf_report._print_run(run, doc, "json")
    assert capsys.readouterr().out == expected
    assert calls == []
