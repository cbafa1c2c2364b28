"""What the equivalence checks say, and the one place they say it: stderr, before the sweep.

Every line a check prints is made here: a genai bundle's routes (``equivalence_line``, with
``layers_line``) and its cost (``cost_line``), a plain ONNX model's routes (``outputs_line``) and its
cost (``outputs_cost_line``), each route's perplexity (``perplexity_line``), and the tune's lines
(``check_prompt_line``, ``pooled_line``, ``pooled_cost_line``: the tune prints them in its report).
Both checks of `winml perf` print through ``say_check`` (or ``say_unjudged`` when their reference
cannot run), perplexity through ``say_perplexity``; no other module of the room prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from winml_perf.equivalence.check import CONFIG, CheckCost, EquivalenceRun
from winml_perf.model.equivalence import (
    EQUIVALENT,
    NOT_EQUIVALENT,
    SAME_MODEL_QUESTION,
    WITHIN_PRECISION,
    Equivalence,
    Layers,
    precision_class,
)
from winml_perf.model.output_equivalence import OutputEquivalence
from winml_perf.model.perplexity import Perplexity, PerplexityDifference
from winml_perf.support.text_table import say

if TYPE_CHECKING:
    from winml_perf.equivalence.onnx_outputs import OutputsRun
    from winml_perf.equivalence.passes.model_pool import ModelPool
    from winml_perf.equivalence.perplexity import Chunks, Measured


class JudgedRoutes(Protocol):
    """What a check found: each judged route's verdict by label, and why each other route was not judged."""

    @property
    def by_label(self) -> Mapping[str, Any]: ...

    @property
    def errors(self) -> Mapping[str, str]: ...


def say_check(run: JudgedRoutes, line: Callable[[str, Any], str], cost: str) -> None:
    """What one check found, on stderr: each judged route's ``line(label, verdict)``, each route not
    judged and why, then the check's ``cost`` line. A genai bundle's check says it with
    ``equivalence_line`` and ``cost_line``, a plain ONNX model's with ``outputs_line`` and
    ``outputs_cost_line``."""
    for label, judged in run.by_label.items():
        say(line(label, judged))
    for label, why in run.errors.items():
        say(f"equivalence: {label} not judged: {why}")
    say(cost)


def say_unjudged(why: str) -> None:
    """No route judged: the check's reference itself could not run (``why``)."""
    say(f"equivalence: not judged: {why}")


def say_perplexity(
    labels: Sequence[str],
    m: Measured,
    diffs: Mapping[str, PerplexityDifference],
    ref_label: str | None,
    reference_bundle: bool,
    chunks: Chunks,
    seconds: float,
) -> None:
    """What --perplexity found, on stderr: the reference bundle's perplexity (``reference_bundle``: it
    is none of the routes), each route's (with its ``diffs`` against the reference) or why it was not
    measured, a ratio that could not be taken, and the passes' cost."""
    reference = m.perplexity.get(ref_label) if ref_label else None
    if reference_bundle and reference is not None:
        say(perplexity_line(str(ref_label), reference, None))
    for label in labels:
        p = m.perplexity.get(label)
        if p is None:
            say(f"perplexity: {label} not measured: {m.failed.get(label, 'not measured')}")
            continue
        say(perplexity_line(label, p, diffs.get(label)))
        if label in m.agreement_failed:
            say(f"perplexity: {label} KL and top-1 not measured: {m.agreement_failed[label]}")
    if ref_label and reference is None and ref_label in m.failed:
        say(f"perplexity: no ratio: the reference {ref_label} was not measured ({m.failed[ref_label]})")
    t = chunks.text
    say(
        f"perplexity: {m.passes} pass(es) of {t.chunks} x {t.chunk} tokens ({t.tokens} tokens of "
        f"{t.name}) in {seconds:.1f} s, outside the timed iterations"
    )


