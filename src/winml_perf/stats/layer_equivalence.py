"""Where two routes part inside a model (issue 24): each decoder layer's output against the
reference's, the first layer beyond the reference's own band at that layer, and whether the error
grew through the layers or jumped at one (a kernel computing something else). Pure functions;
the thresholds are explained, with how they were measured, in docs/equivalence.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from winml_perf.model.equivalence import GROWTH, JUMP, LayerFigures
from winml_perf.stats.equivalence import BAND_FACTOR, compare_tensors

#: The least relative error a layer's limit admits, for bands that are 0 at a layer (bit-equal):
#: float32 reordering of a sum moves a layer's output by about 1e-6 of its largest value, float16 by
#: about 1e-3; the floor sits between, so an fp32 kernel's reordering never "departs" on its own.
LAYER_REL_FLOOR = 1e-4
#: A layer whose own error (fed the reference's input) is this many times the band's own error at
#: that layer computes something else (a wrong kernel, other weights), not another precision. Without
#: that pass: a departing layer whose error is this many times the layer before's (at the first
#: layer: the band's own error there) jumped there.
JUMP_FACTOR = 10.0


def _positions(a: NDArray[np.floating]) -> list[NDArray[np.floating]]:
    """A layer output (1 x S x hidden, or S x hidden) as S position vectors."""
    arr = np.asarray(a)
    return list(arr.reshape(-1, arr.shape[-1]))


Arrays = Mapping[int, NDArray[np.floating]]


@dataclass(frozen=True)
class LocalPasses:
    """The layer-by-layer (teacher-fed) passes: each layer fed the reference's output of the layer
    before, on the reference and on the route, and the band's own error per layer in that pass."""

    reference: Arrays
    route: Arrays
    band: Mapping[int, float]


def _limit(band: Mapping[int, float] | None, k: int) -> float:
    return max(BAND_FACTOR * (band or {}).get(k, 0.0), LAYER_REL_FLOOR)


def layer_figures(
    stage_of: Mapping[int, str],
    tensor_of: Mapping[int, str],
    reference: Arrays,
    route: Arrays,
    band: Mapping[int, float] | None = None,
    local: LocalPasses | None = None,
) -> list[LayerFigures]:
    """Every layer both sides observed, in layer order: max abs and relative error over positions,
    lowest cosine, and the layer's limit (BAND_FACTOR x the band's relative error there, at least
    LAYER_REL_FLOOR); with ``local``, the layer's own error and limit likewise."""
    out = []
    for k in sorted(set(reference) & set(route)):
        s = compare_tensors(stage_of.get(k, ""), tensor_of.get(k, ""), _positions(reference[k]), _positions(route[k]))
        f = LayerFigures(s.stage, k, s.output, s.steps, s.max_abs, s.max_rel, s.cosine_min, _limit(band, k))
        if local is not None and k in local.reference and k in local.route:
            own = compare_tensors(s.stage, s.output, _positions(local.reference[k]), _positions(local.route[k]))
            own_limit = max(JUMP_FACTOR * local.band.get(k, 0.0), LAYER_REL_FLOOR)
            f = replace(f, local_rel=own.max_rel, local_cosine_min=own.cosine_min, local_limit=own_limit)
        out.append(f)
    return out


def first_wrong(figures: Sequence[LayerFigures]) -> LayerFigures | None:
    """The first layer whose own error (fed the reference's input) exceeds its own limit: a layer
    that computes something else, wherever the error accumulated before it stood."""
    return next(
        (f for f in figures if f.local_rel is not None and f.local_limit is not None and f.local_rel > f.local_limit),
        None,
    )


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
    """With the layers' own errors measured: JUMP when a layer's own error is beyond its band, GROWTH
    when only the accumulated error departs, None when nothing does. Without them: JUMP when the first
    departing layer's error is JUMP_FACTOR x the layer before's (at the first layer: the band's own
    error there), GROWTH when it departs gradually."""
    if any(f.local_rel is not None for f in figures):
        return JUMP if first_wrong(figures) else GROWTH if first_departing(figures) else None
    depart = first_departing(figures)
    if depart is None:
        return None
    i = list(figures).index(depart)
    before = figures[i - 1].max_rel if i > 0 else depart.limit / BAND_FACTOR
    return JUMP if depart.max_rel >= JUMP_FACTOR * max(before, LAYER_REL_FLOOR) else GROWTH
