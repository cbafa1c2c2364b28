"""Two bundles with the same folder name (issue 28, under issue 35's rule): /a/tiny-qwen2 and
/b/tiny-qwen2 whose weights differ are two series with labels that tell them apart by their paths
(results list, compare runs, the dashboard's pages). A series is what the user tracks, the bundle's
path: the same content copied to /c/tiny-qwen2 is the same bundle (one content digest) but its own
series; a second night of /a joins /a's series."""

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
    for bundle in (a, b, c, a):  # a twice: two nights of a's series
        result = run_winml("perf", bundle, *LEAN, "--store", db, "-q")
        assert result.returncode == 0, result.stderr[-3000:]
    return db


def _rows(store):
    return run_winml("results", "list", "--store", store, "--format", "json").json()


def test_the_same_content_is_one_bundle_and_other_weights_another(store):
    rows = _rows(store)
    ids = {r["bundle_path"].split("/")[-2]: r["bundle_id"] for r in rows}
    assert set(ids) == {"a", "b", "c"} and all(re.fullmatch(r"[0-9a-f]{12}", i) for i in ids.values()), ids
    assert ids["a"] == ids["c"] != ids["b"]  # the digest: what the content is
    from winml_perf.results.store import open_store

    keys: dict[str, set] = {}
    with open_store(store, create=False) as s:
        for r in s.records():
            keys.setdefault(r["bundle_path"].split("/")[-2], set()).add(r["series_key"])
    assert all(len(k) == 1 for k in keys.values()) and len(set.union(*keys.values())) == 3, keys  # the path: the series
    table = run_winml("results", "list", "--store", store)
    assert table.returncode == 0, table.stderr
    labels = set(re.findall(r"\b([abc])/tiny-qwen2\b", table.stdout))
    assert labels == {"a", "b", "c"}, table.stdout  # the name alone would not tell them apart


def test_compare_runs_keeps_the_series_apart_and_names_them(store):
    result = run_winml(
        "compare", "runs", "--store", store, "--baseline", "previous", "--candidate", "latest",
        "--metric", "decode_tokens_per_s", "--format", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (change,) = result.json()["changes"]  # a's two nights; b and c have one run each and no pair
    notes = " ".join(result.json()["notes"])
    for where in ("b", "c"):
        assert f"(one run of this series so far): {where}/tiny-qwen2 config" in notes, notes
    assert "model_changes" not in result.json()  # a's two nights ran one content
    table = run_winml(
        "compare", "runs", "--store", store, "--baseline", "previous", "--candidate", "latest",
        "--metric", "decode_tokens_per_s", env={"COLUMNS": "200"},
    )  # fmt: skip
    assert "a/tiny-qwen2 config p16 n4" in table.stdout, table.stdout


def test_the_dashboard_gives_each_bundle_its_own_page(store, tmp_path):
    result = run_winml("dashboard", "--store", store, "-o", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-3000:]
    pages = sorted(p.name for p in (tmp_path / "site" / "pages").rglob("*.html"))
    assert len(pages) == 3, pages
    assert all(
        any(p.startswith(f"{w}") or f"{w}-tiny-qwen2" in p or f"{w}_tiny-qwen2" in p for p in pages) for w in "abc"
    ), pages


def test_a_series_label_joins_builds_in_new_folders(tmp_path):
    """--series NAME: a build that lands in a new folder each night stays one series, named NAME."""
    db = tmp_path / "s.db"
    for night in ("1", "2"):
        bundle = tmp_path / "builds" / night / "tiny-qwen2"
        shutil.copytree(TINY_FLAT, bundle, ignore=shutil.ignore_patterns("_compiled"))
        result = run_winml("perf", bundle, *LEAN, "--series", "qwen-nightly", "--store", db, "-q")
        assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(db)
    assert [r["bundle"] for r in rows] == ["qwen-nightly"] * 2 and [r["series_label"] for r in rows] == [
        "qwen-nightly"
    ] * 2
    result = run_winml(
        "compare", "runs", "--store", db, "--baseline", "previous", "--candidate", "latest",
        "--bundle", "qwen-nightly", "--metric", "decode_tokens_per_s", "--format", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (change,) = result.json()["changes"]
    assert change["key"]["bundle"] == "qwen-nightly" and "model_changes" not in result.json()
