"""Is a route still the same model? --check-outputs (greedy tokens) and the teacher-forced
equivalence check (issue 24: every step's logits against a reference, judged against the
reference's own noise floor and precision band; the math in stats/equivalence.py).

--check-outputs: does a forced route generate the same greedy tokens as the bundle's config route?

Runs once per route before measuring (so the check's time never enters a measurement), with a
fixed synthetic prompt: one short greedy generation on the source bundle, one on each forced route.
A route that is faster but changes outputs must not pass silently: a difference becomes a warning
in every record of that route, with the first differing position.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.equivalence.passes.kept_variants import release, variant
from winml_perf.equivalence.passes.layers_ahead import LayersAhead
from winml_perf.equivalence.passes.shared_passes import FilePass, FilePasses, PassClock, StageFile
from winml_perf.model.equivalence import NOT_EQUIVALENT, Band, Equivalence, Layers, StageFigures
from winml_perf.model.route import OutputCheck
from winml_perf.support.errors import BenchmarkFailure
from winml_perf.support.text_table import say

if TYPE_CHECKING:
    from winml_perf.equivalence.passes.layer_outputs import KvShape

# Under 32: WebGPU's attention over lavapipe departs from CPU at prompts of 32 tokens and more even in
# fp32 (measured), which would turn a precision artefact of the driver into a false alarm.
CHECK_PROMPT_TOKENS = 16
CHECK_NEW_TOKENS = 16


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first position where the sequences differ (length counts); None when equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _greedy(path: str, prompt_ids: list[int], n_new: int) -> list[int]:
    from winml_perf.session.genai_session import GenaiSession

    with GenaiSession(path) as s:
        return list(s.generate_timed(prompt_ids, n_new).token_ids)


def check_routes(
    bundle: str,
    routes: Sequence[Any],
    seed: int = 0,
    n_prompt: int = CHECK_PROMPT_TOKENS,
    n_new: int = CHECK_NEW_TOKENS,
) -> dict[str, OutputCheck]:
    """{route label: OutputCheck} for every route whose session path differs from the bundle."""
    from winml_perf.session.genai_session import GenaiSession

    prompt_ids = GenaiSession(bundle).synthetic_prompt(n_prompt, seed=seed)
    reference = _greedy(bundle, prompt_ids, n_new)
    out = {}
    for r in routes:
        if r.session.path == str(bundle):
            continue
        tokens = _greedy(r.session.path, prompt_ids, n_new)
        out[r.label] = OutputCheck(
            n_prompt, n_new, seed, tuple(reference), tuple(tokens), first_difference(reference, tokens)
        )
    return out


# -- teacher-forced equivalence (issue 24) ------------------------------------------------------

#: The reference's greedy continuation is this long; under 32 prompt tokens for the reason above.
EQUIVALENCE_STEPS = 16
CONFIG = "config"


def _stage_outputs(path: str) -> list[tuple[str, list[str], bool, bool]]:
    """(stage, its non-KV outputs, runs on the prompt, runs on token generation) in pipeline order;
    [] for a flat bundle (its logits say all)."""
    from winml_perf.bundle.config import config_of

    config = config_of(path)
    if config.kind == "flat":
        return []
    nodes = config.raw["model"]["decoder"]["pipeline"]
    nodes = nodes[0] if isinstance(nodes, list) else nodes
    return [
        (
            s.name,
            [o for o in nodes[s.name].get("outputs") or () if not o.startswith("present")],
            s.run_on_prompt,
            s.run_on_token_gen,
        )
        for s in config.stages
    ]


def _stage_steps(ref, run, name: str, on_prompt: bool, on_tokens: bool) -> list[int]:
    """The steps at which this stage produced ``name`` and both sides could read it."""
    steps = sorted(set(ref.outputs.get(name, {})) & set(run.outputs.get(name, {})))
    return [k for k in steps if (k == 0 and on_prompt) or (k > 0 and on_tokens)]


def _stage_figures(stage_outputs, ref, run) -> tuple[list[StageFigures], list[str]]:
    """Each stage's first readable output against the reference's, at the steps the stage ran;
    the stages with none readable (the generator keeps some outputs at some steps only)."""
    from winml_perf.stats.equivalence import compare_tensors

    figures, unobserved = [], []
    for stage, names, on_prompt, on_tokens in stage_outputs:
        found = [(n, _stage_steps(ref, run, n, on_prompt, on_tokens)) for n in names]
        name, steps = next(((n, k) for n, k in found if k), (None, []))
        if name is None:
            unobserved.append(stage)
            continue
        a, b = [ref.outputs[name][k] for k in steps], [run.outputs[name][k] for k in steps]
        figures.append(compare_tensors(stage, name, a, b))
    return figures, unobserved


def _band(
    name: str, change: str, path: Path, reference, prompt_ids: list[int], floor: float, layers: LayerBands | None = None
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
    reference_path: str, reference, prompt_ids: list[int], layers: LayerBands | None = None
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
    reference,
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


# -- layer-by-layer localisation (issue 24) -----------------------------------------------------


@dataclass(frozen=True)
class LayerProfile:
    """Each decoder layer's output of one bundle over one full-sequence pass."""

    values: dict[int, Any]  # layer -> 1 x S x hidden
    stage_of: dict[int, str]
    tensor_of: dict[int, str]
    unobserved: tuple[str, ...]  # "stage: why"
    embeds: Any  # the inputs_embeds the transformer stages were fed (None for a flat bundle)
    tokens: int
    ms: float


