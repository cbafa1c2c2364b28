"""Issue 34 (cheap enough to leave on): one equivalence check runs each stage file's layer pass once
per distinct (file on disk, EP, options, session entries), and a tune's extra check prompts take a
route's model loaded for an earlier prompt. Both on the real runtime over the committed tiny
pipeline bundle; what is shared must be exactly what running again would give."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from winml_perf.bundle.variants import optimization_variant
from winml_perf.equivalence import check as eq
from winml_perf.equivalence import layers
from winml_perf.equivalence.passes.genai_logits import teacher_forced
from winml_perf.equivalence.passes.model_pool import ModelPool, keep_models
from winml_perf.equivalence.passes.shared_passes import FilePasses

BUNDLES = Path(__file__).resolve().parents[2] / "bundles"
PIPELINE = BUNDLES / "tiny-qwen2-pipeline"
TOKENS = [5, 17, 3, 99, 42, 8, 23, 61]


def _linked(src: Path, dest: Path, config: dict | None = None) -> Path:
    """``src``'s files hard-linked into ``dest`` (as a derived bundle links them), its config replaced."""
    dest.mkdir()
    for f in src.iterdir():
        if f.is_file() and f.name != "genai_config.json":
            (dest / f.name).hardlink_to(f)
    cfg = config or json.loads((src / "genai_config.json").read_text())
    (dest / "genai_config.json").write_text(json.dumps(cfg))
    return dest


def _same(a: layers.LayerProfile, b: layers.LayerProfile) -> bool:
    return a.values.keys() == b.values.keys() and all(np.array_equal(a.values[k], b.values[k]) for k in a.values)


def test_a_stage_file_run_alike_is_run_once_and_gives_what_running_it_again_gives(tmp_path):
    bands = layers.LayerBands.of(PIPELINE, TOKENS)
    ran = bands.shared.runs
    assert ran == 2 and bands.shared.reused == 0  # the transformer file: accumulated and layer-by-layer

    route = _linked(PIPELINE, tmp_path / "route")  # a derived bundle: same files, same EP and options
    accumulated, own = bands.passes(route)
    assert (bands.shared.runs, bands.shared.reused) == (ran, 2)
    fresh = layers.layer_profile(route, TOKENS, bands.reference.embeds)
    fresh_own = layers.layer_profile(route, TOKENS, bands.reference.embeds, teacher=bands.reference.values)
    assert _same(accumulated, fresh) and _same(own, fresh_own)
    assert accumulated.stage_of == fresh.stage_of and accumulated.tokens == fresh.tokens


def test_another_session_setting_or_a_rewritten_file_is_run_again(tmp_path):
    bands = layers.LayerBands.of(PIPELINE, TOKENS)
    variant = optimization_variant(PIPELINE)  # the same files linked, another graph optimisation level
    try:
        bands.passes(variant)
        assert (bands.shared.runs, bands.shared.reused) == (4, 0)
    finally:
        shutil.rmtree(variant, ignore_errors=True)

    copied = tmp_path / "copied"  # the same bytes in another file: not taken for the same file
    shutil.copytree(PIPELINE, copied)
    bands.passes(copied)
    assert (bands.shared.runs, bands.shared.reused) == (6, 0)


def test_a_pass_that_failed_is_remembered_as_failed_not_as_layers():
    shared = FilePasses()
    bands = layers.LayerBands.of(PIPELINE, TOKENS)
    for key in bands.shared.done:
        shared.done[key] = "context/iterator: the layer pass on X failed"
    again = layers.layer_profile(PIPELINE, TOKENS, bands.reference.embeds, shared=shared)
    assert again.values == {} and again.unobserved == ("context/iterator: the layer pass on X failed",)
    assert shared.reused == 1


def test_a_kept_model_gives_the_same_logits_and_is_not_loaded_again(tmp_path):
    alone = teacher_forced(PIPELINE, TOKENS, 4)
    with keep_models() as pool:
        first = teacher_forced(PIPELINE, TOKENS, 4)
        second = teacher_forced(PIPELINE, TOKENS[:5], 4)
        assert (pool.loads, pool.reused) == (1, 1)
    assert np.array_equal(first.logits, alone.logits)
    assert np.array_equal(second.logits, teacher_forced(PIPELINE, TOKENS[:5], 4).logits)
    assert pool.models == {}  # let go when the check ends


def test_a_folder_made_again_under_the_same_name_is_loaded_again(tmp_path):
    with keep_models() as pool:
        folder = _linked(PIPELINE, tmp_path / "variant")
        teacher_forced(folder, TOKENS, 2)
        shutil.rmtree(folder)
        _linked(PIPELINE, folder)
        teacher_forced(folder, TOKENS, 2)
        assert (pool.loads, pool.reused) == (2, 0)


def test_the_pool_keeps_models_within_its_budget_and_lets_go_of_the_oldest(tmp_path):
    a, b = _linked(PIPELINE, tmp_path / "a"), _linked(PIPELINE, tmp_path / "b")
    size = sum(f.stat().st_size for f in PIPELINE.iterdir() if f.is_file())
    pool = ModelPool(budget=int(size * 1.5))  # room for one
    pool.model(a)
    pool.model(b)
    pool.model(a)
    assert (pool.loads, pool.reused) == (3, 0)
    pool.model(a)
    assert pool.reused == 1 and len(pool.models) == 1
    pool.retain([b])
    assert pool.models == {}
    assert ModelPool(budget=0).model(a) is not None  # too large to keep: loaded, not kept


