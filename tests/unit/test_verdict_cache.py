"""Issue 34 item 4: equivalence verdicts kept by content (equivalence/verdict_cache.py). The teacher-forced
and layer passes are faked at the session seam; the bundles are real folders, so their content decides."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace as NS

import numpy as np
import pytest

from winml_perf.equivalence import attach, layers, verdict_cache
from winml_perf.equivalence import check as eq
from winml_perf.equivalence.passes import genai_logits
from winml_perf.model.equivalence import NOT_EQUIVALENT, Band, LogitFigures, StagePrecision
from winml_perf.stats.equivalence import band_limit

PLUGINS = verdict_cache._plugins
REF = np.random.default_rng(0).normal(size=(8, 50)).astype(np.float32)


def _logits(folder: Path, steps: int) -> np.ndarray:
    """The reference's logits, moved by the first byte of the folder's weights (0: not at all)."""
    ref = np.resize(REF, (steps, REF.shape[1]))
    moved = (folder / "model.onnx.data").read_bytes()[0]
    return ref + np.float32(moved / 100) * np.random.default_rng(moved).normal(size=ref.shape).astype(np.float32)


def _band(name: str, kl: float, floor: float = 0.0) -> Band:
    f = LogitFigures(8, kl, kl, 0.0, 1.0, 1.0, None, kl == 0)
    return Band(name, "x", f, band_limit(f, floor))


@pytest.fixture
def passes(monkeypatch, tmp_path):
    """Every pass the check runs, by kind and folder name ('tf:ref', 'layers:ep', 'bands:ref')."""
    calls: list[str] = []

    def teacher_forced(path, prompt_ids, steps, continuation=None, outputs=()):
        calls.append(f"tf:{Path(path).name}")
        return genai_logits.TeacherForced(str(path), _logits(Path(path), steps), tuple(range(steps)), {})

    def layer_profile(path, tokens, embeds=None, teacher=None, shared=None):
        calls.append(f"layers:{Path(path).name}")
        scale = 1.0 + (Path(path) / "model.onnx.data").read_bytes()[0]
        values = {k: np.resize(REF, (1, len(tokens), REF.shape[1])) * (k + 1) * scale for k in range(4)}
        return layers.LayerProfile(
            values, dict.fromkeys(values, "decoder"), dict.fromkeys(values, "t"), (), None, 1, 1.0
        )

    def reference_bands(path, reference, prompt_ids, layers=None):
        calls.append(f"bands:{Path(path).name}")
        if layers is not None:
            layers.errors["precision"] = dict.fromkeys(range(4), 0.01)
        return _band("noise floor", 0.0, 1e-6), _band("precision", 0.01)

    monkeypatch.setattr(genai_logits, "teacher_forced", teacher_forced)
    monkeypatch.setattr(layers, "layer_profile", layer_profile)
    monkeypatch.setattr(eq, "reference_bands", reference_bands)
    monkeypatch.setattr(eq, "_stage_outputs", lambda path: [])
    monkeypatch.setattr(
        eq, "_precision", lambda path: (StagePrecision("decoder", "CPUExecutionProvider", (4,), (), "fp32"),)
    )
    monkeypatch.setattr(verdict_cache, "_plugins", lambda folder, config=None: {})
    monkeypatch.setattr(
        "winml_perf.session.genai_session.GenaiSession.synthetic_prompt", lambda self, n, seed=0: [10 + seed] * n
    )
    monkeypatch.setattr(
        "winml_perf.session.genai_session.token_facts",
        lambda cfg, where: NS(vocab_size=50, context_length=0, special_ids=frozenset()),
    )
    monkeypatch.setattr("winml_perf.session.genai_session.read_json", lambda p: {})
    monkeypatch.setattr("winml_perf.bundle.config.load_config", lambda p: NS(static_prompt_length=lambda: None, raw={}))
    return calls


def _bundle(folder: Path, weight: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "genai_config.json").write_text('{"model": {}}')
    (folder / "model.onnx.data").write_bytes(bytes([weight]) + b"\0" * 63)
    return folder


@pytest.fixture
def bundles(tmp_path):
    """The reference 'ref', a route 'ep' that differs from it, and 'twin', a copy of 'ep'."""
    ref = _bundle(tmp_path / "ref")
    return ref, _bundle(tmp_path / "ep", weight=30), _bundle(tmp_path / "twin", weight=30)


def _routes(*paths: Path) -> list:
    from winml_perf.model.spec import RouteSpec, SessionSpec

    return [RouteSpec(f"ep={p.name}", SessionSpec("winml-genai", str(p))) for p in paths]


def _same(a, b) -> bool:
    """Two judgements alike but for this run's cost."""
    return replace(a, cost_ms=0.0) == replace(b, cost_ms=0.0)


