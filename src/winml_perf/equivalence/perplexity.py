"""--perplexity: each route's perplexity over a fixed text, and its ratio to the reference's (issue 34).

Runs before the sweep, like the equivalence check (nothing of it enters a timed iteration). The text
is tokenized once by the bundle's own tokenizer (onnxruntime-genai's), cut into non-overlapping
chunks (stats/perplexity.py: the llama-perplexity method), and each route runs every chunk as one
full-sequence pass from an empty cache through plain onnxruntime: one session per stage file (a flat
decoder: one session per route), on the stage's own EP with the route's provider options and
session entries as its genai_config.json says. A pipeline chains the stages that run on the prompt
(embeddings → transformer → lm_head); a stage that cannot take a whole chunk (static shapes) leaves
the route "not measured", said why.

The reference is the equivalence check's: --reference ROUTE, --reference-bundle PATH, else the
config route when it is one of the run's routes. A lone route gets its own perplexity only.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.model.equivalence import Equivalence
from winml_perf.model.perplexity import Perplexity, PerplexityDifference, PerplexityText
from winml_perf.support.errors import BenchmarkFailure, UsageError

if TYPE_CHECKING:
    from winml_perf.bundle.config import GenaiConfig
    from winml_perf.equivalence.check import CheckSource

#: The text scored when --perplexity names no file (src/winml_perf/data/README.md says where it comes from).
DEFAULT_TEXT = Path(__file__).resolve().parents[1] / "data" / "coriolanus-act1.txt"
DEFAULT_CHUNK = 512
CONFIG = "config"


@dataclass(frozen=True)
class Chunks:
    """The text's tokens cut into chunks, as every route scores them."""

    text: PerplexityText
    chunks: tuple[tuple[int, ...], ...]


def chunk_text(source: CheckSource, text_path: Path, chunk: int) -> Chunks:
    """Tokenize ``text_path`` with the source bundle's tokenizer (its session, equivalence/check.CheckSource)
    and cut it into chunks of ``chunk`` tokens (each chunk's first token replaced by BOS when the
    tokenizer adds one, as llama-perplexity does)."""
    from winml_perf.stats.perplexity import chunk_spans, scored_per_chunk

    raw = source.config.raw["model"]
    context = raw.get("context_length")
    if isinstance(context, int) and chunk > context:
        raise UsageError(
            f"--perplexity-chunk {chunk}: longer than the model's context_length {context} "
            f"({Path(source.path) / 'genai_config.json'})",
            f"pass --perplexity-chunk {min(context, DEFAULT_CHUNK)} or less",
        )
    data = text_path.read_bytes()
    text = data.decode("utf-8")
    with source.session as session:
        tokens = session.encode(text)
        probe = session.encode("The")
    bos_id = raw.get("bos_token_id")
    bos = bos_id is not None and bool(probe) and probe[0] == bos_id and (not tokens or tokens[0] == bos_id)
    spans = chunk_spans(len(tokens), chunk)
    if not spans:
        raise UsageError(
            f"--perplexity-text {text_path}: {len(tokens)} tokens, fewer than one chunk of {chunk} (--perplexity-chunk)",
            "pass a longer text, or a smaller --perplexity-chunk",
        )
    chunks = []
    for start, end in spans:
        c = list(tokens[start:end])
        if bos:
            c[0] = int(bos_id)
        chunks.append(tuple(c))
    facts = PerplexityText(
        text_path.name,
        hashlib.sha256(data).hexdigest(),
        len(text),
        len(tokens),
        chunk,
        len(spans),
        scored_per_chunk(chunk),
        bos,
    )
    return Chunks(facts, tuple(chunks))


def _prompt_stages(config: GenaiConfig) -> list[Any]:
    """The stages a prompt runs through, in order, one per file (context and iterator share one)."""
    seen: set[str] = set()
    out = []
    for s in config.stages:
        if s.run_on_prompt and s.filename not in seen:
            seen.add(s.filename)
            out.append(s)
    return out