@pytest.mark.parametrize("near", [True, False])
def test_the_tunes_extra_prompts_take_the_models_loaded_for_the_first(monkeypatch, tmp_path, near):
    """A route near its limit is judged on three prompts: the reference and the route are loaded once."""
    from types import SimpleNamespace as NS

    from winml_perf.equivalence import pooled as check

    monkeypatch.setattr(check, "near_limit", lambda e: near)
    copy = _linked(PIPELINE, tmp_path / "copy")
    judged, report = check.judge(str(PIPELINE), [NS(label="copy", session=NS(path=str(copy)))], cache=False)
    assert judged["copy"].verdict
    loads, reused = report.figures["models_loaded"], report.figures["models_reused"]
    if near:  # seeds 1 and 2 take the reference's and the route's model from the pool
        assert reused >= 4 and "kept from an earlier prompt" in report.line
        assert "over 3 check prompts" in judged["copy"].line
    else:
        assert reused == 0 and loads >= 2


def test_the_reference_band_variants_are_made_once_per_check_and_removed_after(monkeypatch, tmp_path):
    """Over the tune's three check prompts the noise and precision variants are made once, and no
    variant folder outlives the check."""
    from types import SimpleNamespace as NS

    from winml_perf.bundle import variants
    from winml_perf.equivalence import pooled as check

    made: list[Path] = []
    real = variants.optimization_variant

    def counted(bundle, *a, **k):
        made.append(real(bundle, *a, **k))
        return made[-1]

    monkeypatch.setattr(variants, "optimization_variant", counted)
    monkeypatch.setattr(check, "near_limit", lambda e: True)
    copy = _linked(PIPELINE, tmp_path / "copy")
    judged, report = check.judge(str(PIPELINE), [NS(label="copy", session=NS(path=str(copy)))], cache=False)
    assert "over 3 check prompts" in judged["copy"].line
    assert len(made) == 1 and not made[0].exists()


def test_a_layer_session_is_opened_once_per_check_and_gives_what_a_fresh_one_gives():
    """The tune's later prompts run a stage file's tapped session again instead of opening it again
    (its graph does not depend on the prompt); the layers read are those of a fresh session."""
    other = [7, 11, 2, 80, 31, 4, 66, 19]
    fresh = layers.LayerBands.of(PIPELINE, other)
    with keep_models() as pool:
        layers.LayerBands.of(PIPELINE, TOKENS)
        opened = pool.sessions_opened
        assert opened == 2 and pool.sessions_reused == 0  # the transformer: accumulated and layer-by-layer
        kept = layers.LayerBands.of(PIPELINE, other)
        assert pool.sessions_opened == opened and pool.sessions_reused == 2
    assert _same(kept.reference, fresh.reference) and _same(kept.local, fresh.local)
    assert pool.sessions == {}  # let go when the check ends


def test_layer_passes_run_beside_only_on_eps_that_allow_it_and_judge_alike(monkeypatch, tmp_path):
    """A CPU route's layer passes run in the second thread and give the judgement the main thread
    gives; a route with a WebGPU stage has its layers judged in turn (its EP is not 'sessions_beside')."""
    from dataclasses import replace
    from types import SimpleNamespace as NS

    from winml_perf.equivalence.passes import layers_ahead

    cpu = _linked(PIPELINE, tmp_path / "cpu")
    cfg = json.loads((PIPELINE / "genai_config.json").read_text())
    cfg["model"]["decoder"]["session_options"]["provider_options"] = [{"WebGPU": {}}]
    webgpu = _linked(PIPELINE, tmp_path / "webgpu", cfg)
    assert eq._layers_beside(str(cpu)) and not eq._layers_beside(str(webgpu))

    started: list[list[str]] = []
    real_start = layers_ahead.LayersAhead.start
    monkeypatch.setattr(
        layers_ahead.LayersAhead, "start", lambda self, p: started.append(list(p)) or real_start(self, p)
    )
    route = [NS(label="cpu", session=NS(path=str(cpu)))]
    first = eq.judge_routes(eq.check_source(str(PIPELINE)), route, steps=4)
    assert started == [[str(cpu)]]
    assert first.cost.route_layers_ms > 0 and first.cost.route_layers_in_turn_ms == 0
    monkeypatch.setattr(eq, "_layers_beside", lambda path: False)
    second = eq.judge_routes(eq.check_source(str(PIPELINE)), route, steps=4)
    assert started[-1] == []
    assert second.cost.route_layers_ms == 0 and second.cost.route_layers_in_turn_ms > 0  # said as run in turn
    beside, in_turn = first.by_label["cpu"], second.by_label["cpu"]
    assert replace(beside, cost_ms=0.0, layers=replace(beside.layers, cost_ms=0.0)) == replace(
        in_turn, cost_ms=0.0, layers=replace(in_turn.layers, cost_ms=0.0)
    )
