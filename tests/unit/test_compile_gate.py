"""Issue 23 finding 1: a forced route whose compile failed was measured and labelled as the compiled route.

Failed before: there was no gate, so `perf --compile` reported `ep=qnn` (exit 0) over source models."""

from __future__ import annotations

import pytest

from winml_perf.bundle.epcontext.gate import UNCOMPILED_MARK, settle_compile
from winml_perf.model.route import BUNDLE, CompileOutcome, Route
from winml_perf.support.errors import EXIT_FAILURE, BenchmarkFailure

QNN = "QNNExecutionProvider"


def _route(*outcomes: CompileOutcome) -> Route:
    return Route("ep=qnn", "ep=qnn", "ep=qnn", kind=BUNDLE, compile=outcomes)


COMPILED = CompileOutcome(("iterator",), "it.onnx", QNN, "iterator_qnn_ctx.onnx", "compiled")
NOTHING = CompileOutcome(("lm_head",), "lm_head.onnx", QNN, None, "nothing to compile", "qnn claims no node")
FAILED = CompileOutcome(("context",), "ctx.onnx", QNN, None, "failed", "EP_FAIL: graph inputs")


def test_a_route_whose_compiles_all_succeeded_or_had_nothing_to_do_is_unchanged():
    route = _route(COMPILED, NOTHING)
    assert settle_compile(route, allow_uncompiled=False) is route


@pytest.mark.parametrize("status", ["failed", "timeout"])
def test_a_failed_compile_fails_the_route_naming_the_stage_and_the_reason(status):
    bad = CompileOutcome(("context",), "ctx.onnx", QNN, None, status, "EP_FAIL: graph inputs")
    with pytest.raises(BenchmarkFailure) as info:
        settle_compile(_route(COMPILED, bad), allow_uncompiled=False)
    assert info.value.exit_code == EXIT_FAILURE
    assert "context (ctx.onnx)" in info.value.message and "EP_FAIL" in info.value.message
    assert "--allow-uncompiled" in (info.value.remedy or "")


def test_allow_uncompiled_measures_it_under_a_label_that_says_so():
    route = settle_compile(_route(COMPILED, FAILED), allow_uncompiled=True)
    assert route.label == "ep=qnn" + UNCOMPILED_MARK
    assert any("context" in w and "--allow-uncompiled" in w for w in route.warnings)
