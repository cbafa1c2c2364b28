"""Nothing under _compiled/ is followed outside it: planted links are refused or replaced with the reason."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from winml_perf.bundle import cache
from winml_perf.support.errors import BundleError


def _request(src: Path) -> cache.Request:
    return cache.Request(src, "thing", "test artifact", {"level": "all"}, cache.source_identities(src, ["model.onnx"]))


def _build(tmp: Path) -> dict:
    (tmp / "out.bin").write_bytes(b"built")
    return {}


@pytest.fixture
def src(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"model")
    return folder


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "keep.txt").write_text("not yours")
    return folder


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_compiled_folder_that_is_a_link_is_refused(src, outside):
    (src / "_compiled").symlink_to(outside)
    with pytest.raises(BundleError, match=r"_compiled is a symbolic link; nothing .* is followed"):
        cache.get_or_build(_request(src), _build)
    with pytest.raises(BundleError, match="symbolic link"):
        with cache.holding(src):
            pass
    assert _tree(outside) == ["keep.txt"]


def test_without_fcntl_the_lock_makes_the_root_and_refuses_a_linked_one(src, outside, monkeypatch):
    """Where fcntl is missing (Windows) the lock is filelock's, and the root is made by the same
    ``_make_root``: created for a build, refused when it is a link."""
    import sys

    monkeypatch.setitem(sys.modules, "fcntl", None)  # `import fcntl` raises ImportError
    entry = cache.get_or_build(_request(src), _build)
    assert entry.cache == "miss" and entry.folder.parent == src / "_compiled"
    with cache.holding(src):
        assert entry.folder.is_dir()
    shutil.rmtree(src / "_compiled")
    (src / "_compiled").symlink_to(outside)
    with pytest.raises(BundleError, match=r"_compiled is a symbolic link"):
        with cache.holding(src):
            pass
    assert _tree(outside) == ["keep.txt"]


@pytest.mark.parametrize("lock", [".lock", "artifact"])
def test_a_lock_file_that_is_a_link_is_refused_and_nothing_is_created(src, outside, lock):
    first = cache.get_or_build(_request(src), _build)
    shutil.rmtree(first.folder)
    name = cache.ROOT_LOCK if lock == ".lock" else f".{first.folder.name}.lock"
    planted = src / "_compiled" / name
    planted.unlink(missing_ok=True)
    planted.symlink_to(outside / "created-by-a-bundle")
    with pytest.raises(BundleError, match=rf"{name} is a symbolic link"):
        cache.get_or_build(_request(src), _build)
    assert _tree(outside) == ["keep.txt"]


def test_an_artifact_folder_that_is_a_link_is_replaced_with_the_reason(src, outside):
    first = cache.get_or_build(_request(src), _build)
    copy = outside / "artifact"
    shutil.copytree(first.folder, copy)  # a valid artifact, but outside _compiled/
    shutil.rmtree(first.folder)
    first.folder.symlink_to(copy)
    again = cache.get_or_build(_request(src), _build)
    assert again.cache == "miss" and "is a symbolic link" in again.reason
    assert not again.folder.is_symlink() and (again.folder / "out.bin").read_bytes() == b"built"
    assert sorted(p.name for p in copy.iterdir()) == ["manifest.json", "out.bin"]  # the target is left alone


def test_a_manifest_that_is_a_link_is_not_read(src, outside):
    first = cache.get_or_build(_request(src), _build)
    (outside / "manifest.json").write_bytes((first.folder / "manifest.json").read_bytes())
    (first.folder / "manifest.json").unlink()
    (first.folder / "manifest.json").symlink_to(outside / "manifest.json")
    again = cache.get_or_build(_request(src), _build)
    assert again.cache == "miss" and "manifest.json is a symbolic link" in again.reason
    assert (outside / "manifest.json").exists()


def test_clean_removes_planted_links_without_following_them(src, outside):
    (src / "_compiled").symlink_to(outside)
    assert cache.clean(src) == [src / "_compiled"]
    assert not os.path.lexists(src / "_compiled") and _tree(outside) == ["keep.txt"]

    first = cache.get_or_build(_request(src), _build)
    shutil.rmtree(first.folder)
    first.folder.symlink_to(outside)
    (src / "_compiled" / cache.ROOT_LOCK).unlink()
    (src / "_compiled" / cache.ROOT_LOCK).symlink_to(outside / "keep.txt")
    assert first.folder in cache.clean(src, "thing")
    assert _tree(outside) == ["keep.txt"] and (outside / "keep.txt").read_text() == "not yours"


def test_clean_of_a_read_only_bundle_is_a_bundle_error(src, monkeypatch):
    cache.get_or_build(_request(src), _build)
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):
        if str(path).endswith(".lock") or flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(BundleError) as caught:
        cache.clean(src)
    assert "_compiled" in str(caught.value) and "Read-only file system" in str(caught.value)
    assert caught.value.exit_code == 2


def test_bundle_clean_on_a_linked_compiled_folder_exits_cleanly(winml, tiny_flat, bundle_copy, outside):
    bundle = bundle_copy(tiny_flat)
    (bundle / "_compiled").symlink_to(outside)
    done = winml("bundle", "clean", bundle)
    assert done.returncode == 0, done.stderr
    assert "unexpected" not in done.stderr and _tree(outside) == ["keep.txt"]


def test_the_compat_memo_is_never_written_through_a_planted_link(tmp_path, outside):
    from winml_perf.bundle.epcontext import compat

    folder = tmp_path / "artifact"
    folder.mkdir()
    (folder / f".{compat.COMPAT_FILE}.{os.getpid()}").symlink_to(outside / "keep.txt")
    compat.write_memo(folder, {"a": 1})
    assert (outside / "keep.txt").read_text() == "not yours"
    assert '"a": 1' in (folder / compat.COMPAT_FILE).read_text()
