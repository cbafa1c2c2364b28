"""KL and top-1 against the reference over the perplexity's text (issue 34, item 3): the passes run chunk
by chunk, the reference's logits first on each chunk, each other folder compared with them and let go;
a route on the reference's own folder reads KL 0 and top-1 1 exactly; a route that fails stays not
measured, the others go on. The sessions are stood in for: each folder's logits are made by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from winml_perf.equivalence import perplexity as mp
from winml_perf.model.perplexity import PerplexityText
from winml_perf.support.errors import BenchmarkFailure

V = 40
CHUNK = 8
REF, SAME, SHIFTED, BROKEN = Path("/ref"), Path("/same"), Path("/shifted"), Path("/broken")


def _chunks(n: int) -> mp.Chunks:
    rng = np.random.default_rng(7)
    chunks = tuple(tuple(int(t) for t in rng.integers(0, V, CHUNK)) for _ in range(n))
    text = PerplexityText("t.txt", "0" * 64, 100, n * CHUNK, CHUNK, n, CHUNK - 1 - CHUNK // 2, False)
    return mp.Chunks(text, chunks)


@pytest.fixture
def fake_sessions(monkeypatch):
    """Each folder's logits of a chunk: the reference's a function of the chunk, SAME's bit-equal to
    them, SHIFTED's changed on every row, BROKEN's failing on the second chunk. Calls are logged."""
    calls: list[tuple[Path, int]] = []

    def logits(folder: Path, chunk) -> np.ndarray:
        seed = sum(chunk)
        base = np.random.default_rng(seed).normal(0, 4, (len(chunk), V)).astype(np.float32)
        if folder == SHIFTED:
            return base + np.random.default_rng(seed + 1).normal(0, 2, base.shape).astype(np.float32)
        return base

    def open_scorer(folder):
        return mp.Scorer(Path(folder), (), None, "flat decoder")

    def chunk_logits(scorer, chunk):
        calls.append((scorer.folder, len([c for c in calls if c[0] == scorer.folder])))
        if scorer.folder == BROKEN and len([c for c in calls if c[0] == BROKEN]) == 2:
            raise BenchmarkFailure("context cannot take a chunk of 8 tokens", "not measured")
        return logits(scorer.folder, chunk)

    monkeypatch.setattr(mp, "open_scorer", open_scorer)
    monkeypatch.setattr(mp, "chunk_logits", chunk_logits)
    return calls


def test_the_reference_runs_first_on_each_chunk_then_each_route(fake_sessions):
    passes = mp.score_chunks([SAME, SHIFTED], REF, _chunks(3))
    order = [folder for folder, _ in fake_sessions]
    assert order == [REF, SAME, SHIFTED] * 3  # chunk by chunk, never a whole text's logits held
    assert all(len(p.nlls) == 3 for p in passes.values())
    assert len(passes[SHIFTED].agreement) == 3 and passes[REF].agreement == []  # not compared with itself


def test_identical_logits_read_kl_zero_and_top1_one_and_changed_ones_kl_above_zero(fake_sessions):
    chunks = _chunks(4)
    m = mp.measure_labels([("config", REF), ("ep=cpu", SAME), ("ep=x", SHIFTED)], "config", chunks)
    same, shifted = m.agreement["ep=cpu"], m.agreement["ep=x"]
    assert same.kl_mean == 0.0 and same.kl_low == 0.0 and same.kl_high == 0.0 and same.top1 == 1.0
    assert same.positions == 4 * chunks.text.scored_per_chunk == same.matches
    assert shifted.kl_mean > 0 and 0 < shifted.kl_low <= shifted.kl_mean <= shifted.kl_high
    assert shifted.top1 < 1.0 and len(shifted.chunk_kl) == 4 and "config" not in m.agreement
    diff = mp.difference(m.perplexity["ep=x"], m.perplexity["config"], "config", shifted)
    assert diff.kl_mean == shifted.kl_mean and diff.top1_matches == shifted.matches and diff.positions == 12
    assert mp.difference(m.perplexity["ep=cpu"], m.perplexity["config"], "config", same).identical


def test_a_route_on_the_reference_folder_itself_reads_kl_zero(fake_sessions):
    # --reference-bundle naming the route's own folder: one pass, compared with itself
    m = mp.measure_labels([("config", REF), ("bundle:/ref", REF)], "bundle:/ref", _chunks(2))
    assert m.passes == 1 and m.agreement["config"].kl_mean == 0.0 and m.agreement["config"].top1 == 1.0


def test_a_route_that_fails_midway_is_not_measured_and_the_others_go_on(fake_sessions):
    m = mp.measure_labels([("config", REF), ("ep=npu", BROKEN), ("ep=x", SHIFTED)], "config", _chunks(3))
    assert "cannot take a chunk" in m.failed["ep=npu"] and "ep=npu" not in m.perplexity
    assert m.agreement["ep=x"].positions == 3 * 3 and m.passes == 2
    assert [f for f, _ in fake_sessions].count(BROKEN) == 2  # dropped after its failure, its sessions let go


def test_without_a_reference_there_is_no_agreement(fake_sessions):
    m = mp.measure_labels([("ep=a", SAME), ("ep=x", SHIFTED)], None, _chunks(2))
    assert m.agreement == {} and set(m.perplexity) == {"ep=a", "ep=x"}
