"""The teacher-forced equivalence check of a genai bundle's routes (issue 24): every step's logits
against a reference, judged against the reference's own noise floor and precision band (bands.py),
each decoder layer too (layers.py); verdicts read back from the verdict cache (verdict_cache.py) or
shared by routes of the same content. The math is stats/equivalence.py's; what the check says,
report.py's."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.equivalence.bands import reference_bands
from winml_perf.equivalence.layers import LayerBands, LayerProfile, judge_layers, unjudged
from winml_perf.equivalence.passes.genai_passes import CheckPasses
from winml_perf.equivalence.passes.layer_outputs import stage_ep
from winml_perf.equivalence.passes.layers_ahead import LayersAhead
from winml_perf.model.equivalence import (
    NOT_EQUIVALENT,
    Band,
    Equivalence,
    EquivalenceVerdict,
    Layers,
    StageFigures,
    StagePrecision,
)
from winml_perf.support.errors import BenchmarkFailure

if TYPE_CHECKING:
    from winml_perf.bundle.config import GenaiConfig
    from winml_perf.equivalence.passes.genai_logits import TeacherForced
    from winml_perf.equivalence.verdict_cache import VerdictCache
    from winml_perf.session.genai_session import GenaiSession

# Under 32: WebGPU's attention over lavapipe departs from CPU at prompts of 32 tokens and more even in
# fp32 (measured), which would turn a precision artefact of the driver into a false alarm.
CHECK_PROMPT_TOKENS = 16

#: The reference's greedy continuation is this long; under 32 prompt tokens for the reason above.
EQUIVALENCE_STEPS = 16
CONFIG = "config"


def _stage_outputs(config: GenaiConfig) -> list[tuple[str, list[str], bool, bool]]:
    """(stage, its non-KV outputs, runs on the prompt, runs on token generation) in pipeline order, as
    ``config`` (the reference's) says; [] for a flat bundle (its logits say all)."""
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


def _stage_steps(ref: TeacherForced, run: TeacherForced, name: str, on_prompt: bool, on_tokens: bool) -> list[int]:
    """The steps at which this stage produced ``name`` and both sides could read it."""
    steps = sorted(set(ref.outputs.get(name, {})) & set(run.outputs.get(name, {})))
    return [k for k in steps if (k == 0 and on_prompt) or (k > 0 and on_tokens)]


def _stage_figures(
    stage_outputs: list[Any], ref: TeacherForced, run: TeacherForced
) -> tuple[list[StageFigures], list[str]]:
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


def _precision(folder: str | Path) -> tuple[StagePrecision, ...]:
    """What each stage of the bundle at ``folder`` computes in, read from the files it loads."""
    from winml_perf.bundle.variants import bundle_precision

    return bundle_precision(Path(folder))


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
    pass_processes: int = 0  # worker processes the routes' teacher-forced passes ran in (0: this one, in turn)
    route_passes_waited_ms: float = 0.0  # of routes_ms: waiting for those processes' passes
    keys_ms: float = 0.0  # hashing the bundles' content for the cache's keys
    layer_passes: int = 0  # stage-file layer passes run (the reference's and the bands' included)
    layer_passes_shared: int = 0  # a route's stage-file pass read back: run alike before (passes/shared_passes.py)
    layer_tap_ms: float = 0.0  # every layer pass run: rewriting its stage file with the layers' outputs
    layer_run_ms: float = 0.0  # every layer pass run: its session made on the stage's EP, and its one run

    def add(self, other: CheckCost) -> CheckCost:
        def both(k: str) -> Any:  # the processes are the same lanes on every prompt: not added up
            a, b = getattr(self, k), getattr(other, k)
            return max(a, b) if k == "pass_processes" else a + b

        return CheckCost(*(both(k) for k in self.__dataclass_fields__))

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class _Reference:
    """What every route is judged against: the reference's pass, its bands and layer bands."""

    path: str
    label: str
    prompt_ids: list[int]
    steps: int
    stage_outputs: list[Any]
    reference: Any  # passes/genai_logits.TeacherForced
    noise: Band
    precision: Band | None
    layer_bands: LayerBands | None
    layer_failure: str | None
    ref_precision: tuple[StagePrecision, ...]


def _reference(
    source: CheckSource, steps: int, layers: bool, store: VerdictCache | None, cost: CheckCost
) -> _Reference:
    """The reference's teacher-forced pass over ``source``'s prompt and its layer profiles, then its bands
    (read from ``store`` when it holds them for this content, else measured and stored)."""
    from winml_perf.equivalence.passes.genai_logits import teacher_forced

    t0 = time.perf_counter()
    path, label, prompt_ids = source.reference_path, source.reference, source.prompt_ids
    stage_outputs = _stage_outputs(source.reference_config)
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


def _wanted(ref: _Reference) -> list[str]:
    """The stage outputs every pass reads beside the logits."""
    return [n for _, names, _, _ in ref.stage_outputs for n in names]


def _judge_one(
    ref: _Reference,
    path: str,
    seed: int,
    cost: CheckCost,
    layer_passes: Callable[[str], tuple[LayerProfile, LayerProfile]],
    passes: CheckPasses,
) -> Equivalence:
    """One route's teacher-forced pass (from ``passes``) against the reference, with its layers judged on
    ``layer_passes(path)``; BenchmarkFailure when its pass fails. The route's precision, read once here,
    decides the question asked of the logits and of the layers alike."""
    from winml_perf.model.equivalence import SAME_MODEL_QUESTION, question_for
    from winml_perf.stats.equivalence import compare_logits, first_departing_stage, verdict

    t1 = time.perf_counter()
    run = passes.run(path, ref.prompt_ids, ref.steps, ref.reference.continuation, _wanted(ref))
    cost.route_loads_ms += run.load_ms
    cost.route_steps_ms += run.run_ms
    cost.route_release_ms += run.release_ms
    t2 = time.perf_counter()
    figures = compare_logits(ref.reference.logits, run.logits)
    stages, unobserved = _stage_figures(ref.stage_outputs, ref.reference, run)
    cost.route_compare_ms += (time.perf_counter() - t2) * 1000.0
    route_precision = _precision(path)
    question = question_for(route_precision, ref.ref_precision)
    same = question == SAME_MODEL_QUESTION  # the same kernels: no precision band, the noise floor at every layer
    noise, precision = ref.noise, ref.precision
    bands = (noise, precision) if precision else (noise,)
    where = _route_layers(ref.layer_bands, ref.layer_failure, path, same, layer_passes)
    judged = verdict(figures, noise, None if same else precision)
    judged = _overruled_by_layers(judged, where, same)
    return Equivalence(
        ref.label, ref.path, path, len(ref.prompt_ids), seed, figures, judged,
        bands, tuple(stages), first_departing_stage(stages), tuple(unobserved), round((time.perf_counter() - t1) * 1000.0, 3),
        where, route_precision, ref.ref_precision, question,
    )  # fmt: skip


def session_of(bundle: str | Path) -> GenaiSession:
    """A GenaiSession of ``bundle`` told its genai config by the run (``config_of``: the run's ConfigBook,
    read once a run) instead of reading the file itself."""
    from winml_perf.bundle.config import config_of
    from winml_perf.session.genai_session import GenaiSession

    return GenaiSession(bundle, config_of(bundle).raw)


@dataclass(frozen=True)
class CheckSource:
    """The source bundle as every check of a run uses it, made once (``check_source``): its folder, its
    genai config, a session told that config, the check prompt its synthetic tokens make, and the
    reference every route is judged against."""

    path: str
    config: GenaiConfig
    session: GenaiSession
    prompt_ids: list[int]
    seed: int
    reference: str  # its label: config (the source bundle), bundle:PATH, or the route --reference names
    reference_path: str  # its folder
    reference_config: GenaiConfig  # its genai config (the source's own when the reference is the source)
    reference_bundle: str | None  # --reference-bundle: a bundle none of the routes runs


def check_source(
    bundle: str | Path,
    seed: int = 0,
    n_prompt: int = CHECK_PROMPT_TOKENS,
    routes: Sequence[Any] = (),
    reference_bundle: str | None = None,
    reference_route: str | None = None,
) -> CheckSource:
    """``bundle`` as the checks use it: its config (``config_of``: the run's ConfigBook, read once a run),
    a session told that config, and a prompt of ``n_prompt`` synthetic tokens from ``seed`` (the length a
    static-shape stage takes where the bundle has one: it takes exactly its own); the reference is the
    config route (the bundle), ``reference_bundle``, or the route of ``routes`` named ``reference_route``
    (as prepared: its own derived folder)."""
    from winml_perf.bundle.config import config_of
    from winml_perf.session.genai_session import GenaiSession

    config = config_of(bundle)
    static = config.static_prompt_length()
    session = GenaiSession(bundle, config.raw)
    prompt_ids = session.synthetic_prompt(static[1] if static else n_prompt, seed=seed)
    ref_path = str(reference_bundle or bundle)
    ref_label = f"bundle:{reference_bundle}" if reference_bundle else CONFIG
    if reference_route is not None:
        chosen = reference_of(routes, reference_route)
        ref_path, ref_label = str(chosen.session.path), chosen.label
    ref_config = config if ref_path == str(bundle) else config_of(ref_path)
    return CheckSource(
        str(bundle), config, session, prompt_ids, seed, ref_label, ref_path, ref_config, reference_bundle
    )


def judge_routes(
    source: CheckSource,
    routes: Sequence[Any],
    steps: int = EQUIVALENCE_STEPS,
    *,
    layers: bool = True,
    cache: bool = False,
) -> EquivalenceRun:
    """Every route (but the reference itself) against ``source``'s reference (the CheckSource a run made of
    the source bundle for all its checks: its prompt, seed and reference), fed the reference's greedy
    continuation; with ``layers``, each decoder layer's output too (one full-sequence pass over the same
    tokens). With ``cache``, a route's verdict is read from the verdict cache (equivalence/verdict_cache.py)
    when it holds one for the same content, and a route whose prepared bundle has the content of one judged
    before it shares its verdict; the reference is run only when some route has to be judged."""

    t0 = time.perf_counter()
    store = None
    if cache:
        from winml_perf.equivalence.verdict_cache import VerdictCache

        store = VerdictCache.open(
            source.path, source.reference_path, source.reference_config, source.prompt_ids, steps, layers
        )
    cost = CheckCost()
    reference: list[_Reference] = []  # built before the first route that has to be judged

    def layer_passes(path: str) -> tuple[LayerProfile, LayerProfile]:
        layer_bands = reference[0].layer_bands
        assert layer_bands is not None  # asked for by _route_layers only when the reference's layers ran
        return layer_bands.passes(path)

    ahead = LayersAhead(layer_passes)  # the routes' layer passes, beside their teacher-forced passes
    passes = CheckPasses()  # the routes' teacher-forced passes: in worker processes where the machine has cores

    def ready(to_judge: Sequence[str]) -> None:  # a reference that cannot run fails the whole check
        if not reference:
            passes.open(len(to_judge))
            ref = _reference(source, steps, layers, store, cost)
            reference.append(ref)
            passes.submit(to_judge, source.prompt_ids, steps, ref.reference.continuation, _wanted(ref))
            if ref.layer_bands is not None:  # the others' layers run in turn, in this thread
                ahead.start([p for p in to_judge if _layers_beside(p)])

    def judge(path: str) -> Equivalence:
        t1 = time.perf_counter()
        try:
            return _judge_one(reference[0], path, source.seed, cost, ahead.result, passes)
        finally:
            cost.routes_ms += (time.perf_counter() - t1) * 1000.0

    try:
        out, errors = _each_route([r for r in routes if r.label != source.reference], ready, judge, store, cost)
    finally:
        ahead.close()
        passes.close()
    cost.route_layers_ms, cost.route_layers_waited_ms = ahead.worker_ms, ahead.waited_ms
    cost.route_layers_in_turn_ms = ahead.in_turn_ms
    cost.pass_processes, cost.route_passes_waited_ms = passes.processes, passes.waited_ms
    out = {
        label: replace(e, reference=source.reference, reference_path=source.reference_path) for label, e in out.items()
    }
    if store is not None:
        cost.keys_ms = store.keys_ms
    if reference and reference[0].layer_bands is not None:
        _count_layer_passes(cost, reference[0].layer_bands)
    return EquivalenceRun(out, source.reference, round((time.perf_counter() - t0) * 1000.0, 3), errors, cost)


def _count_layer_passes(cost: CheckCost, layer_bands: LayerBands) -> None:
    shared = layer_bands.shared
    cost.layer_passes, cost.layer_passes_shared = shared.runs, shared.reused
    cost.layer_tap_ms, cost.layer_run_ms = shared.tap_ms, shared.run_ms


def _each_route(
    routes: Sequence[Any],
    ready: Callable[[Sequence[str]], None],
    judge: Callable[[str], Equivalence],
    store: VerdictCache | None,
    cost: CheckCost,
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
            if store is not None and key is not None and isinstance(found, Equivalence):
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


def _cached_verdicts(routes: Sequence[Any], store: VerdictCache | None) -> dict[str, Equivalence | None]:
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
    return all(EPS[ep].sessions_beside if ep in EPS else False for ep, _ in map(stage_ep, stages))


def _to_judge(routes: Sequence[Any], store: VerdictCache | None, cached: Mapping[str, Equivalence | None]) -> list[str]:
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
    layer_bands: LayerBands | None,
    layer_failure: str | None,
    path: str,
    same: bool,
    layer_passes: Callable[[str], tuple[LayerProfile, LayerProfile]],
) -> Layers | None:
    """The route's decoder layers (its ``layer_passes(path)``) judged against the reference's; None when
    layers were not asked for."""
    if layer_bands is not None:
        try:
            return judge_layers(layer_bands, *layer_passes(path), same_model=same)
        except Exception as exc:  # this route's layers are unobserved, said why; its logits are judged
            return unjudged(len(layer_bands.tokens), f"this route's pass failed: {type(exc).__name__}: {exc}")
    if layer_failure is not None:
        return unjudged(0, layer_failure)
    return None


def _overruled_by_layers(judged: EquivalenceVerdict, where: Layers | None, same: bool) -> EquivalenceVerdict:
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