def test_a_second_identical_run_judges_nothing_and_gets_the_same_verdicts(passes, bundles):
    ref, ep, _ = bundles
    first = eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True)
    assert passes[:4] == ["tf:ref", "layers:ref", "layers:ref", "bands:ref"]  # the reference first
    assert sorted(passes[4:]) == ["layers:ep", "layers:ep", "tf:ep"]  # its layers beside its teacher-forced pass
    assert first.cost.judged == 1 and first.cost.from_cache == 0
    passes.clear()
    second = eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True)
    assert passes == []  # neither the reference, nor its bands, nor the route
    assert second.cost.judged == 0 and second.cost.from_cache == 1
    assert _same(second.by_label["ep=ep"], first.by_label["ep=ep"])
    assert first.by_label["ep=ep"].verdict == NOT_EQUIVALENT  # a real judgement was kept, layers and all
    assert second.by_label["ep=ep"].layers == first.by_label["ep=ep"].layers is not None


def test_verdicts_with_and_without_the_cache_are_equal(passes, bundles):
    ref, ep, _ = bundles
    plain = eq.judge_routes(eq.check_source(str(ref)), _routes(ep, ref), steps=8)
    cold = eq.judge_routes(eq.check_source(str(ref)), _routes(ep, ref), steps=8, cache=True)
    warm = eq.judge_routes(eq.check_source(str(ref)), _routes(ep, ref), steps=8, cache=True)
    assert warm.cost.from_cache == 2
    for label in ("ep=ep", "ep=ref"):
        assert _same(plain.by_label[label], cold.by_label[label]) and _same(plain.by_label[label], warm.by_label[label])


def test_one_changed_byte_of_the_route_or_the_reference_misses(passes, bundles):
    ref, ep, _ = bundles
    eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True)
    data = ep / "model.onnx.data"
    data.write_bytes(bytes([31]) + data.read_bytes()[1:])  # one byte of a weight
    passes.clear()
    run = eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True)
    assert run.cost.judged == 1 and "tf:ep" in passes
    assert "bands:ref" not in passes  # the reference did not change: its bands are read back
    data = ref / "model.onnx.data"
    data.write_bytes(data.read_bytes()[:-1] + b"\1")  # the reference's last byte
    passes.clear()
    run = eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True)
    assert run.cost.judged == 1 and "bands:ref" in passes and "tf:ep" in passes


def test_another_prompt_steps_layers_or_code_misses(passes, bundles, monkeypatch):
    ref, ep, _ = bundles
    eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True)
    assert eq.judge_routes(eq.check_source(str(ref), 1), _routes(ep), steps=8, cache=True).cost.judged == 1
    assert eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=6, cache=True).cost.judged == 1
    assert eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, layers=False, cache=True).cost.judged == 1
    monkeypatch.setattr(verdict_cache, "code_digest", lambda: "another equivalence code")
    assert eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True).cost.judged == 1


def test_two_routes_of_the_same_content_share_one_judgement(passes, bundles):
    ref, ep, twin = bundles
    run = eq.judge_routes(eq.check_source(str(ref)), _routes(ep, twin, ref), steps=8, cache=True)
    assert passes.count("tf:ep") == 1 and "tf:twin" not in passes
    assert passes.count("bands:ref") == 1 and passes.count("tf:ref") == 2  # the reference's, then route ep=ref's
    assert run.cost.judged == 2 and run.cost.shared == 1
    assert run.by_label["ep=twin"].route_path == str(twin)  # its own folder, the other's figures
    assert _same(run.by_label["ep=twin"], replace(run.by_label["ep=ep"], route_path=str(twin)))


