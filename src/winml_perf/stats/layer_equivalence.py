"""Where two routes part inside a model (issue 24): each decoder layer's output against the
reference's, the first layer beyond the reference's own band at that layer, and whether the error
grew through the layers or jumped at one (a kernel computing something else). Pure functions;
the thresholds are explained, with how they were measured, in docs/equivalence.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from winml_perf.model.equivalence import GROWTH, JUMP, LayerFigures
from winml_perf.stats.equivalence import BAND_FACTOR, compare_tensors

#: The least relative error a layer's limit admits, for bands that are 0 at a layer (bit-equal):
#: float32 reordering of a sum moves a layer's output by about 1e-6 of its largest value, float16 by
#: about 1e-3; the floor sits between, so an fp32 kernel's reordering never "departs" on its own.
LAYER_REL_FLOOR = 1e-4
#: A departing layer whose relative error is this many times the layer before's (at the first layer:
#: the band's own error there) jumped there: a kernel that computes something else, not growth.
JUMP_FACTOR = 10.0


def _positions(a: NDArray[np.floating]) -> list[NDArray[np.floating]]:
    """A layer output (1 x S x hidden, or S x hidden) as S position vectors."""
    arr = np.asarray(a)
    return list(arr.reshape(-1, arr.shape[-1]))


def layer_figures(
    stage_of: Mapping[int, str],
    tensor_of: Mapping[int, str],
    reference: Mapping[int, NDArray[np.floating]],
    route: Mapping[int, NDArray[np.floating]],
    band: Mapping[int, float] | None = None,
) -> list[LayerFigures]:
    """Every layer both sides observed, in layer order: max abs and relative error over positions,
    lowest cosine, and the layer's limit (BAND_FACTOR x the band's relative error there, at least
    LAYER_REL_FLOOR)."""
    out = []
    for k in sorted(set(reference) & set(route)):
        s = compare_tensors(stage_of.get(k, ""), tensor_of.get(k, ""), _positions(reference[k]), _positions(route[k]))
        limit = max(BAND_FACTOR * (band or {}).get(k, 0.0), LAYER_REL_FLOOR)
        out.append(LayerFigures(s.stage, k, s.output, s.steps, s.max_abs, s.max_rel, s.cosine_min, limit))
    return out


def band_errors(
    reference: Mapping[int, NDArray[np.floating]], changed: Mapping[int, NDArray[np.floating]]
) -> dict[int, float]:
    """{layer: relative error} that a change of the reference itself produces at each layer."""
    return {f.layer: f.max_rel for f in layer_figures({}, {}, reference, changed)}


def first_departing(figures: Sequence[LayerFigures]) -> LayerFigures | None:
    """The first layer whose relative error exceeds its limit."""
    return next((f for f in figures if f.max_rel > f.limit), None)


def first_differing(figures: Sequence[LayerFigures]) -> int | None:
    """The first layer whose output is not bit-equal to the reference's."""
    return next((f.layer for f in figures if f.max_abs > 0), None)


def pattern(figures: Sequence[LayerFigures]) -> str | None:
    """JUMP when the first departing layer's error is JUMP_FACTOR x the layer before's (at the first
    layer: the band's own error there), GROWTH when it departs gradually, None when none departs."""
    depart = first_departing(figures)
    if depart is None:
        return None
    i = list(figures).index(depart)
    before = figures[i - 1].max_rel if i > 0 else depart.limit / BAND_FACTOR
    return JUMP if depart.max_rel >= JUMP_FACTOR * max(before, LAYER_REL_FLOOR) else GROWTH
