"""A plain ONNX model's outputs against the reference's (issue 24): the per-output figures and
verdicts (stats/outputs/equivalence.py), the record's shape (model/output_equivalence.py, the
schema's kind 'outputs') and how a route is judged (equivalence/onnx_outputs.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.results_fakes import hex_id, make_cell
from winml_perf.equivalence.onnx_outputs import Inference, judge_inference, same_feeds
from winml_perf.model.equivalence import EQUIVALENT, NOT_EQUIVALENT, WITHIN_PRECISION
from winml_perf.model.equivalence_view import view_of
from winml_perf.model.output_equivalence import OutputEquivalence, route_equivalence_from_dict
from winml_perf.model.route import Route
from winml_perf.stats.outputs.equivalence import EQUIVALENT_REL, PRECISION_REL, compare_output, route_verdict
from winml_perf.support.errors import StoreError

rng = np.random.default_rng(3)
Y = rng.standard_normal((2, 64)).astype(np.float32)


def _scaled(rel: float) -> np.ndarray:
    """Y with its largest value moved by ``rel`` of max |Y| (the relative error compare_output reports)."""
    out = Y.copy()
    i = np.unravel_index(np.abs(Y).argmax(), Y.shape)
    out[i] += np.float32(rel * np.abs(Y).max())
    return out


def test_verdicts_follow_the_documented_thresholds():
    assert compare_output("y", Y, Y.copy()).verdict == EQUIVALENT and compare_output("y", Y, Y.copy()).identical
    assert compare_output("y", Y, _scaled(EQUIVALENT_REL / 10)).verdict == EQUIVALENT
    fp16 = Y.astype(np.float16).astype(np.float32)  # float16 rounding alone
    assert compare_output("y", Y, fp16).verdict == WITHIN_PRECISION
    assert compare_output("y", Y, _scaled(PRECISION_REL * 2)).verdict == NOT_EQUIVALENT
    few_percent = (Y * rng.normal(1.0, 0.03, Y.shape)).astype(np.float32)  # a model changed a few per cent
    assert compare_output("y", Y, few_percent).verdict == NOT_EQUIVALENT


def test_shapes_types_nans_and_integers_are_never_passed_over():
    assert compare_output("y", Y, Y[:1]).verdict == NOT_EQUIVALENT
    assert "shape" in (compare_output("y", Y, Y[:1]).note or "")
    assert compare_output("y", Y, Y.astype(np.float64)).verdict == NOT_EQUIVALENT
    with_nan = Y.copy()
    with_nan[0, 0] = np.nan
    assert compare_output("y", Y, with_nan).verdict == NOT_EQUIVALENT
    assert compare_output("y", with_nan, with_nan.copy()).verdict == EQUIVALENT  # NaN where both have it
    ids = np.arange(6, dtype=np.int64)
    off_by_one = ids.copy()
    off_by_one[5] += 1
    assert compare_output("ids", ids, off_by_one).verdict == NOT_EQUIVALENT  # integers: equal or not
    assert compare_output("zeros", np.zeros(4, np.float32), np.ones(4, np.float32)).verdict == NOT_EQUIVALENT


def test_a_route_is_as_good_as_its_worst_output_and_no_output_is_skipped():
    ref = Inference({"a": Y, "b": Y, "ids": np.arange(3)}, {"x": Y})
    run = Inference({"a": Y.copy(), "b": Y.astype(np.float16).astype(np.float32), "extra": Y}, {"x": Y.copy()})
    figures = judge_inference(ref, run)
    assert [f.name for f in figures] == ["a", "b", "ids", "extra"]
    by = {f.name: f for f in figures}
    assert by["a"].verdict == EQUIVALENT and by["b"].verdict == WITHIN_PRECISION
    assert by["ids"].verdict == NOT_EQUIVALENT and by["ids"].note == "missing"
    assert by["extra"].verdict == NOT_EQUIVALENT
    assert route_verdict(figures) == NOT_EQUIVALENT
    assert route_verdict(figures[:2]) == WITHIN_PRECISION and route_verdict([]) == NOT_EQUIVALENT
    assert same_feeds({"x": Y}, {"x": Y.copy()}) and not same_feeds({"x": Y}, {"x": _scaled(1e-3)})


def _judged() -> OutputEquivalence:
    ref = Inference({"y": Y, "ids": np.arange(3)}, {"x": Y})
    figures = judge_inference(ref, Inference({"y": _scaled(PRECISION_REL * 4), "ids": np.arange(3)}, {"x": Y}))
    return OutputEquivalence("config", "m.onnx", "m.onnx", 0, ("x",), tuple(figures), route_verdict(figures), 12.0)


def test_the_record_round_trips_and_the_views_read_it():
    e = _judged()
    d = e.to_dict()
    assert d["kind"] == "outputs" and route_equivalence_from_dict(d) == e
    route = Route.from_dict({"label": "ep=x", "equivalence": d})
    assert route.equivalence == e and route.to_dict()["equivalence"] == d
    v = view_of(d)
    assert v.not_equivalent and v.kind == "outputs" and v.max_rel_error == pytest.approx(PRECISION_REL * 4, rel=1e-3)


def test_the_schema_takes_the_outputs_shape_and_refuses_a_half_one():
    from winml_perf.compare.run_summary import route_verdicts
    from winml_perf.record.validation import validated_cell

    d = _judged().to_dict()
    cell = make_cell(hex_id("outputs"), route="ep=x", equivalence=d)
    validated_cell(cell)
    assert route_verdicts({"cells": [cell]})["ep=x"].startswith("NOT equivalent: max abs")
    broken = make_cell(hex_id("outputs"), route="ep=x", equivalence={k: v for k, v in d.items() if k != "outputs"})
    with pytest.raises(StoreError):
        validated_cell(broken)
