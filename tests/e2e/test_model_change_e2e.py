"""Issue 35, the case that found it: a nightly measures the bundle its build writes into one folder;
eight nights of one model, then the model is rebuilt into one that computes the same tokens about
3x more slowly (extra operators on the logits whose result is added as zero). The rebuilt model is
the same series (the folder the user tracks), its content digest an event on it: `compare runs`
names the model change, and the gate fails on the first night after it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TINY_FLAT, run_winml

pytestmark = pytest.mark.e2e

#: A cheap night: three invocations (fresh processes; the first-night band needs 3,
#: history_band.MIN_BAND_INVOCATIONS) of seven iterations (a few ms each: the processes cost the
#: time), so that one slow iteration on this shared machine does not make an invocation's median.
NIGHT = ("--invocations", "3", "--warmup", "2", "--iterations", "7", "--prompt-tokens", "16", "--max-new-tokens", "16")
NIGHTS = 8
#: Extra MatMul+Tanh pairs on the logits: 3 x (512 x 512) took decode from ~0.07 to ~0.2-0.24 ms a
#: step (ITL p50) on this 2-core machine, about 3x (tokens unchanged), measured with
#: `winml perf B --invocations 2 --prompt-tokens 16 --max-new-tokens 16 --iterations 3` on both.
EXTRA_MATMULS = 3


def slower_rebuild(src: Path, dst: Path, matmuls: int = EXTRA_MATMULS, width: int = 512) -> Path:
    """``src``'s model rebuilt into ``dst`` (replacing what is there) with ``matmuls`` chained
    MatMul+Tanh on the logits, whose max times zero is added back: the same tokens, more work."""
    import onnx
    from onnx import helper, numpy_helper

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_compiled"))
    model = onnx.load(str(dst / "model.onnx"))  # the copy: src's weights may be hard-linked into _compiled/
    g = model.graph
    producer = next(n for n in g.node if "logits" in n.output)
    producer.output[list(producer.output).index("logits")] = "logits_raw"
    rng = np.random.default_rng(0)
    last, rows = "logits_raw", 512  # the tiny bundle's vocabulary
    for i in range(matmuls):
        w = (rng.standard_normal((rows, width)) / np.sqrt(width)).astype(np.float32)
        g.initializer.append(numpy_helper.from_array(w, f"extra_w{i}"))
        g.node.append(helper.make_node("MatMul", [last, f"extra_w{i}"], [f"extra_m{i}"]))
        g.node.append(helper.make_node("Tanh", [f"extra_m{i}"], [f"extra_t{i}"]))  # bounded: never inf * 0
        last, rows = f"extra_t{i}", width
    g.initializer.append(numpy_helper.from_array(np.zeros((), np.float32), "extra_zero"))
    g.node.append(helper.make_node("ReduceMax", [last], ["extra_max"], keepdims=1))
    g.node.append(helper.make_node("Mul", ["extra_max", "extra_zero"], ["extra_nothing"]))
    g.node.append(helper.make_node("Add", ["logits_raw", "extra_nothing"], ["logits"]))
    (dst / "model.onnx").unlink()
    (dst / "model.onnx.data").unlink()
    onnx.save(model, str(dst / "model.onnx"), save_as_external_data=True, location="model.onnx.data")
    return dst


def _gate(store: Path, *extra: str):
    return run_winml(
        "compare", "runs", "--store", store, "--baseline", "previous", "--candidate", "latest",
        "--metric", "decode_tokens_per_s", *extra,
    )  # fmt: skip


def _digests(store: Path) -> list[str]:
    rows = run_winml("results", "list", "--store", store, "--format", "json").json()
    return [r["bundle_id"] for r in rows]


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    root = tmp_path_factory.mktemp("nightly")
    bundle = root / "build" / "tiny-qwen2"  # the folder the build writes every night
    shutil.copytree(TINY_FLAT, bundle, ignore=shutil.ignore_patterns("_compiled"))
    db = root / "s.db"
    for _ in range(NIGHTS):
        result = run_winml("perf", bundle, *NIGHT, "--store", db, "-q")
        assert result.returncode == 0, result.stderr[-3000:]
    quiet = _gate(db, "--format", "json")  # the night before the rebuild: one model, no change named
    slower_rebuild(TINY_FLAT, bundle)
    result = run_winml("perf", bundle, *NIGHT, "--store", db, "-q", "--format", "json")
    assert result.returncode == 0, result.stderr[-3000:]
    return db, quiet, result.json()


def test_the_rebuilt_model_computes_the_same_tokens(nightly):
    db, _, run = nightly
    first = run_winml("results", "show", "1", "--store", db, "--format", "json").json()
    assert run["cells"][0]["output"]["first_token_ids"] == first["output"]["first_token_ids"]


def test_the_first_night_after_a_slower_rebuild_fails_the_gate_naming_the_model_change(nightly):
    db, quiet, _ = nightly
    digests = _digests(db)
    old, new = digests[0], digests[-1]
    assert len(set(digests[:NIGHTS])) == 1 and old != new, digests
    assert "model_changes" not in quiet.json(), quiet.stdout  # eight nights of one model: none named
    result = _gate(db, "--fail-on-regression", "10%")
    sentence = f"model changed between baseline and candidate: {old[:6]} → {new[:6]}"
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert sentence in result.stderr, result.stderr[-3000:]
    failure = result.stderr[result.stderr.index("regression(s) beyond") :]
    assert "REGRESSION" in result.stdout and sentence in failure, failure  # the failure itself names it
    as_json = _gate(db, "--fail-on-regression", "10%", "--format", "json")
    (change,) = as_json.json()["model_changes"]
    assert change["change"] == sentence and re.match(r"tiny-qwen2 config p16 n16 @", change["series"]), change


def test_results_list_filters_by_digest(nightly):
    db, _, _ = nightly
    digests = _digests(db)
    new = digests[-1]
    rows = run_winml("results", "list", "--store", db, "--digest", new[:6], "--format", "json").json()
    assert [r["bundle_id"] for r in rows] == [new]
    bad = run_winml("results", "list", "--store", db, "--digest", "not-hex")
    assert bad.returncode == 2 and "--digest" in bad.stderr


def test_the_dashboard_marks_the_model_change_on_the_series_chart_and_lists_it(nightly, tmp_path):
    db, _, _ = nightly
    digests = _digests(db)
    result = run_winml("dashboard", "--store", db, "-o", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-3000:]
    (page,) = (tmp_path / "site" / "pages").rglob("*.html")  # one series, one bundle: one page
    html = page.read_text()
    primary = html[html.index("data-primary") :]
    primary = primary[: primary.index("</section>")]
    assert primary.count('class="model-change"') == 1, primary[:2000]  # one marked line on the decode chart
    assert f"model changed {digests[0][:6]} → {digests[-1][:6]}" in primary
    table = primary[primary.index('<table class="model-changes">') :]
    assert f"{digests[0][:6]} → {digests[-1][:6]}" in table and table.count("<tr data-route") == 1
