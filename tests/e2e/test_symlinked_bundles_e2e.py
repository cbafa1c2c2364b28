"""`winml perf --ep cpu` end to end on symlinked layouts of the committed tiny bundles: a Hugging Face
snapshot (every file, external data included, a relative link into blobs/), a stage file with its
external data in a linked sub-folder; miss then hit, then the bundle moved or relinked. The source
files are never written."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import LEAN_JSON, TINY_FLAT, TINY_PIPELINE

LEAN = LEAN_JSON


def hf_snapshot(src: Path, hf: Path, rev: str = "rev1") -> Path:
    """``hf/snapshots/<rev>/<file> -> ../../blobs/<sha256>`` for every file of ``src``."""
    (hf / "blobs").mkdir(parents=True, exist_ok=True)
    snap = hf / "snapshots" / rev
    snap.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        if not f.is_file():
            continue
        blob = hf / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
        if not blob.exists():
            shutil.copy2(f, blob)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    return snap


def perf_route(winml, bundle: Path, out: Path) -> dict:
    r = winml("perf", bundle, "--ep", "cpu", *LEAN, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "unexpected" not in r.stderr and "Traceback" not in r.stderr
    (cell,) = json.loads(out.read_text())["cells"]
    assert cell["status"] == "ok"
    return cell["route"]


def _links_resolve(folder: Path) -> None:
    for p in folder.rglob("*"):
        assert p.exists(), f"{p} dangles"


def test_hf_snapshot_flat_miss_hit_then_moved_and_relinked(winml, tmp_path, unchanged):
    hf = tmp_path / "hub" / "models--tiny"
    snap = hf_snapshot(TINY_FLAT, hf)
    assert (snap / "model.onnx.data").is_symlink()  # external data is linked too
    with unchanged(hf / "blobs", snap):
        first = perf_route(winml, snap, tmp_path / "1.json")
        assert first["cache"] == "miss"
        derived = Path(first["derived_path"])
        _links_resolve(derived)
        assert not any(p.is_symlink() for p in derived.iterdir())  # hard links to the blobs, not the links
        assert os.path.samefile(derived / "model.onnx.data", snap / "model.onnx.data")
        second = perf_route(winml, snap, tmp_path / "2.json")
        assert second["cache"] == "hit" and second["derived_path"] == first["derived_path"]

    moved = tmp_path / "elsewhere" / "models--tiny"
    moved.parent.mkdir()
    os.rename(hf, moved)  # the whole snapshot tree moves: links inside it stay valid
    snap = moved / "snapshots" / "rev1"
    with unchanged(moved / "blobs", snap):
        after_move = perf_route(winml, snap, tmp_path / "3.json")
        assert after_move["cache"] == "hit" and Path(after_move["derived_path"]).parent == snap / "_compiled"

    blob = moved / "blobs" / "new-revision-of-the-config"  # a new revision of one file: relinked
    raw = json.loads((snap / "genai_config.json").read_text())
    raw["search"]["max_length"] = raw["search"].get("max_length", 64) + 1
    blob.write_text(json.dumps(raw))
    (snap / "genai_config.json").unlink()
    (snap / "genai_config.json").symlink_to("../../blobs/new-revision-of-the-config")
    relinked = perf_route(winml, snap, tmp_path / "4.json")
    assert relinked["cache"] == "miss" and "genai_config.json" in relinked["cache_reason"]
    assert relinked["derived_path"] != after_move["derived_path"]


def test_pipeline_snapshot_with_a_linked_weights_folder(winml, tmp_path, unchanged):
    """transformer.onnx and its external data live in a symlinked sub-folder; every file a blob link."""
    hf = tmp_path / "models--pipe"
    snap = hf_snapshot(TINY_PIPELINE, hf)
    shared = tmp_path / "shared-weights"
    shared.mkdir()
    for name in ("transformer.onnx", "transformer.onnx.data"):
        os.rename(snap / name, shared / name)  # still relative links into blobs
        target = os.path.relpath(os.path.realpath(hf / "blobs" / os.path.basename(os.readlink(shared / name))), shared)
        (shared / name).unlink()
        (shared / name).symlink_to(target)
    (snap / "weights").symlink_to(os.path.relpath(shared, snap), target_is_directory=True)
    raw = json.loads((snap / "genai_config.json").read_text())
    for group in (
        raw["model"]["decoder"]["pipeline"]
        if isinstance(raw["model"]["decoder"]["pipeline"], list)
        else [raw["model"]["decoder"]["pipeline"]]
    ):
        for stage in group.values():
            if stage["filename"] == "transformer.onnx":
                stage["filename"] = "weights/transformer.onnx"
    (snap / "genai_config.json").unlink()
    (snap / "genai_config.json").write_text(json.dumps(raw, indent=2))
    with unchanged(hf / "blobs", snap, shared):
        first = perf_route(winml, snap, tmp_path / "1.json")
        assert first["cache"] == "miss"
        derived = Path(first["derived_path"])
        _links_resolve(derived)
        assert (derived / "weights").is_dir() and not (derived / "weights").is_symlink()
        assert os.path.samefile(
            derived / "weights" / "transformer.onnx.data", snap / "weights" / "transformer.onnx.data"
        )
        second = perf_route(winml, snap, tmp_path / "2.json")
        assert second["cache"] == "hit"


@pytest.mark.skipif(
    not os.access("/dev/shm", os.W_OK) or os.stat("/dev/shm").st_dev == os.stat("/tmp").st_dev,
    reason="needs a second filesystem (/dev/shm) to make hard links impossible",
)
def test_blobs_on_another_filesystem_then_snapshot_moved(winml, tmp_path, unchanged):
    """No hard link across filesystems: the derived bundle holds symlinks to the resolved blobs; moved
    to another depth they dangle, and the next run rebuilds with the reason."""
    import tempfile

    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        blobs = Path(shm) / "blobs"
        snap = hf_snapshot(TINY_FLAT, Path(shm))
        for link in snap.iterdir():  # absolute links: the snapshot can move without its blobs
            real = os.path.realpath(link)
            link.unlink()
            link.symlink_to(real)
        local = tmp_path / "a" / "rev1"
        local.parent.mkdir()
        shutil.move(str(snap), local)
        with unchanged(blobs, local):
            first = perf_route(winml, local, tmp_path / "1.json")
            derived = Path(first["derived_path"])
            assert first["cache"] == "miss" and (derived / "model.onnx.data").is_symlink()
            assert not os.path.isabs(os.readlink(derived / "model.onnx.data"))
            assert perf_route(winml, local, tmp_path / "2.json")["cache"] == "hit"
        deeper = tmp_path / "b" / "c" / "rev1"
        deeper.parent.mkdir(parents=True)
        os.rename(local, deeper)
        with unchanged(blobs, deeper):
            again = perf_route(winml, deeper, tmp_path / "3.json")
            assert again["cache"] == "miss" and "dangling link" in again["cache_reason"]
            _links_resolve(Path(again["derived_path"]))
            assert perf_route(winml, deeper, tmp_path / "4.json")["cache"] == "hit"
