"""The reference's own bands (issue 24): its noise floor (another graph optimisation level) and its
precision band (another MatMulNBits accuracy level, or fp16 on the CPU EP where the reference's EP
ignores its precision flip), each judged by the same teacher-forced pass as a route; the variants are
bundle/variants.py's."""

from __future__ import annotations

from pathlib import Path

from winml_perf.equivalence.layers import LayerBands
from winml_perf.equivalence.passes.genai_logits import TeacherForced
from winml_perf.equivalence.passes.kept_variants import release, variant
from winml_perf.model.equivalence import Band


def _band(
    name: str,
    change: str,
    path: Path,
    reference: TeacherForced,
    prompt_ids: list[int],
    floor: float,
    layers: LayerBands | None = None,
) -> Band:
    from winml_perf.equivalence.passes.genai_logits import teacher_forced
    from winml_perf.stats.equivalence import band_limit, compare_logits

    try:
        run = teacher_forced(path, prompt_ids, len(reference.continuation), reference.continuation)
        if layers is not None:  # the same change's error at each decoder layer
            layers.measure_band(name, None, path)
    finally:
        release(path)
    figures = compare_logits(reference.logits, run.logits)
    return Band(name, change, figures, band_limit(figures, floor))


def reference_bands(
    reference_path: str, reference: TeacherForced, prompt_ids: list[int], layers: LayerBands | None = None
) -> tuple[Band, Band | None]:
    """The reference's noise floor (another graph optimisation level) and precision band (another
    MatMulNBits accuracy level; None when it has no MatMulNBits); with ``layers``, each band's
    relative error at every decoder layer too."""
    from winml_perf.bundle.variants import NOISE_LEVEL, fp16_cpu_variants, optimization_variant, precision_variant
    from winml_perf.stats.equivalence import KL_NOISE_MIN

    src = Path(reference_path)
    noise = _band(
        "noise floor",
        f"graph_optimization_level {NOISE_LEVEL}",
        variant("noise", src, optimization_variant),
        reference,
        prompt_ids,
        KL_NOISE_MIN,
        layers,
    )
    made = variant("precision", src, precision_variant)
    precision = _band("precision", made[1], made[0], reference, prompt_ids, noise.kl_limit, layers) if made else None
    if precision is None or precision.figures.identical:  # no precision change, or one the EP ignores
        pair = variant("fp16", src, fp16_cpu_variants)
        if pair is not None:
            ignored = f"; {precision.change} changed nothing" if precision is not None else ""
            precision = _pair_band(
                "precision", pair[2] + ignored, pair[0], pair[1], reference, prompt_ids, noise.kl_limit, layers
            )
    return noise, precision


def _pair_band(
    name: str,
    change: str,
    before: Path,
    after: Path,
    reference: TeacherForced,
    prompt_ids: list[int],
    floor: float,
    layers: LayerBands | None,
) -> Band:
    """A band measured between two variants of the reference that differ only in ``change`` (not
    against the reference itself: the change cannot be made where the reference runs)."""
    from winml_perf.equivalence.passes.genai_logits import teacher_forced
    from winml_perf.stats.equivalence import band_limit, compare_logits

    try:
        a = teacher_forced(before, prompt_ids, len(reference.continuation), reference.continuation)
        b = teacher_forced(after, prompt_ids, len(reference.continuation), reference.continuation)
        if layers is not None:
            layers.measure_band(name, before, after)
    finally:
        release(before)
        release(after)
    figures = compare_logits(a.logits, b.logits)
    return Band(name, change, figures, band_limit(figures, floor))
