"""A plain ONNX model's outputs against the reference route's, as pure functions (issue 24).

Per output: max |Δ|, max |Δ| over the reference's max |value| (relative error), and the cosine
similarity of the flattened outputs; a verdict per output and the worst of them per route. The
thresholds are named here and explained, with how they were measured, in docs/equivalence.md.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from winml_perf.model.equivalence import EQUIVALENT, NOT_EQUIVALENT, VERDICTS, WITHIN_PRECISION, EquivalenceVerdict
from winml_perf.model.output_equivalence import OutputFigures

Array = NDArray[np.generic]

#: A float output is equivalent up to this relative error: another EP's float32 kernels (WebGPU over
#: lavapipe, QNN's HTP emulator) measured up to 2.3e-7 on the test models, float16 compute 2.6e-4.
EQUIVALENT_REL = 1e-5
#: ... and within precision tolerance up to this one: float16 compute of the test MLPs measured up to
#: 4.5e-4; their weights scaled by 3 % (uniformly, or each by N(1, 0.03)) 5.2e-2 and above.
PRECISION_REL = 5e-3
#: Cosine similarity below which a float output is not within precision tolerance (float16 compute
#: measured >= 0.9999999; weights each scaled by N(1, 0.03) <= 0.9985).
PRECISION_COSINE_MIN = 0.9999


def _is_float(a: Array) -> bool:
    return bool(np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.complexfloating))


def _figures(name: str, ref: Array, out: Array, note: str | None, verdict: str) -> OutputFigures:
    return OutputFigures(name, str(ref.dtype), ref.shape, None, None, None, False, verdict, note)


def compare_output(name: str, reference: Array, route: Array) -> OutputFigures:
    """One output of a route against the reference's, with its verdict (output_verdict)."""
    ref, out = np.asarray(reference), np.asarray(route)
    if ref.shape != out.shape:
        return _figures(name, ref, out, f"shape {out.shape} against the reference's {ref.shape}", NOT_EQUIVALENT)
    if ref.dtype != out.dtype:
        return _figures(name, ref, out, f"type {out.dtype} against the reference's {ref.dtype}", NOT_EQUIVALENT)
    identical = bool(np.array_equal(ref, out, equal_nan=_is_float(ref)))
    if _is_float(ref):
        ref_nan, out_nan = np.isnan(ref), np.isnan(out)
        if not np.array_equal(ref_nan, out_nan):
            return _figures(name, ref, out, "NaN where the other side has a number", NOT_EQUIVALENT)
        ref, out = ref[~ref_nan], out[~out_nan]
    x, y = ref.astype(np.float64).ravel(), out.astype(np.float64).ravel()
    max_abs = float(np.abs(x - y).max()) if x.size else 0.0
    scale = float(np.abs(x).max()) if x.size else 0.0
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    norms = float(np.linalg.norm(x) * np.linalg.norm(y))
    cosine = float(np.clip(x @ y / norms, -1.0, 1.0)) if norms > 0 else (1.0 if max_abs == 0 else 0.0)
    if not np.isfinite(max_rel):  # the reference is all zero and the route is not: no scale to judge by
        return OutputFigures(name, str(ref.dtype), reference.shape, max_abs, None, cosine, False, NOT_EQUIVALENT,
                             "the reference output is all zero, the route's is not")  # fmt: skip
    figures = OutputFigures(name, str(ref.dtype), np.shape(reference), max_abs, max_rel, cosine, identical, EQUIVALENT)
    verdict = output_verdict(figures, floating=_is_float(ref))
    return OutputFigures(name, str(ref.dtype), np.shape(reference), max_abs, max_rel, cosine, identical, verdict)


def output_verdict(f: OutputFigures, floating: bool = True) -> EquivalenceVerdict:
    """equivalent (bit-equal, or a float output within EQUIVALENT_REL) / within precision tolerance
    (within PRECISION_REL and PRECISION_COSINE_MIN) / not equivalent; an integer or bool output is
    equivalent only when equal."""
    if f.identical:
        return EQUIVALENT
    if not floating or f.max_rel is None or f.cosine is None:
        return NOT_EQUIVALENT
    if f.max_rel <= EQUIVALENT_REL:
        return EQUIVALENT
    if f.max_rel <= PRECISION_REL and f.cosine >= PRECISION_COSINE_MIN:
        return WITHIN_PRECISION
    return NOT_EQUIVALENT


def route_verdict(outputs: list[OutputFigures]) -> EquivalenceVerdict:
    """The worst verdict of a route's outputs; a route without outputs compared is not equivalent."""
    if not outputs:
        return NOT_EQUIVALENT
    return EquivalenceVerdict(max((o.verdict for o in outputs), key=VERDICTS.index))
