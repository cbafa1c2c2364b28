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
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from winml_perf.model.equivalence import Equivalence
from winml_perf.model.perplexity import Perplexity, PerplexityDifference, PerplexityText
from winml_perf.support.errors import BenchmarkFailure, UsageError

#: The text scored when --perplexity names no file (src/winml_perf/data/README.md says where it comes from).
DEFAULT_TEXT = Path(__file__).resolve().parents[1] / "data" / "coriolanus-act1.txt"
DEFAULT_CHUNK = 512
CONFIG = "config"


@dataclass(frozen=True)
class Chunks:
    """The text's tokens cut into chunks, as every route scores them."""

    text: PerplexityText
    chunks: tuple[tuple[int, ...], ...]


def chunk_text(bundle: str | Path, text_path: Path, chunk: int) -> Chunks:
    """Tokenize ``text_path`` with the bundle's tokenizer and cut it into chunks of ``chunk`` tokens
    (each chunk's first token replaced by BOS when the tokenizer adds one, as llama-perplexity does)."""
    from winml_perf.bundle.config import load_config
    from winml_perf.session.genai_session import GenaiSession
    from winml_perf.stats.perplexity import chunk_spans, scored_per_chunk

    raw = load_config(Path(bundle)).raw["model"]
    context = raw.get("context_length")
    if isinstance(context, int) and chunk > context:
        raise UsageError(
            f"--perplexity-chunk {chunk}: longer than the model's context_length {context} "
            f"({Path(bundle) / 'genai_config.json'})",
            f"pass --perplexity-chunk {min(context, DEFAULT_CHUNK)} or less",
        )
    data = text_path.read_bytes()
    text = data.decode("utf-8")
    with GenaiSession(bundle) as session:
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


def _prompt_stages(config) -> list:
    """The stages a prompt runs through, in order, one per file (context and iterator share one)."""
    seen: set[str] = set()
    out = []
    for s in config.stages:
        if s.run_on_prompt and s.filename not in seen:
            seen.add(s.filename)
            out.append(s)
    return out


def chunk_nlls(folder: str | Path, chunks: Chunks) -> tuple[list[float], str]:
    """Each chunk's mean NLL on the bundle at ``folder`` (a route's folder: its own EPs and options),
    and how it was run. BenchmarkFailure when a stage cannot load or run a whole chunk."""
    import numpy as np

    from winml_perf.bundle.config import load_config
    from winml_perf.bundle.variants import stage_session_entries
    from winml_perf.measure.equivalence import _stage_ep
    from winml_perf.session.layer_outputs import KvShape, full_sequence_feeds, open_session
    from winml_perf.stats.perplexity import chunk_nll

    folder = Path(folder)
    config = load_config(folder)
    decoder = config.raw["model"]["decoder"]
    kv = KvShape(int(decoder.get("num_key_value_heads") or decoder["num_attention_heads"]), int(decoder["head_size"]))
    stages = _prompt_stages(config)
    how = "flat decoder" if config.kind == "flat" else "pipeline: " + " → ".join(s.name for s in stages)
    sessions = []
    for s in stages:
        ep, options = _stage_ep(s)
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
    out: list[float] = []
    for chunk in chunks.chunks:
        tensors: dict[str, Any] = {}
        for s, ep, session in sessions:
            inputs = session.get_inputs()
            try:
                feeds = full_sequence_feeds([i for i in inputs if i.name not in tensors], chunk, None, kv)
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
            raise BenchmarkFailure(f"{folder}: no stage outputs logits", "its perplexity is not measured")
        out.append(chunk_nll(np.asarray(tensors["logits"], dtype=np.float32)[0], chunk))
    return out, how


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else repr(exc)


def route_perplexity(folder: str | Path, chunks: Chunks) -> Perplexity:
    """One route's Perplexity over the chunks (its cost: session loads, passes and scoring)."""
    from winml_perf.stats.perplexity import perplexity

    t0 = time.perf_counter()
    nlls, how = chunk_nlls(folder, chunks)
    est = perplexity(nlls)
    ms = round((time.perf_counter() - t0) * 1000.0, 3)
    return Perplexity(
        chunks.text, est.perplexity, est.low, est.high, est.confidence, est.mean_nll, tuple(nlls), ms, how
    )


