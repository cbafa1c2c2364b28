"""Teacher-forced logit comparison and the equivalence verdict, as pure functions (issue 24).

Both sides see the same tokens, so step k's logits are comparable for every k even after the
greedy choices would have parted. The thresholds are named here and explained, with how they were
measured, in docs/equivalence.md.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from winml_perf.model.equivalence import (
    EQUIVALENT,
    NOT_EQUIVALENT,
    WITHIN_PRECISION,
    Band,
    EquivalenceVerdict,
    LogitFigures,
    StageFigures,
)

#: A band admits a route up to this multiple of the KL (mean) the band's change produced on the reference
#: (docs/equivalence.md: weights scaled uniformly by 3 % land at 2.4-2.8x the tiny bundles' precision band).
BAND_FACTOR = 2.0
#: The least KL (mean, nats) a noise-floor band admits, for references whose noise floor is 0 (bit-equal
#: at every optimisation level): float32 summation order alone moves logits about this much.
KL_NOISE_MIN = 1e-6
#: A route agreeing on fewer steps' argmax than this share is not equivalent whatever its KL.
TOP1_MIN_EQUIVALENT = 0.9
#: A stage's output departs when its max |Δ| over the reference's max |value| exceeds this.
STAGE_REL_TOLERANCE = 1e-3
TOP_K = 5

Logits = NDArray[np.floating]


def _log_softmax(x: NDArray[np.float64]) -> NDArray[np.float64]:
    shifted = x - x.max(axis=-1, keepdims=True)
    out: NDArray[np.float64] = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return out


def _as_steps(a: Logits, name: str) -> NDArray[np.float64]:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ValueError(f"{name}: logits must be steps x vocabulary with at least one step, not {arr.shape}")
    return arr


def kl_per_step(reference: Logits, route: Logits) -> NDArray[np.float64]:
    """KL(reference || route) in nats, one value per step."""
    ref, other = _as_steps(reference, "reference"), _as_steps(route, "route")
    lp, lq = _log_softmax(ref), _log_softmax(other)
    kl: NDArray[np.float64] = np.maximum((np.exp(lp) * (lp - lq)).sum(axis=-1), 0.0)
    return kl


def compare_logits(reference: Logits, route: Logits) -> LogitFigures:
    """The figures of ``route`` against ``reference`` (both steps x vocabulary, the same tokens fed)."""
    ref, other = _as_steps(reference, "reference"), _as_steps(route, "route")
    if ref.shape != other.shape:
        raise ValueError(f"logit shapes differ: reference {ref.shape}, route {other.shape}")
    kl = kl_per_step(ref, other)
    spread = np.maximum(ref.max(axis=-1) - ref.min(axis=-1), np.finfo(np.float64).tiny)
    delta = (np.abs(ref - other).max(axis=-1) / spread).max()
    top1 = ref.argmax(axis=-1) == other.argmax(axis=-1)
    k = min(TOP_K, ref.shape[1])
    overlap = [len(set(a) & set(b)) / k for a, b in zip(top_k(ref, k), top_k(other, k))]
    misses = np.flatnonzero(~top1)
    return LogitFigures(
        steps=int(ref.shape[0]),
        kl_mean=float(kl.mean()),
        kl_max=float(kl.max()),
        max_abs_delta=float(delta),
        top1_agreement=float(top1.mean()),
        top5_overlap=float(np.mean(overlap)),
        first_divergence=int(misses[0]) if misses.size else None,
        identical=bool(np.array_equal(np.asarray(reference), np.asarray(route))),
    )


def top_k(rows: NDArray[np.floating], k: int) -> list[list[int]]:
    """Each row's k largest entries' indices, ties broken by the lower index: the first k of a stable
    descending sort, found in linear time (a vocabulary of 150k entries sorted per step was most of a
    comparison)."""
    kth = -np.partition(-rows, k - 1, axis=-1)[:, k - 1 : k]  # each row's k-th largest value
    out = []
    for row, bound in zip(rows, kth[:, 0]):
        above = np.flatnonzero(row > bound)
        tied = np.flatnonzero(row == bound)[: k - above.size]
        out.append(sorted([*above.tolist(), *tied.tolist()]))
    return out


def band_limit(figures: LogitFigures, floor: float = 0.0) -> float:
    """The KL (mean) up to which a route sits inside the band a change of the reference produced."""
    return max(BAND_FACTOR * figures.kl_mean, floor)


def verdict(figures: LogitFigures, noise: Band | None, precision: Band | None) -> EquivalenceVerdict:
    """equivalent (inside the noise floor's band) / within precision tolerance / not equivalent.

    Without a measured noise floor only bit-equal logits are equivalent."""
    if figures.identical:
        return EQUIVALENT
    if figures.top1_agreement < TOP1_MIN_EQUIVALENT and (precision is None or figures.kl_mean > precision.kl_limit):
        return NOT_EQUIVALENT
    if noise is not None and figures.kl_mean <= noise.kl_limit and figures.top1_agreement >= TOP1_MIN_EQUIVALENT:
        return EQUIVALENT
    if precision is not None and figures.kl_mean <= precision.kl_limit:
        return WITHIN_PRECISION
    return NOT_EQUIVALENT


def compare_tensors(stage: str, output: str, reference: list[Logits], route: list[Logits]) -> StageFigures:
    """A stage output per step against the reference's: max abs and relative error, lowest cosine."""
    if len(reference) != len(route) or not reference:
        raise ValueError(f"{stage}/{output}: {len(reference)} reference steps against {len(route)}")
    max_abs, max_rel, cos_min = 0.0, 0.0, 1.0
    for a, b in zip(reference, route):
        x, y = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
        if x.shape != y.shape:
            raise ValueError(f"{stage}/{output}: shapes differ: {np.shape(a)} against {np.shape(b)}")
        d = float(np.abs(x - y).max()) if x.size else 0.0
        scale = float(np.abs(x).max()) if x.size else 0.0
        norms = float(np.linalg.norm(x) * np.linalg.norm(y))
        cos = float(x @ y / norms) if norms > 0 else (1.0 if d == 0 else 0.0)
        max_abs, max_rel, cos_min = max(max_abs, d), max(max_rel, d / scale if scale else d), min(cos_min, cos)
    return StageFigures(stage, output, len(reference), max_abs, max_rel, cos_min)


def first_departing_stage(stages: list[StageFigures]) -> str | None:
    """The first stage (in the order given: pipeline order) whose output departs beyond tolerance."""
    for s in stages:
        if s.max_rel > STAGE_REL_TOLERANCE:
            return s.stage
    return None