@dataclass(frozen=True)
class Scorer:
    """One folder's open sessions, one per stage a prompt runs through (a flat decoder: one)."""

    folder: Path
    sessions: tuple[tuple[Any, str, Any], ...]  # (stage, EP, InferenceSession), in order
    kv: Any  # equivalence/passes/layer_outputs.KvShape
    how: str  # "flat decoder" | "pipeline: embeddings → transformer → lm_head"


def open_scorer(folder: str | Path) -> Scorer:
    """The sessions of the bundle at ``folder`` (a route's folder: its own EPs and options), opened once.
    BenchmarkFailure when a stage cannot load."""
    from winml_perf.bundle.config import config_of
    from winml_perf.bundle.variants import stage_session_entries
    from winml_perf.equivalence.passes.layer_outputs import KvShape, open_session, stage_ep

    folder = Path(folder)
    config = config_of(folder)
    decoder = config.raw["model"]["decoder"]
    kv = KvShape(int(decoder.get("num_key_value_heads") or decoder["num_attention_heads"]), int(decoder["head_size"]))
    stages = _prompt_stages(config)
    how = "flat decoder" if config.kind == "flat" else "pipeline: " + " → ".join(s.name for s in stages)
    sessions = []
    for s in stages:
        ep, options = stage_ep(s)
        try:
            sessions.append(
                (s, ep, open_session(folder / s.filename, ep, options, stage_session_entries(config, s.name)))
            )
        except BenchmarkFailure:
            raise
        except Exception as exc:  # onnxruntime raises its own types with the EP's message
            raise BenchmarkFailure(
                f"{s.filename} on {ep}: {_first_line(exc)}", "its perplexity is not measured"
            ) from exc
    return Scorer(folder, tuple(sessions), kv, how)


def chunk_logits(scorer: Scorer, chunk: Sequence[int]) -> Any:
    """One full-sequence pass over ``chunk`` from an empty cache: the S x V logits (float32).
    BenchmarkFailure when a stage cannot run a whole chunk."""
    import numpy as np

    from winml_perf.equivalence.passes.layer_outputs import full_sequence_feeds

    tensors: dict[str, Any] = {}
    for s, ep, session in scorer.sessions:
        inputs = session.get_inputs()
        try:
            feeds = full_sequence_feeds([i for i in inputs if i.name not in tensors], chunk, None, scorer.kv)
            for i in inputs:
                if i.name in tensors:
                    feeds[i.name] = tensors[i.name]
            wanted = [o.name for o in session.get_outputs() if not o.name.startswith("present")]
            tensors.update(zip(wanted, session.run(wanted, feeds)))
        except Exception as exc:  # a static shape, an input the pass cannot feed, an EP failure
            raise BenchmarkFailure(
                f"{s.name} ({s.filename} on {ep}) cannot take a chunk of {len(chunk)} tokens: {_first_line(exc)}",
                "its perplexity is not measured (a smaller --perplexity-chunk may fit)",
            ) from exc
    if "logits" not in tensors:
        raise BenchmarkFailure(f"{scorer.folder}: no stage outputs logits", "its perplexity is not measured")
    return np.asarray(tensors["logits"], dtype=np.float32)[0]


@dataclass
class Pass:
    """One folder's pass over the text, chunk by chunk: its sessions while open, what it has scored so
    far, its agreement with the reference's logits on each chunk, and its cost."""

    scorer: Scorer | None = None
    nlls: list[float] = field(default_factory=list)
    agreement: list[Any] = field(default_factory=list)  # stats/perplexity.ChunkAgreement per chunk
    seconds: float = 0.0
    failure: str | None = None  # why its perplexity is not measured
    agreement_failure: str | None = None  # why its KL and top-1 are not

    def score(self, chunk: Sequence[int]) -> Any:
        """This folder's logits of ``chunk`` with its NLL recorded; None once it failed."""
        from winml_perf.stats.perplexity import chunk_nll

        if self.scorer is None:
            return None
        t0 = time.perf_counter()
        try:
            logits = chunk_logits(self.scorer, chunk)
            self.nlls.append(chunk_nll(logits, chunk))
            return logits
        except BenchmarkFailure as exc:
            self.scorer, self.failure = None, exc.message  # its sessions close with it
            return None
        finally:
            self.seconds += time.perf_counter() - t0

    def agree(self, reference: Any, logits: Any) -> None:
        """Fold this chunk's KL and top-1 against the reference's logits of the same chunk."""
        from winml_perf.stats.perplexity import chunk_agreement

        if reference is None or logits is None or self.agreement_failure is not None:
            return
        t0 = time.perf_counter()
        try:
            self.agreement.append(chunk_agreement(reference, logits))
        except ValueError as exc:  # another vocabulary: no position-by-position comparison
            self.agreement_failure = str(exc)
        self.seconds += time.perf_counter() - t0


