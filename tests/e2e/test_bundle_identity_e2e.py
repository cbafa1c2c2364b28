"""Two bundles with the same folder name (issue 28): /a/tiny-qwen2 and /b/tiny-qwen2 whose weights
differ are two series with labels that tell them apart (results list, compare runs, the dashboard's
pages); the same content copied to /c/tiny-qwen2 is the same bundle, the same series as /a."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.conftest import TINY_FLAT, run_winml
from tests.e2e.test_equivalence_e2e import perturbed_copy

pytestmark = pytest.mark.e2e

LEAN = ("--invocations", "1", "--prompt-tokens", "16", "--max-new-tokens", "4", "--warmup", "1", "--iterations", "2")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("same-name")
    a, c = root / "a" / "tiny-qwen2", root / "c" / "tiny-qwen2"
    shutil.copytree(TINY_FLAT, a, ignore=shutil.ignore_patterns("_compiled"))
    b = perturbed_copy(TINY_FLAT, root / "b" / "tiny-qwen2")  # each float weight x N(1, 0.03)
    shutil.copytree(a, c, ignore=shutil.ignore_patterns("_compiled"))
    db = root / "s.db"
    for bundle in (a, b, c):  # c last: the newest run of a's series
        result = run_winml("perf", bundle, *LEAN, "--store", db, "-q")
        assert result.returncode == 0, result.stderr[-3000:]
    return db


def test_the_same_content_is_one_bundle_and_other_weights_another(store):
    rows = run_winml("results", "list", "--store", store, "--format", "json").json()
    ids = {r["bundle_path"].split("/")[-2]: r["bundle_id"] for r in rows}
    assert set(ids) == {"a", "b", "c"} and all(re.fullmatch(r"[0-9a-f]{12}", i) for i in ids.values()), ids
    assert ids["a"] == ids["c"] != ids["b"]
    table = run_winml("results", "list", "--store", store)
    assert table.returncode == 0, table.stderr
    labels = set(re.findall(r"tiny-qwen2 \(([0-9a-f]{6})\)", table.stdout))
    assert labels == {ids["a"][:6], ids["b"][:6]}, table.stdout  # the name alone would not tell them apart


def test_compare_runs_keeps_the_series_apart_and_names_them(store):
    result = run_winml(
        "compare", "runs", "--store", store, "--baseline", "previous", "--candidate", "latest",
        "--metric", "decode_tokens_per_s", "--format", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (change,) = result.json()["changes"]  # a vs c: one series; b has one run and no pair
    ids = {r["bundle_path"].split("/")[-2]: r["bundle_id"] for r in _rows(store)}
    notes = " ".join(result.json()["notes"])
    assert f"(one run of this series so far): tiny-qwen2 ({ids['b'][:6]}) config" in notes, notes
    table = run_winml(
        "compare", "runs", "--store", store, "--baseline", "previous", "--candidate", "latest",
        "--metric", "decode_tokens_per_s", env={"COLUMNS": "200"},
    )  # fmt: skip
    assert f"tiny-qwen2 ({ids['a'][:6]}) config p16 n4" in table.stdout, table.stdout


def test_the_dashboard_gives_each_bundle_its_own_page(store, tmp_path):
    result = run_winml("dashboard", "--store", store, "-o", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-3000:]
    pages = sorted(p.name for p in (tmp_path / "site" / "pages").rglob("*.html"))
    ids = {r["bundle_path"].split("/")[-2]: r["bundle_id"] for r in _rows(store)}
    assert len(pages) == 2, pages
    assert any(ids["a"][:6] in p for p in pages) and any(ids["b"][:6] in p for p in pages), pages


def _rows(store):
    return run_winml("results", "list", "--store", store, "--format", "json").json()
