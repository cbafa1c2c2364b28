"""Layer by layer (issue 24): each decoder layer's output of a bundle over one full-sequence pass
(accumulated, and each layer fed the reference's own input), the reference's bands per layer, and a
route's layers judged against them (the math in stats/layer_equivalence.py)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.equivalence.passes.layer_outputs import stage_ep
from winml_perf.equivalence.passes.shared_passes import FilePass, FilePasses, PassClock, StageFile
from winml_perf.model.equivalence import Layers
from winml_perf.support.errors import BenchmarkFailure

if TYPE_CHECKING:
    from winml_perf.bundle.config import GenaiConfig
    from winml_perf.equivalence.passes.layer_outputs import KvShape

#: a layer pass's opened session (None: no taps), its taps {layer: tensor}, teacher inputs {layer: input}, the copy's path
_Opened = tuple[Any, dict[int, str], dict[int, str], Path]


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
    file's pass on these tokens (equivalence/passes/shared_passes.py): a route running a stage file as the
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


def _stage_node(config: GenaiConfig, name: str) -> dict[str, Any]:
    decoder = config.raw["model"]["decoder"]
    if config.kind == "flat":
        flat: dict[str, Any] = decoder
        return flat
    nodes = decoder["pipeline"]
    node: dict[str, Any] = (nodes[0] if isinstance(nodes, list) else nodes)[name]
    return node


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
        ep, options = stage_ep(stages[0])
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


def _tapped_session(file: StageFile, teacher: bool, clock: PassClock) -> _Opened | str:
    """The session of the stage file's tapped copy on its EP, its taps and teacher inputs, and the
    copy's path (for messages; the copy is removed once the session holds the model): kept from an
    earlier prompt of the check when there is one; else why its layers are unobserved."""
    from winml_perf.bundle.variants import tapped_copy
    from winml_perf.equivalence.passes.layer_outputs import open_pass_session
    from winml_perf.equivalence.passes.model_pool import keep_session, kept_session
    from winml_perf.equivalence.passes.shared_passes import session_key, stage_file_bytes

    key = session_key(file, teacher)
    kept: _Opened | None = kept_session(key)
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


def _keep_first(
    taps: dict[int, str],
    outputs: dict[str, Any],
    label: str,
    into: tuple[dict[int, Any], dict[int, str], dict[int, str]],
) -> None:
    """Each tapped layer's output, stage and tensor name, where no earlier stage gave that layer."""
    values, stage_of, tensor_of = into
    for k, tensor in taps.items():
        if k not in values:
            values[k], stage_of[k], tensor_of[k] = outputs[tensor], label, tensor


def unjudged(tokens: int, why: str) -> Layers:
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