def cost_line(
    runs: Sequence[EquivalenceRun], cost: CheckCost, cached: bool, where: str = "outside the timed iterations"
) -> str:
    """'equivalence: 9 route(s) against config in 3.2 s (6 from cache, 3 judged: reference 1.1 s, bands
    1.4 s, routes 0.7 s), outside the timed iterations' over one check or several (one per prompt), whose
    costs added up are ``cost`` (one check's own ``run.cost``)."""
    n = sum(len(run.by_label) + len(run.errors) for run in runs)
    seconds = sum(run.cost_ms for run in runs) / 1000.0
    prompts = f" over {len(runs)} check prompts" if len(runs) > 1 else ""
    parts = [f"{cost.from_cache} from cache"] if cached else []
    if cost.shared:
        parts.append(f"{cost.shared} shared (same content)")
    judged = f"{cost.judged} judged"
    if cost.judged:
        judged += (
            f": reference {cost.reference_ms / 1000:.1f} s, bands {cost.bands_ms / 1000:.1f} s, "
            f"routes {cost.routes_ms / 1000:.1f} s"
        )
        if cost.route_loads_ms or cost.route_steps_ms or cost.route_layers_ms:
            lanes = (
                f"teacher-forced passes in {cost.pass_processes} processes beside each other, "
                f"{cost.route_passes_waited_ms / 1000:.1f} s of them waited for: "
                if cost.pass_processes
                else ""
            )
            judged += (
                f" ({lanes}model loads {cost.route_loads_ms / 1000:.1f} s, teacher-forced steps "
                f"{cost.route_steps_ms / 1000:.1f} s, letting go {cost.route_release_ms / 1000:.1f} s, comparing "
                f"{cost.route_compare_ms / 1000:.1f} s; beside them, layer passes {cost.route_layers_ms / 1000:.1f} s, "
                f"{cost.route_layers_waited_ms / 1000:.1f} s of it waited for"
                + (
                    f"; in turn, layer passes {cost.route_layers_in_turn_ms / 1000:.1f} s"
                    if cost.route_layers_in_turn_ms
                    else ""
                )
                + ")"
            )
    if cost.layer_passes:
        judged += f"; layer passes {cost.layer_passes} run"
        if cost.layer_tap_ms or cost.layer_run_ms:
            judged += (
                f" (rewriting {cost.layer_tap_ms / 1000:.1f} s, sessions and runs {cost.layer_run_ms / 1000:.1f} s)"
            )
        if cost.layer_passes_shared:
            judged += f", {cost.layer_passes_shared} shared"
    parts.append(judged)
    if cached:
        parts.append(f"content keys {cost.keys_ms / 1000:.1f} s")
    head = f"equivalence: {n} route(s){prompts} against {runs[0].reference if runs else CONFIG}"
    return f"{head} in {seconds:.1f} s ({', '.join(parts)}), {where}"


#: The sign of a verdict between two labels (within precision tolerance: ~).
_MARKS: dict[str, str] = {EQUIVALENT: "≈", NOT_EQUIVALENT: "≉"}


def equivalence_line(label: str, e: Equivalence) -> str:
    """'ep=webgpu ≈ config: KL 2e-06, top-1 100 % over 16 steps' (≉ when not equivalent)."""
    f = e.figures
    mark = _MARKS.get(e.verdict, "~")
    same = e.question == SAME_MODEL_QUESTION
    verdict = "not the same model" if same and e.verdict == NOT_EQUIVALENT else e.verdict
    text = f"{label} {mark} {e.reference}: {verdict}, "
    text += (
        "bit-identical logits"
        if f.identical
        else f"KL {f.kl_mean:.2g} (max {f.kl_max:.2g}), top-1 {f.top1_agreement:.0%}"
    )
    text += f" over {f.steps} steps"
    if f.first_divergence is not None:
        text += f", diverges at step {f.first_divergence}"
    if e.first_stage:
        text += f", first at stage {e.first_stage}"
    band = next((b for b in e.bands if b.name == "precision"), None)
    if e.verdict == WITHIN_PRECISION and band is not None:  # the precision class it was judged in
        text += f"; judged in the band of {band.change} (KL limit {band.kl_limit:.2g})"
    text += (
        "\n  asked: is this the same model? (the reference's EP, options and precision: its noise floor decides)"
        if same
        else "\n  asked: is the difference what a change of precision does? (another EP or precision: the precision band decides)"
    )
    if e.layers is not None:
        text += "\n  " + layers_line(e.layers)
    if e.precision:
        text += f"\n  precision: {label} {e.precision_class} | {e.reference} {precision_class(e.reference_precision)}"
    return text


def layers_line(layers: Layers) -> str:
    """'layers: parts at layer 3 (context/iterator), jump: rel. 0.21 against limit 0.018; 24 layers, max rel 0.5'."""
    figs = layers.figures
    if not figs:
        return "layers: none observed" + (f" ({'; '.join(layers.unobserved)})" if layers.unobserved else "")
    worst = max(f.max_rel for f in figs)
    span = f"{len(figs)} layer(s) against the reference's {layers.band} band, max rel. error {worst:.2g}"
    wrong = next((x for x in figs if x.layer == layers.first_wrong), None)
    if wrong is not None and wrong.local_rel is not None:
        head = (
            f"layers: layer {wrong.layer} ({wrong.stage}) computes something else: its own error, fed the "
            f"reference's input, rel. {wrong.local_rel:.2g} against limit {wrong.local_limit:.2g}"
        )
        if layers.first_departing is not None:
            head += f"; accumulated error beyond the band from layer {layers.first_departing}"
    elif layers.first_departing is None:
        head = "layers: inside the band at every layer" if worst > 0 else "layers: bit-identical at every layer"
    else:
        f = next(x for x in figs if x.layer == layers.first_departing)
        head = (
            f"layers: parts at layer {f.layer} ({f.stage}) by {layers.pattern}: rel. error {f.max_rel:.2g} "
            f"against limit {f.limit:.2g}, cosine {f.cosine_min:.4f}"
        )
    text = f"{head}; {span}"
    if layers.unobserved:
        text += f"; unobserved: {'; '.join(layers.unobserved)}"
    return text