def difference(route: Perplexity, reference: Perplexity, reference_label: str) -> PerplexityDifference:
    """The route's perplexity against the reference's, paired on the same chunks."""
    from winml_perf.stats.perplexity import perplexity_ratio

    r = perplexity_ratio(route.chunk_nll, reference.chunk_nll)
    return PerplexityDifference(
        reference_label, route.perplexity, reference.perplexity, r.ratio, r.low, r.high,
        r.confidence, r.mean_delta_nll, r.chunks, r.identical,
    )  # fmt: skip


def _interval(low: float | None, high: float | None, digits: str) -> str:
    if low is None or high is None:
        return "(no interval: one chunk)"
    return f"[{low:{digits}}, {high:{digits}}]"


def perplexity_line(label: str, p: Perplexity, diff: PerplexityDifference | None) -> str:
    """'perplexity: ep=qnn 23.41 [21.9, 25.0] over 8 chunks of 512 tokens of coriolanus-act1.txt (95 %);
    ×1.0123 [1.004, 1.021] against config'."""
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
    return text


def reference_label(routes: Sequence[Any], reference_bundle: str | None, reference_route: str | None) -> str | None:
    """The reference the ratios are taken against: as the equivalence check chooses it."""
    if reference_bundle:
        return f"bundle:{reference_bundle}"
    if reference_route:
        from winml_perf.measure.equivalence import reference_of

        return str(reference_of(routes, reference_route).label)
    return CONFIG if any(r.label == CONFIG for r in routes) else None


def attach_perplexity(
    bundle: str,
    routes: list[Any],
    text_path: Path,
    chunk: int,
    reference_bundle: str | None = None,
    reference_route: str | None = None,
) -> list[Any]:
    """The routes with their perplexity recorded (route.perplexity) and, where the route was judged
    against the reference (route.equivalence), the ratio to the reference's; one line per route and
    the cost on stderr."""
    t0 = time.perf_counter()
    chunks = chunk_text(bundle, text_path, chunk)
    ref_label = reference_label(routes, reference_bundle, reference_route)
    measured: dict[str, Perplexity] = {}
    failed: dict[str, str] = {}
    by_folder: dict[Path, Perplexity | str] = {}  # one pass per folder: a reference bundle that is a route's own
    todo = [(r.label, Path(r.session.path)) for r in routes]
    if reference_bundle:
        todo.append((ref_label or "", Path(reference_bundle)))
    for label, folder in todo:
        key = folder.resolve()
        if key not in by_folder:
            try:
                by_folder[key] = route_perplexity(folder, chunks)
            except BenchmarkFailure as exc:
                by_folder[key] = exc.message
        done = by_folder[key]
        if isinstance(done, Perplexity):
            measured[label] = done
        else:
            failed[label] = done
    reference = measured.get(ref_label) if ref_label else None
    if reference_bundle and reference is not None:
        print(perplexity_line(str(ref_label), reference, None), file=sys.stderr)
    out = []
    for r in routes:
        p = measured.get(r.label)
        route = r.recorded_route
        if p is None:
            why = failed.get(r.label, "not measured")
            print(f"perplexity: {r.label} not measured: {why}", file=sys.stderr)
            out.append(replace(r, route=replace(route, perplexity_not_measured=why)))
            continue
        diff = difference(p, reference, str(ref_label)) if reference is not None and r.label != ref_label else None
        print(perplexity_line(r.label, p, diff), file=sys.stderr)
        route = replace(route, perplexity=p)
        if diff is not None and isinstance(route.equivalence, Equivalence):  # judged against the same reference
            route = replace(route, equivalence=replace(route.equivalence, perplexity=diff))
        out.append(replace(r, route=route))
    if ref_label and reference is None and ref_label in failed:
        print(
            f"perplexity: no ratio: the reference {ref_label} was not measured ({failed[ref_label]})", file=sys.stderr
        )
    n = sum(isinstance(v, Perplexity) for v in by_folder.values())
    print(
        f"perplexity: {n} pass(es) of {chunks.text.chunks} x {chunk} tokens ({chunks.text.tokens} tokens of "
        f"{chunks.text.name}) in {time.perf_counter() - t0:.1f} s, outside the timed iterations",
        file=sys.stderr,
    )
    return out


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
