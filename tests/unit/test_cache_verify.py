"""The cache verifies before it trusts: what a derived bundle or prepared model holds is checked
against its manifest (digests of what it wrote, identities of what it linked); symlinked sources are
linked as their resolved targets; a failed compile is never published. The source is never written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests import models
from tests.unit.bundle_fakes import cpu_compiles, ep_target, fake_model_bytes, make_bundle, pipeline_config
from winml_perf.bundle import cache, cache_contents, derive
from winml_perf.bundle.onnx_prepare import prepare_onnx
from winml_perf.bundle.prepare import Compiling, prepare_route
from winml_perf.ep.devices import Target

CPU = Target("ep", "cpu", None, "CPUExecutionProvider", "cpu")


def _prep(bundle, ep="cpu", **kw):
    return prepare_route(bundle, ep_target(ep), require_available=False, **kw)


@pytest.fixture
def bundle(tmp_path):
    return make_bundle(tmp_path, pipeline_config(), extra={"sub/extra.bin": b"x" * 100})


def _manifest(folder: Path) -> dict:
    return json.loads((folder / cache.MANIFEST).read_text())


def test_manifest_records_digests_of_written_files_and_identities_of_links(bundle, unchanged):
    with unchanged(bundle):
        first = _prep(bundle)
    contents = {c["file"]: c for c in _manifest(first.path)["contents"]}
    assert set(contents) == set(derive.source_files(bundle))  # the manifest itself is not in it
    config = contents["genai_config.json"]
    assert config["sha256"] == cache.file_sha256(first.path / "genai_config.json") and "ino" not in config
    data = contents["transformer.onnx.data"]
    st = os.stat(bundle / "transformer.onnx.data")
    assert (data["ino"], data["dev"], data["size"], data["mtime_ns"]) == (
        st.st_ino,
        st.st_dev,
        st.st_size,
        st.st_mtime_ns,
    )
    assert data["target"] == os.path.realpath(bundle / "transformer.onnx.data") and "sha256" not in data


@pytest.mark.parametrize(
    "damage, why",
    [
        (
            lambda f: (f / "genai_config.json").write_text((f / "genai_config.json").read_text().replace("e", "E", 1)),
            "genai_config.json was edited (its sha256 differs from the manifest's)",
        ),
        (lambda f: (f / "genai_config.json").write_text("{}"), "genai_config.json was truncated or rewritten (2 bytes"),
        (
            lambda f: ((f / "tokenizer.json").unlink(), (f / "tokenizer.json").write_text("{}")),
            "tokenizer.json changed since it was made (its link to ",
        ),
        (lambda f: (f / "sub" / "extra.bin").unlink(), "lacks sub/extra.bin; rebuilding"),
        (
            lambda f: ((f / "genai_config.json").unlink(), (f / "genai_config.json").symlink_to(f / "nowhere")),
            "lacks genai_config.json (a dangling link to ",
        ),
    ],
)
def test_damaged_derived_bundle_is_rebuilt_with_the_reason(bundle, unchanged, damage, why):
    with unchanged(bundle):
        first = _prep(bundle)
        damage(first.path)
        again = _prep(bundle)
        assert again.cache == "miss" and why in again.cache_reason and again.cache_reason.startswith(first.path.name)
        assert (
            again.path == first.path
            and cache_contents.verify(again.path, _manifest(again.path)["contents"], cache.file_sha256) is None
        )
        assert _prep(bundle).cache == "hit"


def _drop(key):
    return lambda m: m.pop(key)


@pytest.mark.parametrize(
    "edit, why",
    [
        (_drop("contents"), "has no list `contents`"),
        (lambda m: m.update(contents={"genai_config.json": "x"}), "has no list `contents`"),
        (lambda m: m["contents"][0].pop("size"), "has no int `contents[0].size`"),
        (lambda m: m["contents"][0].update(sha256=5), "has no str `contents[0].sha256`"),
        (lambda m: m["contents"].__setitem__(0, {**m["contents"][0], "file": "../../escape"}), "outside the folder"),
        (lambda m: m.update(links=[]), "has no object `links`"),
        (lambda m: m["links"].pop("copy"), "has no int `links.copy`"),
        (lambda m: m.update(compile=[{"stages": "lm_head"}]), "has no list `compile[0].stages`"),
        (lambda m: m.update(compile=[{"stages": [], "source": "a", "ep": "b"}]), "has no str `compile[0].status`"),
        (
            lambda m: m.update(
                compile=[{"stages": ["x"], "source": "a", "ep": "b", "status": "compiled", "output": None}]
            ),
            "a compiled stage lacks its output or stages",
        ),
        (
            lambda m: m.update(compile=[{"stages": ["x"], "source": "a", "ep": "b", "status": "failed"}]),
            "records a failed compile (x)",
        ),
        (lambda m: m.update(plan="ep=cpu"), "has no object `plan`"),
    ],
)
def test_manifest_of_the_wrong_shape_never_crashes_and_is_rebuilt(bundle, edit, why):
    first = _prep(bundle)
    manifest = _manifest(first.path)
    edit(manifest)
    (first.path / cache.MANIFEST).write_text(json.dumps(manifest))
    again = _prep(bundle)
    assert again.cache == "miss" and why in again.cache_reason
    assert _prep(bundle).cache == "hit"


def test_hf_snapshot_links_are_resolved_never_linked_as_links(tmp_path, unchanged):
    """Every source file a relative symlink into blobs/: the derived bundle holds the targets."""
    src = make_bundle(tmp_path / "plain", pipeline_config())
    snap = _hf_snapshot(src, tmp_path / "hf")
    with unchanged(tmp_path / "hf" / "blobs", snap):
        first = _prep(snap)
        assert first.cache == "miss"
        for rel in derive.source_files(snap):
            if rel == "genai_config.json":
                continue
            assert not (first.path / rel).is_symlink() and os.path.samefile(first.path / rel, snap / rel)
        assert _prep(snap).cache == "hit"


def test_without_hard_links_the_symlinks_are_relative_and_resolve(tmp_path, monkeypatch, unchanged):
    src = make_bundle(tmp_path / "plain", pipeline_config())
    snap = _hf_snapshot(src, tmp_path / "hf")

    def no_hard_links(*a, **k):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(derive.os, "link", no_hard_links)
    with unchanged(tmp_path / "hf" / "blobs", snap):
        first = _prep(snap)
        target = os.readlink(first.path / "transformer.onnx.data")
        assert not os.path.isabs(target) and "blobs" in target
        assert os.path.samefile(first.path / "transformer.onnx.data", snap / "transformer.onnx.data")
        assert _manifest(first.path)["links"] == {"hardlink": 0, "symlink": len(derive.source_files(snap)), "copy": 0}
        assert _prep(snap).cache == "hit"
    # the snapshot alone moves to another depth, its own links made absolute: the derived relative links dangle
    for link in snap.iterdir():
        if link.is_symlink():
            real = os.path.realpath(link)
            link.unlink()
            link.symlink_to(real)
    moved = tmp_path / "elsewhere" / "deeper" / "rev1"
    moved.parent.mkdir(parents=True)
    os.rename(snap, moved)
    with unchanged(tmp_path / "hf" / "blobs", moved):
        again = _prep(moved)
        assert (
            again.cache == "miss"
            and "a dangling link to" in again.cache_reason
            and again.path.parent == moved / "_compiled"
        )
        blob = tmp_path / "hf" / "blobs" / _blob_name(src / "transformer.onnx.data")
        assert os.path.samefile(again.path / "transformer.onnx.data", blob)
        assert _prep(moved).cache == "hit"


def test_stage_file_in_a_symlinked_sub_folder(tmp_path, unchanged):
    raw = pipeline_config()
    bundle = make_bundle(tmp_path, raw)
    (tmp_path / "shared" / "heads").mkdir(parents=True)
    for name in ("lm_head.onnx", "lm_head.onnx.data"):
        os.rename(bundle / name, tmp_path / "shared" / "heads" / name)
    (bundle / "heads").symlink_to("../shared/heads", target_is_directory=True)
    raw["model"]["decoder"]["pipeline"][0]["lm_head"]["filename"] = "heads/lm_head.onnx"
    (bundle / "genai_config.json").write_text(json.dumps(raw))
    (tmp_path / "shared" / "heads" / "loop").symlink_to("..", target_is_directory=True)  # a loop ends
    with unchanged(bundle, tmp_path / "shared"):
        assert "heads/lm_head.onnx" in derive.source_files(bundle)
        first = _prep(bundle)
        assert (first.path / "heads").is_dir() and not (first.path / "heads").is_symlink()
        assert os.path.samefile(first.path / "heads" / "lm_head.onnx", tmp_path / "shared" / "heads" / "lm_head.onnx")
        assert _prep(bundle).cache == "hit"
    (tmp_path / "shared" / "heads" / "lm_head.onnx.data").write_bytes(b"\1" * 10)  # the linked folder's file changes
    changed = _prep(bundle)
    assert changed.cache == "miss" and "heads/lm_head.onnx.data" in changed.cache_reason


def test_relinked_snapshot_is_a_miss_naming_the_file(tmp_path):
    src = make_bundle(tmp_path / "plain", pipeline_config())
    snap = _hf_snapshot(src, tmp_path / "hf")
    first = _prep(snap)
    new_blob = tmp_path / "hf" / "blobs" / "newrevision"
    new_blob.write_bytes(b"other weights" * 10)
    (snap / "transformer.onnx.data").unlink()
    (snap / "transformer.onnx.data").symlink_to("../../blobs/newrevision")
    again = _prep(snap)
    assert again.cache == "miss" and "transformer.onnx.data" in again.cache_reason and again.path != first.path
    assert os.path.samefile(again.path / "transformer.onnx.data", new_blob)


def test_dangling_source_link_is_a_clear_error(tmp_path):
    src = make_bundle(tmp_path / "plain", pipeline_config())
    snap = _hf_snapshot(src, tmp_path / "hf")
    os.unlink(os.path.realpath(snap / "tokenizer.json"))
    from winml_perf.support.errors import BundleError

    with pytest.raises(BundleError, match=r"tokenizer.json: cannot be read \(No such file or directory\)"):
        _prep(snap)


# -- compile failures --------------------------------------------------------------------------------------
@pytest.fixture
def compiling(tmp_path, monkeypatch):
    """Two real tiny models; CPU is treated as a compiling EP; lm_head.onnx is not a model."""
    raw = pipeline_config()
    del raw["model"]["decoder"]["pipeline"][0]["embeddings"]
    bundle = make_bundle(tmp_path, raw)
    models.mlp(bundle / "transformer.onnx")
    (bundle / "lm_head.onnx").write_bytes(fake_model_bytes(b"not an onnx model"))  # whole, but no model
    cpu_compiles(monkeypatch)
    return bundle


def test_failed_compile_is_never_published_and_the_next_run_compiles_again(compiling, unchanged):
    with unchanged(compiling):
        first = _prep(compiling, compile=Compiling())
        status = {c.stages: c.status for c in first.compile}
        assert status[("lm_head",)] == "failed" and status[("context", "iterator")] == "discarded"
        assert (
            "compile failed (lm_head: failed)" in first.cache_reason
            and "nothing compiled was published" in first.cache_reason
        )
        assert first.path == _prep(compiling).path  # the uncompiled derived bundle
        assert not list(first.path.glob("*_ctx.onnx")) and any("lm_head" in w for w in first.warnings)
        assert [p for p in (compiling / "_compiled").iterdir() if not p.name.startswith(".")] == [first.path]
        second = _prep(compiling, compile=Compiling())
        assert second.cache == "hit" and "compile failed (lm_head: failed)" in second.cache_reason  # compiled again
    models.mlp(compiling / "lm_head.onnx")
    fixed = _prep(compiling, compile=Compiling())
    assert fixed.path != first.path and {c.status for c in fixed.compile} == {"compiled"}
    assert _prep(compiling, compile=Compiling()).cache == "hit"


def test_a_failed_compile_reads_and_hashes_the_sources_once(compiling, monkeypatch):
    """The uncompiled derived bundle a failed compile leaves is made from the sources as the route read
    them: with --verify-sources they are hashed once."""
    read: list[bool] = []
    source_identities = cache.source_identities

    def counted(folder, files, verify=False):
        read.append(verify)
        return source_identities(folder, files, verify)

    monkeypatch.setattr(cache, "source_identities", counted)
    first = _prep(compiling, compile=Compiling(), verify_sources=True)
    assert "compile failed (lm_head: failed)" in first.cache_reason
    assert read == [True]  # once, hashed: not again for the uncompiled bundle


def test_edited_compiled_model_is_recompiled(compiling):
    models.mlp(compiling / "lm_head.onnx")
    first = _prep(compiling, compile=Compiling())
    ctx = first.path / "lm_head_cpu_ctx.onnx"
    ctx.write_bytes(ctx.read_bytes()[:-10])
    again = _prep(compiling, compile=Compiling())
    assert again.cache == "miss" and "lm_head_cpu_ctx.onnx was truncated or rewritten" in again.cache_reason
    assert {c.status for c in again.compile} == {"compiled"}


# -- prepared ONNX models ------------------------------------------------------------------------------------
def test_edited_prepared_model_is_rebuilt(tmp_path, unchanged):
    model = models.mlp(tmp_path / "m" / "mlp.onnx")
    with unchanged(tmp_path / "m"):
        first = prepare_onnx(model, CPU, "basic")
        first.path.write_bytes(first.path.read_bytes() + b"\0")
        again = prepare_onnx(model, CPU, "basic")
        assert again.cache == "miss" and "mlp_cpu_basic.onnx was truncated or rewritten" in again.cache_reason
        assert prepare_onnx(model, CPU, "basic").cache == "hit"


@pytest.mark.parametrize(
    "edit, why",
    [
        (lambda m: m.update(output="../mlp.onnx"), "not one of its files"),
        (lambda m: m.update(kind="magic"), "kind"),
        (lambda m: m.update(device=3), "has no str `device`"),
    ],
)
def test_prepared_manifest_of_the_wrong_shape_is_rebuilt(tmp_path, edit, why):
    model = models.mlp(tmp_path / "mlp.onnx")
    first = prepare_onnx(model, CPU, "basic")
    manifest = _manifest(first.folder)
    edit(manifest)
    (first.folder / cache.MANIFEST).write_text(json.dumps(manifest))
    again = prepare_onnx(model, CPU, "basic")
    assert again.cache == "miss" and why in again.cache_reason and again.path == first.path


# -- helpers ---------------------------------------------------------------------------------------------------
def _blob_name(path: Path) -> str:
    return cache.file_sha256(path)[:16]


def _hf_snapshot(src: Path, hf: Path) -> Path:
    """``hf/snapshots/rev1/<file> -> ../../blobs/<sha>`` for every file of ``src`` (sub-folders kept)."""
    (hf / "blobs").mkdir(parents=True)
    snap = hf / "snapshots" / "rev1"
    for rel in derive.source_files(src):
        blob = hf / "blobs" / _blob_name(src / rel)
        if not blob.exists():
            blob.write_bytes((src / rel).read_bytes())
        link = snap / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snap


def _cli(*argv: str) -> int:
    from winml_perf.cli import main

    try:
        main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_bundle_prepare_exits_1_when_a_compile_fails(compiling, capsys, fmt):
    assert _cli("bundle", "prepare", str(compiling), "--ep", "cpu", "--compile", "--format", fmt) == 1
    out, err = capsys.readouterr()
    assert (
        "error: compile failed: lm_head (lm_head.onnx on cpu): failed" in err
        and "nothing compiled was published" in err
    )
    if fmt == "table":
        assert "compile lm_head: failed" in err and out.strip() == str(_prep(compiling).path)
    else:
        assert {c["status"] for c in json.loads(out)["compile"]} == {"failed", "discarded"}
    models.mlp(compiling / "lm_head.onnx")
    assert _cli("bundle", "prepare", str(compiling), "--ep", "cpu", "--compile", "--format", fmt) == 0