@dataclass
class LayerBands:
    """The reference's layer profile (accumulated, and each layer fed the reference's own input) and,
    filled by reference_bands, each band's error per layer in both. ``shared`` holds every stage
    file's pass on these tokens (measure/shared_passes.py): a route running a stage file as the
    reference or an earlier route did reads that pass back."""

    tokens: list[int]
    reference: LayerProfile
    errors: dict[str, dict[int, float]]
    local: LayerProfile | None = None
    local_errors: dict[str, dict[int, float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # what could not be measured, and why
    shared: FilePasses = field(default_factory=FilePasses)

    @classmethod
    def of(cls, path: str | Path, tokens: list[int]) -> LayerBands:
        shared = FilePasses()
        reference = layer_profile(path, tokens, shared=shared)
        local = layer_profile(path, tokens, reference.embeds, teacher=reference.values, shared=shared)
        return cls(tokens, reference, {}, local, shared=shared)

    def passes(self, path: str | Path) -> tuple[LayerProfile, LayerProfile]:
        """The bundle at ``path``: its accumulated pass and its layer-by-layer pass on the reference's input."""
        embeds = self.reference.embeds
        return (
            layer_profile(path, self.tokens, embeds, shared=self.shared),
            layer_profile(path, self.tokens, embeds, teacher=self.reference.values, shared=self.shared),
        )

    def measure_band(self, name: str, before: str | Path | None, after: str | Path) -> None:
        """add_band over the bundles at ``before`` (None: the reference) and ``after``; a failure leaves
        this band without layer figures and says why (the layers are then judged against the floor)."""
        try:
            self.add_band(name, self.passes(before) if before is not None else None, self.passes(after))
        except Exception as exc:  # onnx/onnxruntime raise their own types; the logit band stands without it
            self.failures.append(f"{name} band: {type(exc).__name__}: {exc}")

    def add_band(
        self, name: str, before: tuple[LayerProfile, LayerProfile] | None, after: tuple[LayerProfile, LayerProfile]
    ) -> None:
        """A band's error per layer: ``after`` against ``before`` (None: against the reference)."""
        from winml_perf.stats.layer_equivalence import band_errors

        base = before or (self.reference, self.local)
        self.errors[name] = band_errors(base[0].values, after[0].values)
        if base[1] is not None:
            self.local_errors[name] = band_errors(base[1].values, after[1].values)


def _stage_ep(stage) -> tuple[str, dict]:
    from winml_perf.ep.table import CPU_EP, ep_from_genai_provider

    if not stage.provider_options:
        return CPU_EP, {}
    key, options = next(iter(stage.provider_options[0].items()))
    return ep_from_genai_provider(key), dict(options)


def _stage_node(config, name: str) -> dict:
    decoder = config.raw["model"]["decoder"]
    if config.kind == "flat":
        return decoder
    nodes = decoder["pipeline"]
    return (nodes[0] if isinstance(nodes, list) else nodes)[name]


def layer_profile(
    folder: str | Path,
    tokens: list[int],
    embeds: Any = None,
    teacher: dict[int, Any] | None = None,
    shared: FilePasses | None = None,
) -> LayerProfile:
    """One full-sequence pass of every stage file holding decoder layers (a temporary copy with each
    layer's output added as a graph output), on the stage's own EP and options as its genai_config
    says. A pipeline's transformer stages are fed ``embeds`` (else its own embeddings stage's output),
    so a route's transformer is judged on exactly the reference's input. With ``teacher`` ({layer:
    the reference's output}), every layer reads its predecessor's output from there: each layer's
    own error, given the reference's input. With ``shared`` (the passes of one check, all on the same
    tokens, ``embeds`` and ``teacher``), a stage file already run with the same content, EP, options
    and session entries is not run again."""
    from winml_perf.bundle.config import config_of
    from winml_perf.bundle.variants import stage_session_entries
    from winml_perf.equivalence.passes.layer_outputs import open_pass_session, run_opened
    from winml_perf.onnxfile.header import input_shapes

    t0 = time.perf_counter()
    folder = Path(folder)
    config = config_of(folder)
    kv = _kv_shape(config.raw["model"]["decoder"])
    # each layer's output, the stage that gave it and its tensor's name
    found: tuple[dict[int, Any], dict[int, str], dict[int, str]] = ({}, {}, {})
    unobserved: list[str] = []
    longest = 0  # the longest pass run (a static stage takes fewer tokens)
    for filename, stages in _stages_by_file(config.stages).items():
        label = "/".join(s.name for s in stages) if config.kind == "pipeline" else "decoder"
        ep, options = _stage_ep(stages[0])
        shapes = input_shapes(folder / filename)
        if config.kind == "pipeline" and "input_ids" in shapes and embeds is None:  # the embeddings stage
            out = (_stage_node(config, stages[0].name).get("outputs") or ["inputs_embeds"])[0]
            entries = stage_session_entries(config, stages[0].name)
            try:
                session = open_pass_session(folder / filename, ep, options, entries)
                embeds = run_opened(session, folder / filename, ep, tokens, [out], kv).outputs[out]
            except BenchmarkFailure as exc:
                unobserved.append(f"{label}: {exc.message}")
            continue
        if not any(n.startswith("past_key_values") for n in shapes):
            continue  # neither a decoder nor a transformer stage (lm_head): no layers
        n, why = _pass_length(shapes, len(tokens), embeds)
        if why is not None:
            unobserved.append(f"{label}: {why}")
            continue
        file = StageFile(
            folder, filename, label, ep, options, stage_session_entries(config, stages[0].name), "input_ids" in shapes
        )
        done = shared.get(file, teacher is not None) if shared is not None else None
        if done is None:
            clock = PassClock()
            done = _file_pass(file, tokens[:n], embeds, teacher, kv, clock)
            if shared is not None:
                shared.put(file, teacher is not None, done, clock)
        if isinstance(done, str):
            unobserved.append(done)
            continue
        longest = max(longest, n)
        _keep_first(done.taps, done.outputs, label, found)
    return LayerProfile(*found, tuple(unobserved), embeds, longest, (time.perf_counter() - t0) * 1000.0)


def _file_pass(
    file: StageFile, tokens: list[int], embeds: Any, teacher: dict[int, Any] | None, kv: KvShape, clock: PassClock
) -> FilePass | str:
    """One stage file's tapped full-sequence pass: its layers' outputs, or why they are unobserved;
    ``clock`` takes the time of rewriting the file and of its session and run. Inside keep_models()
    the session is opened once per check and run again on each later prompt."""
    from winml_perf.equivalence.passes.layer_outputs import run_opened

    label = file.label
    opened = _tapped_session(file, teacher is not None, clock)
    if isinstance(opened, str):
        return opened
    session, taps, inputs, tapped = opened
    if not taps:
        return f"{label}: no decoder layer readable in {file.filename} (compiled into an EPContext node)"
    if teacher is not None and not set(inputs) <= set(teacher):
        return f"{label}: no reference output to feed layers {sorted(set(inputs) - set(teacher))}"
    t1 = time.perf_counter()
    n = len(tokens)
    try:
        run = run_opened(
            session,
            tapped,
            file.ep,
            tokens,
            list(taps.values()),
            kv,
            None if file.takes_ids else embeds[:, :n],
            {name: teacher[k][:, :n] for k, name in inputs.items()} if teacher is not None else None,
        )
    except BenchmarkFailure as exc:
        return f"{label}: {exc.message}"
    finally:
        clock.run_ms += (time.perf_counter() - t1) * 1000.0
    return FilePass(taps, {t: run.outputs[t] for t in taps.values()})


def _tapped_session(file: StageFile, teacher: bool, clock: PassClock) -> tuple[Any, dict, dict, Path] | str:
    """The session of the stage file's tapped copy on its EP, its taps and teacher inputs, and the
    copy's path (for messages; the copy is removed once the session holds the model): kept from an
    earlier prompt of the check when there is one; else why its layers are unobserved."""
    from winml_perf.bundle.variants import tapped_copy
    from winml_perf.equivalence.passes.layer_outputs import open_pass_session
    from winml_perf.equivalence.passes.model_pool import keep_session, kept_session
    from winml_perf.equivalence.passes.shared_passes import session_key, stage_file_bytes

    key = session_key(file, teacher)
    kept = kept_session(key)
    if kept is not None:
        return kept
    t0 = time.perf_counter()
    try:  # a file the tap cannot rewrite leaves its layers unobserved, said why; the run goes on
        tapped, taps, inputs = tapped_copy(file.folder, file.filename, teacher=teacher)
    except Exception as exc:  # onnx raises its own error types for files it cannot read or write
        return f"{file.label}: cannot add layer outputs to {file.filename}: {type(exc).__name__}: {exc}"
    finally:
        clock.tap_ms += (time.perf_counter() - t0) * 1000.0
    t1 = time.perf_counter()
    try:
        if not taps:
            return None, taps, inputs, tapped / file.filename
        session = open_pass_session(tapped / file.filename, file.ep, file.options, file.entries)
    except BenchmarkFailure as exc:
        return f"{file.label}: {exc.message}"
    finally:
        shutil.rmtree(tapped, ignore_errors=True)
        clock.run_ms += (time.perf_counter() - t1) * 1000.0
    opened = (session, taps, inputs, tapped / file.filename)
    keep_session(key, file.folder, opened, stage_file_bytes(file))
    return opened


def _kv_shape(decoder: Mapping[str, Any]) -> KvShape:
    """The KV cache's heads and head size, as genai_config's decoder section gives them."""
    from winml_perf.equivalence.passes.layer_outputs import KvShape

    return KvShape(int(decoder.get("num_key_value_heads") or decoder["num_attention_heads"]), int(decoder["head_size"]))


def _stages_by_file(stages: Sequence[Any]) -> dict[str, list[Any]]:
    """The bundle's stages grouped by the file they load (a file may hold several), in order."""
    groups: dict[str, list[Any]] = {}
    for stage in stages:
        groups.setdefault(stage.filename, []).append(stage)
    return groups


def _pass_length(shapes: Mapping[str, tuple[Any, ...]], n_tokens: int, embeds: Any) -> tuple[int, str | None]:
    """How many tokens a stage's full-sequence pass takes (fewer where its shapes are static), and why
    it takes none (one token per run, or embeddings it is not fed); None when it runs."""
    dims: tuple[Any, ...] = shapes.get("input_ids") or shapes.get("inputs_embeds") or ()
    n = n_tokens if embeds is None or "input_ids" in shapes else int(embeds.shape[1])
    if len(dims) >= 2 and isinstance(dims[1], int) and dims[1] < n:
        if dims[1] == 1:
            return n, "takes one token per run (static shapes), no full-sequence pass"
        n = dims[1]
    if "inputs_embeds" in shapes and embeds is None:
        return n, "no embeddings to feed it"
    return n, None


def _keep_first(taps: dict[int, str], outputs: dict[str, Any], label: str, into: tuple[dict, dict, dict]) -> None:
    """Each tapped layer's output, stage and tensor name, where no earlier stage gave that layer."""
    values, stage_of, tensor_of = into
    for k, tensor in taps.items():
        if k not in values:
            values[k], stage_of[k], tensor_of[k] = outputs[tensor], label, tensor


def _precision(folder: str | Path) -> tuple:
    """What each stage of the bundle at ``folder`` computes in, read from the files it loads."""
    from winml_perf.bundle.variants import bundle_precision

    return bundle_precision(Path(folder))


def _unjudged(tokens: int, why: str) -> Layers:
    return Layers(tokens, "none", (), None, None, None, None, (why,))


def judge_layers(
    ref: LayerBands, route: LayerProfile, route_local: LayerProfile | None = None, same_model: bool = False
) -> Layers:
    """A route's layer profile against the reference's, limits from the widest band measured (the noise
    floor's when ``same_model``: the same kernels, so only it separates them); with ``route_local``, each
    layer's own error too (fed the reference's input)."""
    from winml_perf.stats.layer_equivalence import (
        LocalPasses,
        first_departing,
        first_differing,
        first_wrong,
        layer_figures,
        pattern,
    )

    order = ("noise floor",) if same_model else ("precision", "noise floor")
    band = next((b for b in order if ref.errors.get(b)), "noise floor" if same_model else "none")
    local = None
    if ref.local is not None and route_local is not None:
        local = LocalPasses(ref.local.values, route_local.values, ref.local_errors.get(band) or {})
    figures = layer_figures(
        route.stage_of, route.tensor_of, ref.reference.values, route.values, ref.errors.get(band), local
    )
    depart, wrong = first_departing(figures), first_wrong(figures)
    unobserved = tuple(dict.fromkeys((*ref.reference.unobserved, *route.unobserved, *ref.failures)))
    ms = route.ms + (route_local.ms if route_local is not None else 0.0)
    return Layers(
        route.tokens, band, tuple(figures), depart.layer if depart else None, depart.stage if depart else None,
        first_differing(figures), pattern(figures), unobserved, round(ms, 3),
        wrong.layer if wrong else None, wrong.stage if wrong else None,
    )  # fmt: skip


@dataclass(frozen=True)
class EquivalenceRun:
    """What judging the routes found, and what it cost (outside every timed iteration)."""

    by_label: dict[str, Equivalence]
    reference: str
    cost_ms: float
    errors: dict[str, str]  # routes whose teacher-forced pass failed: why (their cells fail on their own)
    cost: CheckCost = field(default_factory=lambda: CheckCost())


@dataclass
class CheckCost:
    """Where a check's time went, and how many routes it judged, found cached or shared."""

    judged: int = 0  # routes given a teacher-forced pass here
    from_cache: int = 0  # routes whose verdict the verdict cache held
    shared: int = 0  # routes whose prepared bundle had the content of one judged before them in this run
    reference_ms: float = 0.0  # the reference's teacher-forced pass and its layer profiles
    bands_ms: float = 0.0  # the noise floor and precision band (their variants' passes), or reading them back
    routes_ms: float = 0.0  # the routes' teacher-forced and layer passes
    route_loads_ms: float = 0.0  # of routes_ms: loading the routes' models (a kept model costs nothing)
    route_steps_ms: float = 0.0  # of routes_ms: their teacher-forced steps
    route_release_ms: float = 0.0  # of routes_ms: letting go of their generators (and models not kept)
    route_compare_ms: float = 0.0  # of routes_ms: comparing their logits and stage outputs with the reference's
    route_layers_ms: float = 0.0  # their layer passes (run, or read back when shared), in a second thread
    route_layers_waited_ms: float = 0.0  # of routes_ms: waiting for those layer passes
    route_layers_in_turn_ms: float = 0.0  # of routes_ms: the layer passes of routes on EPs not run beside
    keys_ms: float = 0.0  # hashing the bundles' content for the cache's keys
    layer_passes: int = 0  # stage-file layer passes run (the reference's and the bands' included)
    layer_passes_shared: int = 0  # a route's stage-file pass read back: run alike before (shared_passes.py)
    layer_tap_ms: float = 0.0  # every layer pass run: rewriting its stage file with the layers' outputs
    layer_run_ms: float = 0.0  # every layer pass run: its session made on the stage's EP, and its one run

    def add(self, other: CheckCost) -> CheckCost:
        return CheckCost(*(getattr(self, k) + getattr(other, k) for k in self.__dataclass_fields__))

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class _Reference:
    """What every route is judged against: the reference's pass, its bands and layer bands."""

    path: str
    label: str
    prompt_ids: list[int]
    steps: int
    stage_outputs: list
    reference: Any  # session.genai_logits.TeacherForced
    noise: Band
    precision: Band | None
    layer_bands: LayerBands | None
    layer_failure: str | None
    ref_precision: tuple


def _reference(path: str, label: str, prompt_ids: list[int], steps: int, layers: bool, store, cost: CheckCost):
    """The reference's teacher-forced pass and layer profiles, then its bands (read from ``store`` when it
    holds them for this content, else measured and stored)."""
    from winml_perf.equivalence.passes.genai_logits import teacher_forced

    t0 = time.perf_counter()
    stage_outputs = _stage_outputs(path)
    wanted = [n for _, names, _, _ in stage_outputs for n in names]
    reference = teacher_forced(path, prompt_ids, steps, outputs=wanted)
    layer_bands, layer_failure = None, None
    if layers:
        tokens = [*prompt_ids, *reference.continuation[: steps - 1]]
        try:
            layer_bands = LayerBands.of(path, tokens)
        except Exception as exc:  # the logits are judged without the layers, and the run says why
            layer_failure = f"layers not judged: the reference's pass failed: {type(exc).__name__}: {exc}"
    t1 = time.perf_counter()
    cost.reference_ms += (t1 - t0) * 1000.0
    cached = store.bands() if store is not None else None
    if cached is not None and cached.fits(layer_bands):
        noise, precision = cached.noise, cached.precision
        cached.fill(layer_bands)
    else:
        noise, precision = reference_bands(path, reference, prompt_ids, layer_bands)
        if store is not None:
            store.save_bands(noise, precision, layer_bands)
    cost.bands_ms += (time.perf_counter() - t1) * 1000.0
    return _Reference(
        path, label, prompt_ids, steps, stage_outputs, reference, noise, precision, layer_bands, layer_failure,
        _precision(path),
    )  # fmt: skip


def _same_model(ref: _Reference, path: str) -> bool:
    """Whether the route at ``path`` asks "the same model?" of the reference (its precision is the
    reference's) rather than "within what precision changes do?"."""
    from winml_perf.model.equivalence import SAME_MODEL_QUESTION, question_for

    return question_for(_precision(path), ref.ref_precision) == SAME_MODEL_QUESTION


def _judge_one(
    ref: _Reference, path: str, n_prompt: int, seed: int, cost: CheckCost, layers_of: Callable[[str], Layers | None]
) -> Equivalence:
    """One route's teacher-forced pass against the reference, with its layers from ``layers_of(path)``;
    BenchmarkFailure when its pass fails."""
    from winml_perf.equivalence.passes.genai_logits import teacher_forced
    from winml_perf.model.equivalence import SAME_MODEL_QUESTION, question_for
    from winml_perf.stats.equivalence import compare_logits, first_departing_stage, verdict

    t1 = time.perf_counter()
    wanted = [n for _, names, _, _ in ref.stage_outputs for n in names]
    run = teacher_forced(path, ref.prompt_ids, ref.steps, ref.reference.continuation, outputs=wanted)
    cost.route_loads_ms += run.load_ms
    cost.route_steps_ms += run.run_ms
    cost.route_release_ms += run.release_ms
    t2 = time.perf_counter()
    figures = compare_logits(ref.reference.logits, run.logits)
    stages, unobserved = _stage_figures(ref.stage_outputs, ref.reference, run)
    cost.route_compare_ms += (time.perf_counter() - t2) * 1000.0
    route_precision = _precision(path)
    question = question_for(route_precision, ref.ref_precision)
    same = question == SAME_MODEL_QUESTION  # as _same_model decides it for the route's layers
    noise, precision = ref.noise, ref.precision
    bands = (noise, precision) if precision else (noise,)
    where = layers_of(path)
    judged = verdict(figures, noise, None if same else precision)  # the same kernels: no precision band
    judged = _overruled_by_layers(judged, where, same)
    return Equivalence(
        ref.label, ref.path, path, n_prompt, seed, figures, judged,
        bands, tuple(stages), first_departing_stage(stages), tuple(unobserved), round((time.perf_counter() - t1) * 1000.0, 3),
        where, route_precision, ref.ref_precision, question,
    )  # fmt: skip


def judge_routes(
    bundle: str,
    routes: Sequence[Any],
    seed: int = 0,
    reference_bundle: str | None = None,
    n_prompt: int = CHECK_PROMPT_TOKENS,
    steps: int = EQUIVALENCE_STEPS,
    *,
    layers: bool = True,
    reference_route: str | None = None,
    cache: bool = False,
) -> EquivalenceRun:
    """Every route (but the reference itself) against the reference: the config route (the bundle),
    or ``reference_bundle`` (same tokenizer), fed the reference's greedy continuation; with ``layers``,
    each decoder layer's output too (one full-sequence pass over the same tokens). With ``cache``, a
    route's verdict is read from the verdict cache (measure/verdict_cache.py) when it holds one for the
    same content, and a route whose prepared bundle has the content of one judged before it shares its
    verdict; the reference is run only when some route has to be judged."""
    from winml_perf.bundle.config import config_of
    from winml_perf.session.genai_session import GenaiSession

    t0 = time.perf_counter()
    ref_path = str(reference_bundle or bundle)
    ref_label = f"bundle:{reference_bundle}" if reference_bundle else CONFIG
    if reference_route is not None:  # one of the run's routes, as prepared (its own derived folder)
        chosen = reference_of(routes, reference_route)
        ref_path, ref_label = str(chosen.session.path), chosen.label
    static = config_of(bundle).static_prompt_length()
    n_prompt = static[1] if static else n_prompt  # a static-shape stage takes exactly its length
    prompt_ids = GenaiSession(bundle).synthetic_prompt(n_prompt, seed=seed)
    store = None
    if cache:
        from winml_perf.equivalence.verdict_cache import VerdictCache

        store = VerdictCache.open(bundle, ref_path, prompt_ids, steps, layers)
    cost = CheckCost()
    reference: list[_Reference] = []  # built before the first route that has to be judged

    def route_layers(path: str) -> Layers | None:
        ref = reference[0]
        return _route_layers(ref.layer_bands, ref.layer_failure, path, _same_model(ref, path))

    ahead = LayersAhead(route_layers)  # the routes' layer passes, beside their teacher-forced passes

    def ready(to_judge: Sequence[str]) -> None:  # a reference that cannot run fails the whole check
        if not reference:
            reference.append(_reference(ref_path, ref_label, prompt_ids, steps, layers, store, cost))
            if reference[0].layer_bands is not None:  # the others' layers run in turn, in this thread
                ahead.start([p for p in to_judge if _layers_beside(p)])

    def judge(path: str) -> Equivalence:
        t1 = time.perf_counter()
        try:
            return _judge_one(reference[0], path, n_prompt, seed, cost, ahead.result)
        finally:
            cost.routes_ms += (time.perf_counter() - t1) * 1000.0

    try:
        out, errors = _each_route([r for r in routes if r.label != ref_label], ready, judge, store, cost)
    finally:
        ahead.close()
    cost.route_layers_ms, cost.route_layers_waited_ms = ahead.worker_ms, ahead.waited_ms
    cost.route_layers_in_turn_ms = ahead.in_turn_ms
    out = {label: replace(e, reference=ref_label, reference_path=ref_path) for label, e in out.items()}
    if store is not None:
        cost.keys_ms = store.keys_ms
    if reference and reference[0].layer_bands is not None:
        cost.layer_passes = reference[0].layer_bands.shared.runs
        cost.layer_passes_shared = reference[0].layer_bands.shared.reused
        cost.layer_tap_ms = reference[0].layer_bands.shared.tap_ms
        cost.layer_run_ms = reference[0].layer_bands.shared.run_ms
    return EquivalenceRun(out, ref_label, round((time.perf_counter() - t0) * 1000.0, 3), errors, cost)


def _each_route(
    routes: Sequence[Any], ready, judge, store, cost: CheckCost
) -> tuple[dict[str, Equivalence], dict[str, str]]:
    """{label: Equivalence} and {label: why its pass failed}: each route judged by ``judge(path)`` (after
    ``ready(paths)``, the folders of every route to be judged), unless ``store`` (the verdict cache) holds
    its content's verdict or a route of the same content came before it in this run."""
    out: dict[str, Equivalence] = {}
    errors: dict[str, str] = {}
    seen: dict[str, Equivalence | str] = {}  # content key -> its verdict, or why its pass failed
    cached = _cached_verdicts(routes, store)
    pending = _to_judge(routes, store, cached)
    for r in routes:
        path, t1 = str(r.session.path), time.perf_counter()
        key = store.route_key(path) if store is not None else None
        found = _known(key, seen, cached, cost)
        if found is None:
            ready(pending)
            try:
                found = judge(path)
            except BenchmarkFailure as exc:
                found = exc.message
            cost.judged += 1
            if key is not None and isinstance(found, Equivalence):
                store.save_verdict(key, found)
        elif isinstance(found, Equivalence):  # read back or shared: this route's folder, and this run's cost
            found = replace(found, route_path=path, cost_ms=round((time.perf_counter() - t1) * 1000.0, 3))
        if key is not None:
            seen[key] = found
        if isinstance(found, str):
            errors[r.label] = found
        else:
            out[r.label] = found
    return out, errors


def _cached_verdicts(routes: Sequence[Any], store) -> dict[str, Equivalence | None]:
    """{content key: the verdict cache's verdict, or None}, each key read once; {} without a cache."""
    if store is None:
        return {}
    keys = dict.fromkeys(store.route_key(str(r.session.path)) for r in routes)
    return {key: store.verdict(key) for key in keys}


def _layers_beside(path: str) -> bool:
    """Whether every EP the route's layer passes open sessions on may run in a second thread beside
    onnxruntime-genai (the EP table's ``sessions_beside``)."""
    from winml_perf.bundle.config import config_of
    from winml_perf.ep.table import EPS

    try:
        stages = config_of(path).stages
    except Exception:  # a folder that cannot be read is judged in turn, where its failure is reported
        return False
    return all(EPS[ep].sessions_beside if ep in EPS else False for ep, _ in map(_stage_ep, stages))


def _to_judge(routes: Sequence[Any], store, cached: Mapping[str, Equivalence | None]) -> list[str]:
    """The folders of the routes a check will judge: each route's, but those whose content's verdict
    the verdict cache holds or whose content an earlier route has."""
    out, keys = [], set()
    for r in routes:
        path = str(r.session.path)
        key = store.route_key(path) if store is not None else None
        if key is None or (key not in keys and cached.get(key) is None):
            out.append(path)
        if key is not None:
            keys.add(key)
    return out


def _known(
    key: str | None, seen: Mapping[str, Equivalence | str], cached: Mapping[str, Equivalence | None], cost: CheckCost
) -> Equivalence | str | None:
    """A route's verdict (or its pass's failure) without judging it: shared with a route of the same
    content judged before it in this run, or read from the verdict cache; None when it must be judged."""
    if key is None:
        return None
    if key in seen:
        cost.shared += 1
        return seen[key]
    found = cached.get(key)
    if found is not None:
        cost.from_cache += 1
    return found


def _route_layers(
    layer_bands: LayerBands | None, layer_failure: str | None, path: str | Path, same: bool
) -> Layers | None:
    """The route's decoder layers judged against the reference's; None when layers were not asked for."""
    if layer_bands is not None:
        try:
            return judge_layers(layer_bands, *layer_bands.passes(path), same_model=same)
        except Exception as exc:  # this route's layers are unobserved, said why; its logits are judged
            return _unjudged(len(layer_bands.tokens), f"this route's pass failed: {type(exc).__name__}: {exc}")
    if layer_failure is not None:
        return _unjudged(0, layer_failure)
    return None


def _overruled_by_layers(judged: str, where: Layers | None, same: bool) -> str:
    """The logits' verdict, unless a layer computes something else (or, on the same model, departs
    beyond the noise floor at a layer): then not equivalent."""
    if where is not None and where.first_wrong is not None:  # a layer computes something else
        return NOT_EQUIVALENT
    if same and where is not None and where.first_departing is not None:  # beyond the noise floor at a layer
        return NOT_EQUIVALENT
    return judged


def reference_of(routes: Sequence[Any], label: str) -> Any:
    """The route whose label (or one of its aliases: labels that resolved to the same route) is ``label``."""
    for r in routes:
        aliases = getattr(getattr(r, "recorded_route", None), "aliases", ()) or ()
        if label == r.label or label in aliases:
            return r
    raise ValueError(f"--reference {label}: not one of this run's routes ({', '.join(r.label for r in routes)})")


def wants_equivalence(asked: bool | None, n_routes: int, reference_bundle: object) -> bool:
    """On by default when the run has more than one route or names a reference bundle; --equivalence
    forces it on, --no-equivalence off."""
    return asked if asked is not None else (n_routes > 1 or reference_bundle is not None)


def attach_equivalence(
    bundle: str,
    routes: list[Any],
    seed: int,
    reference_bundle: str | None,
    reference_route: str | None = None,
    cache: bool = False,
) -> list[Any]:
    """The routes with their Equivalence recorded; one line per route and the check's cost on stderr
    (it runs before the sweep: nothing of it enters a timed iteration). ``cache``: the verdict cache."""
    from dataclasses import replace

    try:
        run = judge_routes(
            bundle, routes, seed=seed, reference_bundle=reference_bundle, reference_route=reference_route, cache=cache
        )
    except BenchmarkFailure as exc:  # the reference itself could not run: no route is judged, and it says so
        say(f"equivalence: not judged: {exc}")
        return routes
    for label, e in run.by_label.items():
        say(equivalence_line(label, e))
    for label, why in run.errors.items():
        say(f"equivalence: {label} not judged: {why}")
    say(cost_line([run], cached=cache))
    return [
        replace(r, route=replace(r.recorded_route, equivalence=run.by_label[r.label])) if r.label in run.by_label else r
        for r in routes
    ]


def cost_line(runs: Sequence[EquivalenceRun], cached: bool, where: str = "outside the timed iterations") -> str:
    """'equivalence: 9 route(s) against config in 3.2 s (6 from cache, 3 judged: reference 1.1 s, bands
    1.4 s, routes 0.7 s), outside the timed iterations' over one check or several (one per prompt)."""
    cost = CheckCost()
    for run in runs:
        cost = cost.add(run.cost)
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
            judged += (
                f" (model loads {cost.route_loads_ms / 1000:.1f} s, teacher-forced steps "
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


def equivalence_line(label: str, e: Equivalence) -> str:
    """'ep=webgpu ≈ config: KL 2e-06, top-1 100 % over 16 steps' (≉ when not equivalent)."""
    from winml_perf.model.equivalence import EQUIVALENT, SAME_MODEL_QUESTION, WITHIN_PRECISION, precision_class

    f = e.figures
    mark = {EQUIVALENT: "≈", NOT_EQUIVALENT: "≉"}.get(e.verdict, "~")
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