def open_pass(folder: Path) -> Pass:
    """A folder's pass with its sessions open (or the reason they would not open)."""
    t0 = time.perf_counter()
    try:
        return Pass(open_scorer(folder), seconds=time.perf_counter() - t0)
    except BenchmarkFailure as exc:
        return Pass(failure=exc.message, seconds=time.perf_counter() - t0)


def score_chunks(
    folders: Sequence[Path], reference: Path | None, chunks: Chunks, self_compare: bool = False
) -> dict[Path, Pass]:
    """Every folder's pass over the text, chunk by chunk: each folder's sessions opened once; on each
    chunk the reference's logits first, then each other folder's, compared with them and let go, so
    memory holds about two chunks' logits at a time, never the whole text's. ``self_compare``: the
    reference is compared with itself too (a route that runs the reference's own folder: KL 0, top-1 1)."""
    passes = {f: open_pass(f) for f in ([reference] if reference is not None else []) + list(folders)}
    for chunk in chunks.chunks:
        ref_logits = passes[reference].score(chunk) if reference is not None else None
        if reference is not None and self_compare:
            passes[reference].agree(ref_logits, ref_logits)
        for folder, p in passes.items():
            if folder != reference:
                p.agree(ref_logits, p.score(chunk))
        del ref_logits
    return passes


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else repr(exc)


def route_perplexity(p: Pass, chunks: Chunks) -> Perplexity:
    """One folder's Perplexity over the chunks (its cost: session loads, passes and scoring)."""
    from winml_perf.stats.perplexity import perplexity

    est = perplexity(p.nlls)
    how = p.scorer.how if p.scorer is not None else ""
    return Perplexity(
        chunks.text, est.perplexity, est.low, est.high, est.confidence, est.mean_nll, tuple(p.nlls),
        round(p.seconds * 1000.0, 3), how,
    )  # fmt: skip


def text_agreement_of(p: Pass, chunks: Chunks) -> Any:
    """The folder's KL and top-1 against the reference over every chunk (stats/perplexity.TextAgreement),
    None when any chunk went without."""
    from winml_perf.stats.perplexity import text_agreement

    if p.agreement_failure is not None or len(p.agreement) != len(chunks.chunks):
        return None
    return text_agreement(p.agreement)


def difference(
    route: Perplexity, reference: Perplexity, reference_label: str, agreement: Any = None
) -> PerplexityDifference:
    """The route's perplexity against the reference's, paired on the same chunks; with ``agreement``
    (stats/perplexity.TextAgreement) its KL and top-1 over the same scored positions."""
    from winml_perf.stats.perplexity import perplexity_ratio

    r = perplexity_ratio(route.chunk_nll, reference.chunk_nll)
    diff = PerplexityDifference(
        reference_label, route.perplexity, reference.perplexity, r.ratio, r.low, r.high,
        r.confidence, r.mean_delta_nll, r.chunks, r.identical,
    )  # fmt: skip
    if agreement is None:
        return diff
    a = agreement
    return replace(
        diff, kl_mean=a.kl_mean, kl_low=a.kl_low, kl_high=a.kl_high, top1_agreement=a.top1, top1_matches=a.matches,
        positions=a.positions, chunk_kl=a.chunk_kl, chunk_top1=a.chunk_matches,
    )  # fmt: skip


