"""Issue 24: teacher-forced logit figures, the verdict against the reference's bands, and that each
route is judged on its own logits (never the reference's), stage by stage."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace as NS

import numpy as np
import pytest

from winml_perf.equivalence import attach, layers, report
from winml_perf.equivalence import check as eq
from winml_perf.equivalence.passes import genai_logits
from winml_perf.model.equivalence import (
    EQUIVALENT,
    NOT_EQUIVALENT,
    WITHIN_PRECISION,
    Band,
    Equivalence,
    LogitFigures,
    StagePrecision,
)
from winml_perf.stats.equivalence import band_limit, compare_logits, compare_tensors, verdict
from winml_perf.support.errors import BenchmarkFailure

RNG = np.random.default_rng(0)
REF = RNG.normal(size=(8, 50)).astype(np.float32)


def test_identical_logits_are_identical_with_zero_kl():
    f = compare_logits(REF, REF.copy())
    assert f.identical and f.kl_mean == 0 and f.top1_agreement == 1 and f.first_divergence is None


def test_a_flipped_argmax_is_the_first_divergence():
    other = REF.copy()
    other[3, REF[3].argmin()] = REF[3].max() + 1.0
    f = compare_logits(REF, other)
    assert f.first_divergence == 3 and f.top1_agreement == pytest.approx(7 / 8) and f.kl_max > f.kl_mean > 0
    assert f.max_abs_delta > 1 and f.top5_overlap < 1  # one logit moved by more than the step's spread


def test_shapes_must_match():
    with pytest.raises(ValueError, match="shapes differ"):
        compare_logits(REF, REF[:4])


def _band(name: str, kl: float, floor: float = 0.0) -> Band:
    f = LogitFigures(8, kl, kl, 0.0, 1.0, 1.0, None, kl == 0)
    return Band(name, "x", f, band_limit(f, floor))


def test_verdict_is_judged_against_the_bands():
    noise, precision = _band("noise floor", 0.0, 1e-6), _band("precision", 0.02)
    near = compare_logits(REF, REF + np.float32(1e-4) * RNG.normal(size=REF.shape).astype(np.float32))
    assert verdict(near, noise, precision) == EQUIVALENT
    mid = compare_logits(REF, REF * np.float32(1.1))
    assert mid.kl_mean <= precision.kl_limit and verdict(mid, noise, precision) == WITHIN_PRECISION
    far = compare_logits(REF, RNG.normal(size=REF.shape))
    assert verdict(far, noise, precision) == NOT_EQUIVALENT
    assert verdict(mid, noise, None) == NOT_EQUIVALENT  # no precision band measured: no precision tolerance


def test_tensor_figures():
    s = compare_tensors("embeddings", "inputs_embeds", [REF], [REF * 1.01])
    assert s.max_rel == pytest.approx(0.01, rel=1e-3) and s.cosine_min == pytest.approx(1.0)


def _fake_teacher_forced(calls):
    """Logits depend on the path: 'ref' and 'same' give REF, 'other' a perturbed copy."""

    def run(path, prompt_ids, steps, continuation=None, outputs=()):
        calls.append(str(path))
        if str(path) == "broken":
            raise BenchmarkFailure("broken: the equivalence check's teacher-forced pass failed: no EP")
        ref = np.resize(REF, (steps, REF.shape[1]))
        logits = (
            ref
            if str(path) in ("ref", "same", "no-layers")
            else ref + np.float32(0.5) * RNG.normal(size=ref.shape).astype(np.float32)
        )
        seen = {"inputs_embeds": {k: logits[k] for k in range(steps)}, "hidden_states": {0: logits[0]}}
        return genai_logits.TeacherForced(
            str(path), logits, tuple(range(steps)), {n: seen[n] for n in outputs if n in seen}
        )

    return run


def _fake_layer_profile(calls):
    """Layer outputs depend on the path: 'other' computes layer 2 of 4 differently (so, accumulated,
    layers 2 and 3 depart; fed the reference's input, layer 2 alone), the rest are REF's."""

    def profile(path, tokens, embeds=None, teacher=None, shared=None):
        calls.append(f"layers:{path}" + (":local" if teacher is not None else ""))
        if str(path) == "no-layers":
            raise OSError("cannot write the tapped copy")
        values = {k: np.resize(REF, (1, len(tokens), REF.shape[1])) * (k + 1) for k in range(4)}
        if str(path) == "other":
            moved = {2} if teacher is not None else {2, 3}
            values = {k: v * (1.5 if k in moved else 1.0) for k, v in values.items()}
        stage = dict.fromkeys(values, "decoder")
        return layers.LayerProfile(values, stage, dict.fromkeys(values, "t"), (), None, len(tokens), 1.0)

    return profile


@pytest.fixture
def fake(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(genai_logits, "teacher_forced", _fake_teacher_forced(calls))
    monkeypatch.setattr(layers, "layer_profile", _fake_layer_profile(calls))
    monkeypatch.setattr(
        eq, "_precision", lambda path: (StagePrecision("decoder", "CPUExecutionProvider", (4,), (), f"at {path}"),)
    )
    monkeypatch.setattr(eq, "reference_bands", lambda *a: (_band("noise floor", 0.0, 1e-6), _band("precision", 0.01)))
    monkeypatch.setattr(
        "winml_perf.session.genai_session.GenaiSession.synthetic_prompt", lambda self, n, seed=0: [10] * n
    )
    monkeypatch.setattr(eq, "_stage_outputs", lambda path: [
        ("embeddings", ["inputs_embeds"], True, True),
        ("context", ["hidden_states"], True, False),
        ("iterator", ["hidden_states"], False, True),
        ("lm_head", ["logits"], True, True),
    ])  # fmt: skip
    monkeypatch.setattr(
        "winml_perf.session.genai_session.token_facts",
        lambda cfg, where: NS(vocab_size=50, context_length=0, special_ids=frozenset()),
    )
    monkeypatch.setattr("winml_perf.session.genai_session.read_json", lambda p: {})
    monkeypatch.setattr("winml_perf.bundle.config.load_config", lambda p: NS(static_prompt_length=lambda: None, raw={}))
    return calls


def test_each_route_is_judged_on_its_own_path(fake):
    routes = [
        NS(label="config", session=NS(path="ref")),
        NS(label="ep=cpu", session=NS(path="same")),
        NS(label="ep=x", session=NS(path="other")),
    ]
    run = eq.judge_routes(eq.check_source("ref"), routes, steps=8)
    # the reference once, then each route's own path (logits; its layers beside them, in route order);
    # config is the reference
    assert fake[:3] == ["ref", "layers:ref", "layers:ref:local"]
    assert [c for c in fake[3:] if not c.startswith("layers:")] == ["same", "other"]
    assert [c for c in fake[3:] if c.startswith("layers:")] == [
        "layers:same",
        "layers:same:local",
        "layers:other",
        "layers:other:local",
    ]
    assert set(run.by_label) == {"ep=cpu", "ep=x"}
    same = run.by_label["ep=cpu"]
    assert same.verdict == EQUIVALENT and same.figures.identical and same.layers.first_differing is None
    bad = run.by_label["ep=x"]
    assert bad.verdict == NOT_EQUIVALENT and bad.route_path == "other" and not bad.figures.identical
    assert [f.layer for f in bad.layers.figures] == [0, 1, 2, 3]  # no layer skipped
    assert bad.layers.first_departing == 2 and bad.layers.pattern == "jump" and bad.layers.first_differing == 2
    assert bad.layers.first_wrong == 2  # fed the reference's input, layer 2 alone computes something else
    assert [f.local_rel > 0 for f in bad.layers.figures] == [False, False, True, False]
    assert "layers: layer 2 (decoder) computes something else" in report.equivalence_line("ep=x", bad)
    within = replace(bad, verdict=WITHIN_PRECISION)  # a verdict in a band names that band's change
    assert "judged in the band of x (KL limit" in report.equivalence_line("ep=x", within)
    # each side's precision is read from its own files
    assert bad.precision_class == "decoder: CPU at other" and "decoder: CPU at ref" in report.equivalence_line(
        "ep=x", bad
    )
    assert eq.judge_routes(eq.check_source("ref"), routes[2:], steps=8, layers=False).by_label["ep=x"].layers is None


def test_each_routes_precision_is_read_once_for_its_logits_and_its_layers(fake, monkeypatch):
    read: list[str] = []
    precision = eq._precision
    monkeypatch.setattr(eq, "_precision", lambda path: read.append(str(path)) or precision(path))
    routes = [NS(label="ep=cpu", session=NS(path="same")), NS(label="ep=x", session=NS(path="other"))]
    run = eq.judge_routes(eq.check_source("ref"), routes, steps=8)
    assert sorted(read) == ["other", "ref", "same"]  # the reference's once, each route's once
    bad = run.by_label["ep=x"]
    assert bad.layers is not None and bad.layers.first_wrong == 2


def test_every_stage_is_accounted_for(fake):
    run = eq.judge_routes(eq.check_source("ref"), [NS(label="ep=x", session=NS(path="other"))], steps=8)
    e = run.by_label["ep=x"]
    judged = [s.stage for s in e.stages]
    assert judged == ["embeddings", "context"] and e.unobserved_stages == ("iterator", "lm_head")
    assert e.stages[1].steps == 1  # context ran on the prompt only
    assert e.first_stage == "embeddings"
    assert Equivalence.from_dict(e.to_dict()) == e


def test_a_reference_bundle_judges_config_too(fake):
    routes = [NS(label="config", session=NS(path="same"))]
    run = eq.judge_routes(eq.check_source("ref", reference_bundle="other"), routes, steps=8)
    assert run.reference == "bundle:other" and run.by_label["config"].verdict == NOT_EQUIVALENT


def test_the_verdict_joins_the_closing_summary_and_the_screen_line(fake):
    from winml_perf.compare.run_summary import route_verdicts

    run = eq.judge_routes(eq.check_source("ref"), [NS(label="ep=x", session=NS(path="other"))], steps=8)
    e = run.by_label["ep=x"]
    doc = {"cells": [{"route": {"label": "ep=x", "equivalence": e.to_dict()}}, {"route": {"label": "config"}}]}
    text = route_verdicts(doc)["ep=x"]
    assert text.startswith("NOT equivalent: top-1") and "first at stage embeddings" in text
    assert report.equivalence_line("ep=x", e).startswith("ep=x ≉ config: not equivalent, KL ")
    assert attach.wants_equivalence(None, 2, None) and not attach.wants_equivalence(None, 1, None)
    assert attach.wants_equivalence(None, 1, "b") and not attach.wants_equivalence(False, 3, None)


def test_precision_variants_change_what_they_say(tmp_path):
    import json
    import shutil
    from pathlib import Path

    from winml_perf.bundle.variants import accuracy_levels, precision_variant

    bundles = Path(__file__).resolve().parents[2] / "bundles"
    out, change = precision_variant(bundles / "tiny-qwen2")
    try:
        assert change == "MatMulNBits accuracy_level 4 -> 0" and accuracy_levels(out) == {0}
        assert accuracy_levels(bundles / "tiny-qwen2") == {4}  # the source is never written
    finally:
        shutil.rmtree(out)
    out, change = precision_variant(bundles / "tiny-qwen2-npu")
    try:
        assert change == "QNN enable_htp_fp16_precision 1 -> 0"
        text = json.dumps(json.loads((out / "genai_config.json").read_text()))
        assert '"enable_htp_fp16_precision": "0"' in text and '"enable_htp_fp16_precision": "1"' not in text
    finally:
        shutil.rmtree(out)


def test_a_route_that_cannot_run_is_named_and_the_others_are_judged(fake, capsys):
    routes = [NS(label="ep=bad", session=NS(path="broken")), NS(label="ep=x", session=NS(path="other"))]
    run = eq.judge_routes(eq.check_source("ref"), routes, steps=8)
    assert set(run.by_label) == {"ep=x"} and "no EP" in run.errors["ep=bad"]
    out = attach.attach_equivalence(eq.check_source("ref"), [NS(label="ep=bad", session=NS(path="broken"))])
    assert "equivalence: ep=bad not judged: broken" in capsys.readouterr().err and out[0].label == "ep=bad"


def test_a_route_whose_layer_pass_fails_is_judged_on_its_logits_and_says_why(fake):
    run = eq.judge_routes(eq.check_source("ref"), [NS(label="ep=y", session=NS(path="no-layers"))], steps=8)
    e = run.by_label["ep=y"]
    assert e.verdict == EQUIVALENT and e.layers.figures == ()
    assert e.layers.unobserved == ("this route's pass failed: OSError: cannot write the tapped copy",)


def test_the_precision_variant_rewrites_only_the_files_holding_matmulnbits():
    """A stage file without MatMulNBits (an embedding table, often with its weights inline) stays
    linked to the source: the same file on disk, not a rewritten copy."""
    import shutil
    from pathlib import Path

    from winml_perf.bundle.config import load_config
    from winml_perf.bundle.variants import accuracy_levels, precision_variant
    from winml_perf.onnxfile.wire import read_graph

    src = Path(__file__).resolve().parents[2] / "bundles" / "tiny-qwen2-pipeline"
    files = sorted({s.filename for s in load_config(src).stages})
    holding = {f for f in files if any(n.op_type == "MatMulNBits" for n in read_graph(src / f).nodes)}
    assert holding and set(files) - holding  # the bundle has both kinds
    out, _ = precision_variant(src)
    try:
        for f in files:
            linked = (out / f).stat().st_ino == (src / f).stat().st_ino
            assert linked == (f not in holding), f
        assert accuracy_levels(out) == {0}
    finally:
        shutil.rmtree(out)