def test_a_corrupt_entry_is_ignored_and_rewritten(passes, bundles, capsys):
    ref, ep, _ = bundles
    first = eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True)
    entries = sorted((ref / "_compiled").glob("equivalence-*.json"), key=lambda p: p.name.rsplit("-", 1)[1])
    assert [p.name.rsplit("-", 1)[1] for p in entries] == ["bands.json", "route.json"]
    for path, junk in zip(entries, ("{not json", '{"key": "forged", "kind": "route", "value": {}}')):
        path.write_text(junk)
    run = eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True)
    assert run.cost.judged == 1 and _same(run.by_label["ep=ep"], first.by_label["ep=ep"])
    assert capsys.readouterr().err.count("is damaged") == 2
    again = eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True)  # rewritten whole
    assert again.cost.from_cache == 1 and "damaged" not in capsys.readouterr().err


def test_an_entry_moved_under_another_key_is_not_trusted(passes, bundles):
    ref, ep, twin = bundles
    eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True)
    (twin / "model.onnx.data").write_bytes(bytes([40]) + b"\0" * 63)
    route = next((ref / "_compiled").glob("equivalence-*-route.json"))
    twin_key = verdict_cache.VerdictCache.open(ref, ref, NS(stages=()), [10] * 16, 8, True).route_key(twin)
    route.rename(ref / "_compiled" / f"equivalence-{twin_key[:12]}-route.json")  # the name says twin's
    assert eq.judge_routes(eq.check_source(str(ref)), _routes(twin), steps=8, cache=True).cost.judged == 1


def test_the_cost_line_says_what_came_from_the_cache(passes, bundles, capsys):
    ref, ep, twin = bundles
    out = attach.attach_equivalence(eq.check_source(str(ref)), _routes(ep), cache=True)
    assert out[0].recorded_route.equivalence.verdict == NOT_EQUIVALENT
    cold = capsys.readouterr().err.splitlines()[-1]
    assert cold.startswith("equivalence: 1 route(s) against config in ")
    assert "(0 from cache, 1 judged: reference " in cold and ", bands " in cold and ", routes " in cold
    assert cold.endswith("s), outside the timed iterations") and "content keys" in cold
    attach.attach_equivalence(eq.check_source(str(ref)), _routes(ep, twin), cache=True)
    assert "(1 from cache, 1 shared (same content), 0 judged, content keys " in capsys.readouterr().err
    attach.attach_equivalence(eq.check_source(str(ref)), _routes(ep))  # --no-equivalence-cache
    off = capsys.readouterr().err.splitlines()[-1]
    assert "(1 judged: reference " in off and "cache" not in off


def test_the_reference_config_is_read_once_for_the_check_and_its_keys(passes, bundles, monkeypatch):
    """The reference's plugins enter every key from the config the CheckSource holds (read once a check),
    not from the reference's folder read again."""
    from winml_perf.bundle import config
    from winml_perf.ep import plugins

    ref, ep, _ = bundles
    read: list[str] = []
    webgpu = NS(provider_options=({"webgpu": {}},))

    def config_of(path):
        read.append(Path(path).name)
        return NS(raw={}, static_prompt_length=lambda: None, stages=(webgpu,) if Path(path) == ref else ())

    monkeypatch.setattr(config, "config_of", config_of)
    monkeypatch.setattr(verdict_cache, "_plugins", PLUGINS)  # the real one: it names the reference's EPs
    asked: list[str] = []
    monkeypatch.setattr(plugins, "plugin_identity", lambda name: asked.append(name) or {"package": name})
    run = eq.judge_routes(eq.check_source(str(ref)), _routes(ep), steps=8, cache=True)
    assert run.cost.judged == 1 and read.count("ref") == 1  # by check_source only
    assert asked == ["WebGpuExecutionProvider"]  # the reference's EP, from the config read then
