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
