"""The perplexity sections of a record (issue 34): typed round trips, the schema, the packaged text."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from winml_perf.model.equivalence import EQUIVALENT, Equivalence, LogitFigures
from winml_perf.model.perplexity import Perplexity, PerplexityDifference, PerplexityText
from winml_perf.model.route import Route

TEXT = PerplexityText("coriolanus-act1.txt", "ab" * 32, 15957, 4594, 512, 8, 255, False)
PPL = Perplexity(TEXT, 20.0, 18.0, 22.5, 0.95, math.log(20.0), (3.0, 3.0), 1234.5, "flat decoder")
DIFF = PerplexityDifference("config", 20.2, 20.0, 1.01, 1.005, 1.015, 0.95, math.log(1.01), 8, False)
AGREED = replace(
    DIFF, kl_mean=0.0045, kl_low=0.0031, kl_high=0.006, top1_agreement=1963 / 2040, top1_matches=1963,
    positions=2040, chunk_kl=(0.004,) * 4 + (0.005,) * 4, chunk_top1=(245,) * 7 + (248,),
)  # fmt: skip


def _equivalence() -> Equivalence:
    return Equivalence("config", "/a", "/b", 16, 0, LogitFigures(16, 0.0, 0.0, 0.0, 1.0, 1.0, None, True), EQUIVALENT)


def test_round_trips():
    assert Perplexity.from_dict(PPL.to_dict()) == PPL
    assert PerplexityDifference.from_dict(DIFF.to_dict()) == DIFF
    e = replace(_equivalence(), perplexity=DIFF)
    assert Equivalence.from_dict(e.to_dict()) == e and "perplexity" not in _equivalence().to_dict()
    route = Route("config", perplexity=PPL)
    assert Route.from_dict(route.to_dict()) == route
    why = Route("ep=qnn", perplexity_not_measured="lm_head cannot take a chunk")
    assert Route.from_dict(why.to_dict()) == why


def test_the_text_agreement_round_trips_and_an_older_difference_reads_none():
    assert PerplexityDifference.from_dict(AGREED.to_dict()) == AGREED
    d = AGREED.to_dict()
    assert (d["kl_mean"], d["top1_matches"], d["positions"], len(d["chunk_kl"])) == (0.0045, 1963, 2040, 8)
    older = {k: v for k, v in DIFF.to_dict().items() if not k.startswith(("kl_", "top1_", "positions", "chunk_"))}
    read = PerplexityDifference.from_dict(older)  # a record written before KL and top-1 were measured
    assert read == DIFF and read.kl_mean is None and read.top1_agreement is None and read.chunk_kl == ()
    one = replace(AGREED, kl_low=math.nan, kl_high=math.nan)  # one chunk: no interval
    assert one.to_dict()["kl_low"] is None and one.to_dict()["kl_high"] is None


def test_the_perplexity_line_says_kl_and_top1_beside_the_ratio():
    from winml_perf.equivalence.report import perplexity_line

    line = perplexity_line("ep=qnn", PPL, AGREED)
    assert line.endswith(
        "; ×1.0100 [1.0050, 1.0150] against config; KL 0.0045 [0.0031, 0.006], top-1 96.2 % over 2,040 positions"
    )
    assert "KL" not in perplexity_line("ep=qnn", PPL, DIFF)  # not measured: nothing said, nothing invented
    one = perplexity_line("ep=qnn", PPL, replace(AGREED, kl_low=None, kl_high=None))
    assert "KL 0.0045 (no interval: one chunk), top-1" in one


def test_an_undefined_bound_is_recorded_as_null():
    one = Perplexity(replace(TEXT, chunks=1), 20.0, math.nan, math.nan, 0.95, 3.0, (3.0,), 1.0, "flat decoder")
    assert one.to_dict()["low"] is None and one.to_dict()["high"] is None


def test_the_schema_takes_the_sections_and_refuses_a_broken_one():
    from tests.unit.fakes import FAKE_ENV, open_fake_session
    from tests.unit.test_runner import cell
    from winml_perf.measure.runner import run_cell
    from winml_perf.record.build import cell_record
    from winml_perf.record.validation import validate_record
    from winml_perf.support.errors import StoreError

    result = run_cell(cell(), open_fake_session, sample_memory=False)
    doc = cell_record(result, run_id="0" * 32, environment=FAKE_ENV).to_dict()
    doc["route"]["perplexity"] = PPL.to_dict()
    doc["route"]["equivalence"] = replace(_equivalence(), perplexity=DIFF).to_dict()
    validate_record(doc)
    doc["route"]["perplexity_not_measured"] = "lm_head: static shapes"
    validate_record(doc)
    broken = {k: v for k, v in PPL.to_dict().items() if k != "chunk_nll"}
    with pytest.raises(StoreError, match="perplexity"):
        validate_record({**doc, "route": {**doc["route"], "perplexity": broken}})
    doc["route"]["equivalence"] = replace(_equivalence(), perplexity=AGREED).to_dict()
    validate_record(doc)  # KL and top-1 over the text
    older = {k: v for k, v in DIFF.to_dict().items() if not k.startswith(("kl_", "top1_", "positions", "chunk_"))}
    doc["route"]["equivalence"]["perplexity"] = older
    validate_record(doc)  # a record written before them
    doc["route"]["equivalence"]["perplexity"] = {**AGREED.to_dict(), "top1_agreement": 1.5}
    with pytest.raises(StoreError, match="top1_agreement"):
        validate_record(doc)


def test_the_packaged_text_is_the_committed_test_copy():
    from winml_perf.equivalence.perplexity import DEFAULT_TEXT

    copy = Path(__file__).resolve().parents[1] / "data" / "real_model" / "coriolanus-act1.txt"
    assert DEFAULT_TEXT.read_bytes() == copy.read_bytes() and len(DEFAULT_TEXT.read_text(encoding="utf-8")) == 15957