def reference_label(routes: Sequence[Any], reference: str) -> str | None:
    """The reference the ratios are taken against: the equivalence check's (``reference``, equivalence/
    check.CheckSource), but the config route only when it is one of ``routes``."""
    return reference if reference != CONFIG or any(r.label == CONFIG for r in routes) else None


@dataclass(frozen=True)
class Measured:
    """What the passes gave, by label: each perplexity, its agreement with the reference, or why not."""

    perplexity: dict[str, Perplexity]
    agreement: dict[str, Any]  # label -> stats/perplexity.TextAgreement (routes other than the reference)
    failed: dict[str, str]  # label -> why its perplexity is not measured
    agreement_failed: dict[str, str]  # label -> why its KL and top-1 are not
    passes: int  # folders measured


def measure_labels(todo: Sequence[tuple[str, Path]], ref_label: str | None, chunks: Chunks) -> Measured:
    """Score every distinct folder of ``todo`` (label, folder) chunk by chunk against the reference's."""
    keys = {label: folder.resolve() for label, folder in todo}
    ref_key = keys.get(ref_label) if ref_label else None
    shares = any(k == ref_key for label, k in keys.items() if label != ref_label)  # a route on the reference's
    passes = score_chunks(list(dict.fromkeys(keys.values())), ref_key, chunks, self_compare=shares)
    m = Measured({}, {}, {}, {}, sum(p.failure is None for p in passes.values()))
    for label, key in keys.items():
        p = passes[key]
        if p.failure is not None:
            m.failed[label] = p.failure
            continue
        m.perplexity[label] = route_perplexity(p, chunks)
        if ref_key is not None and label != ref_label:
            m.agreement[label] = text_agreement_of(p, chunks)
            if p.agreement_failure is not None:
                m.agreement_failed[label] = p.agreement_failure
    return m


def differences(labels: Sequence[str], m: Measured, ref_label: str | None) -> dict[str, PerplexityDifference]:
    """{label: its perplexity against the reference's} for every route of ``labels`` measured but the
    reference itself; {} when the reference was not measured."""
    reference = m.perplexity.get(ref_label) if ref_label else None
    if reference is None:
        return {}
    return {
        label: difference(m.perplexity[label], reference, str(ref_label), m.agreement.get(label))
        for label in labels
        if label in m.perplexity and label != ref_label
    }


def with_perplexity(r: Any, m: Measured, diff: PerplexityDifference | None) -> Any:
    """One route with its perplexity (or why not) and, judged against the same reference
    (route.equivalence), ``diff``."""
    p = m.perplexity.get(r.label)
    route = r.recorded_route
    if p is None:
        return replace(r, route=replace(route, perplexity_not_measured=m.failed.get(r.label, "not measured")))
    route = replace(route, perplexity=p)
    if diff is not None and isinstance(route.equivalence, Equivalence):  # judged against the same reference
        route = replace(route, equivalence=replace(route.equivalence, perplexity=diff))
    return replace(r, route=route)


def text_to_score(asked: bool, text: Path | None, chunk: int, token_based: bool) -> Path | None:
    """--perplexity / --perplexity-text FILE: the text to score (the packaged one without FILE), readable
    UTF-8; None when neither was given; else exit 2."""
    if not asked and text is None:
        if chunk != DEFAULT_CHUNK:
            raise UsageError("--perplexity-chunk needs --perplexity", "add --perplexity, or drop --perplexity-chunk")
        return None
    if not token_based:
        raise UsageError("--perplexity needs a genai bundle (its tokenizer)", "drop --perplexity, or --runtime winml")
    path = text if text is not None else DEFAULT_TEXT
    try:
        content = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"--perplexity-text {path}: cannot read it as UTF-8 text: {exc}", "pass a UTF-8 text file"
        ) from exc
    if not content.strip():
        raise UsageError(f"--perplexity-text {path}: the file is empty", "pass a text of a few thousand tokens")
    return path
