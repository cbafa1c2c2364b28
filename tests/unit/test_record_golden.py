"""A record's content does not change when its building gets faster (issue 37): the run records of
fake sessions (tests/unit/record_golden.py), clock readings scrubbed, have the digests recorded on
the code before (9c80097) in tests/golden/record_digests.json, byte for byte."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.unit.record_golden import CASES, case_text

GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "record_digests.json").read_text())


def test_every_case_has_a_recorded_digest():
    assert sorted(GOLDEN) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_record_text_is_the_recorded_one(name):
    text = case_text(name)
    assert json.loads(text)["cells"][0]["status"] == "ok"
    assert hashlib.sha256(text.encode()).hexdigest() == GOLDEN[name], (
        f"the record of case {name} changed: `python -m tests.unit.record_golden DIR` on both trees and diff"
    )


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