def outputs_line(label: str, e: OutputEquivalence) -> str:
    """'ep=webgpu ~ config: within precision tolerance, 1 output(s): max rel 1.1e-03, cosine 0.9999998'."""
    mark = _MARKS.get(e.verdict, "~")
    rels = [o.max_rel for o in e.outputs if o.max_rel is not None]
    cosines = [o.cosine for o in e.outputs if o.cosine is not None]
    text = f"{label} {mark} {e.reference}: {e.verdict}, {len(e.outputs)} output(s)"
    if all(o.identical for o in e.outputs):
        return text + ": bit-identical"
    if rels:
        text += f": max abs {max(o.max_abs or 0.0 for o in e.outputs):.2g}, max rel {max(rels):.2g}"
    if cosines:
        text += f", cosine {min(cosines):.7g}"
    worst = [o for o in e.outputs if o.verdict == e.verdict and o.verdict != "equivalent"]
    if worst:
        text += f"; worst: {', '.join(o.name + (f' ({o.note})' if o.note else '') for o in worst)}"
    return text


def outputs_cost_line(run: OutputsRun) -> str:
    """'equivalence: 2 route(s) against config by every output in 0.4 s, outside the timed iterations'."""
    return (
        f"equivalence: {len(run.by_label)} route(s) against {run.reference} by every output in"
        f" {run.cost_ms / 1000:.1f} s, outside the timed iterations"
    )


def _interval(low: float | None, high: float | None, digits: str) -> str:
    if low is None or high is None:
        return "(no interval: one chunk)"
    return f"[{low:{digits}}, {high:{digits}}]"


def agreement_text(diff: PerplexityDifference) -> str:
    """'KL 0.0045 [0.0031, 0.0060], top-1 96.2 % over 2,304 positions'; '' when not measured."""
    if diff.kl_mean is None or diff.top1_agreement is None:
        return ""
    return (
        f"KL {diff.kl_mean:.4g} {_interval(diff.kl_low, diff.kl_high, '.4g')}, "
        f"top-1 {diff.top1_agreement * 100:.1f} % over {diff.positions or 0:,} positions"
    )


def perplexity_line(label: str, p: Perplexity, diff: PerplexityDifference | None) -> str:
    """'perplexity: ep=qnn 23.41 [21.9, 25.0] over 8 chunks of 512 tokens of coriolanus-act1.txt (95 %);
    ×1.0123 [1.004, 1.021] against config; KL 0.0045 [0.0031, 0.006], top-1 96.2 % over 2,040 positions'."""
    t = p.text
    text = (
        f"perplexity: {label} {p.perplexity:.4g} {_interval(p.low, p.high, '.4g')} over {t.chunks} chunk(s) of "
        f"{t.chunk} tokens of {t.name} ({p.confidence:.0%}, over this text's chunks)"
    )
    if diff is not None:
        if diff.identical:
            text += f"; ×1 exactly against {diff.reference} (identical on every chunk)"
        else:
            text += f"; ×{diff.ratio:.4f} {_interval(diff.low, diff.high, '.4f')} against {diff.reference}"
        agreement = agreement_text(diff)
        text += f"; {agreement}" if agreement else ""
    return text


def check_prompt_line(label: str, e: Equivalence, seed: int) -> str:
    """The first line of ``equivalence_line``, and the check prompt's seed it was judged on."""
    return equivalence_line(label, e).splitlines()[0] + f" (check prompt: seed {seed})"


def pooled_line(label: str, verdict: str, kl_limits: Sequence[tuple[float, float | None]], seeds: Sequence[int]) -> str:
    """'ep=qnn ~ config: equivalent over 3 check prompts (seeds 0, 1, 2): mean KL 0.01 against the mean
    limit 0.03 (0.33×; per prompt 0.30×, 0.35×, 0.34×)', from each prompt's (KL, its limit)."""
    ratios = ", ".join(f"{kl / (limit or 1.0):.2f}×" for kl, limit in kl_limits)
    kl = sum(k for k, _ in kl_limits) / len(kl_limits)
    limit = sum(lim or 0.0 for _, lim in kl_limits) / len(kl_limits)
    return (
        f"{label} ~ config: {verdict} over {len(kl_limits)} check prompts (seeds {', '.join(map(str, seeds))}): "
        f"mean KL {kl:.2g} against the mean limit {limit:.2g} ({kl / limit:.2f}×; per prompt {ratios})"
    )


def pooled_cost_line(runs: Sequence[EquivalenceRun], cost: CheckCost, cache: bool, pool: ModelPool) -> str:
    """``cost_line`` over every prompt's check before the race (``cost``: their costs added up), and what
    the check's ``pool`` loaded and opened, and took kept from an earlier prompt."""
    line = cost_line(runs, cost, cache, where="before the race")
    if pool.reused:
        line += f"; {pool.loads} model load(s), {pool.reused} pass(es) on a model kept from an earlier prompt"
    if pool.sessions_reused:
        line += (
            f"; {pool.sessions_opened} layer session(s) opened, "
            f"{pool.sessions_reused} layer pass(es) on a session kept from an earlier prompt"
        )
    return line
