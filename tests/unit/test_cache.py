"""cache.py: hit, miss reasons, manifests of the wrong shape, failed builds, concurrent builders and clean under the lock."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

from winml_perf.bundle import cache
from winml_perf.support.errors import BundleError


def _request(src: Path, **settings) -> cache.Request:
    files = sorted(p.name for p in src.iterdir() if p.is_file())
    return cache.Request(
        src,
        "thing",
        "test artifact",
        {"level": "all", **settings},
        cache.source_identities(src, files),
        {"level": "the level"},
        {"payload": str},
    )


def _build(tmp: Path) -> dict:
    (tmp / "out.bin").write_bytes(b"built")
    return {"payload": "out.bin"}


@pytest.fixture
def src(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"model")
    return folder


def _artifacts(src: Path) -> list[str]:
    return sorted(p.name for p in (src / "_compiled").iterdir() if not p.name.startswith("."))


def test_miss_then_hit_and_the_manifest(src):
    first = cache.get_or_build(_request(src), _build)
    assert first.cache == "miss" and first.reason == "no test artifact for this route yet"
    assert first.folder.name == f"thing-{first.key[:12]}" and first.folder.parent == src / "_compiled"
    manifest = json.loads((first.folder / cache.MANIFEST).read_text())
    assert manifest == first.manifest and manifest["payload"] == "out.bin" and manifest["key"] == first.key
    assert manifest["files"] == ["manifest.json", "out.bin"] and manifest["components"]["level"] == "all"
    assert manifest["source"]["files"][0]["file"] == "model.onnx"
    second = cache.get_or_build(_request(src), lambda tmp: pytest.fail("a hit must not build"))
    assert second.cache == "hit" and second.folder == first.folder and second.manifest == manifest


def test_miss_reasons_name_what_changed(src, monkeypatch):
    cache.get_or_build(_request(src), _build)
    level = cache.get_or_build(_request(src, level="basic"), _build)
    assert level.cache == "miss" and level.reason.startswith("the level changed: all -> basic (compared with thing-")
    st = (src / "model.onnx").stat()
    os.utime(src / "model.onnx", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    source = cache.get_or_build(_request(src, level="basic"), _build)
    assert source.reason.startswith("source files changed: model.onnx")
    monkeypatch.setattr(cache, "runtime_versions", lambda: {"onnxruntime": "9.9.9", "onnxruntime_genai": "0.18.0"})
    versions = cache.get_or_build(_request(src, level="basic"), _build)
    assert "runtime versions changed: onnxruntime " in versions.reason and "-> 9.9.9" in versions.reason


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[1, 2]", "manifest.json is not a JSON object"),
        (
            "{not json",
            "manifest.json: malformed JSON at line 1 column 2: Expecting property name enclosed in double quotes",
        ),
        (
            '{"format": 2, "format": 2}',
            "manifest.json: key 'format' appears twice in one object (onnxruntime-genai would act on the first, Python readers on the last)",
        ),
        ('{"key": 3}', "manifest.json has no int `format_version`"),
        ("WRONG_FILES", "manifest.json has no list `files`"),
        ("WRONG_PAYLOAD", "manifest.json has no str `payload`"),
        ("WRONG_ENTRY", "manifest.json lists a file that is not a string"),
    ],
)
def test_manifest_of_the_wrong_shape_is_a_miss_with_a_reason(src, text, problem):
    good = cache.get_or_build(_request(src), _build)
    broken = {
        "WRONG_FILES": {**good.manifest, "files": "out.bin"},
        "WRONG_PAYLOAD": {**good.manifest, "payload": ["x"]},
        "WRONG_ENTRY": {**good.manifest, "files": [1]},
    }.get(text)
    (good.folder / cache.MANIFEST).write_text(json.dumps(broken) if broken else text)
    again = cache.get_or_build(_request(src), _build)
    assert again.cache == "miss" and again.reason == f"{good.folder.name} has no valid manifest ({problem}); rebuilding"
    assert cache.get_or_build(_request(src), _build).cache == "hit"


def test_wrong_shape_sibling_does_not_break_the_miss_reason(src):
    old = cache.get_or_build(_request(src), _build)
    (old.folder / cache.MANIFEST).write_text('{"components": "not a dict"}')
    new = cache.get_or_build(_request(src, level="basic"), _build)
    assert new.cache == "miss" and new.reason == "no test artifact for this route yet"


def test_missing_or_dangling_file_and_caller_check_are_misses(src):
    good = cache.get_or_build(_request(src), _build)
    (good.folder / "out.bin").unlink()
    (good.folder / "out.bin").symlink_to(src / "gone.bin")  # a dangling link is not the file
    assert (
        cache.get_or_build(_request(src), _build).reason
        == f"{good.folder.name} lacks out.bin (a dangling link to {src / 'gone.bin'}); rebuilding"
    )
    (good.folder / "out.bin").unlink()
    assert cache.get_or_build(_request(src), _build).reason == f"{good.folder.name} lacks out.bin; rebuilding"
    checked = cache.get_or_build(_request(src), _build, check=lambda folder, m: "out.bin is stale here; rebuilding")
    assert checked.cache == "miss" and checked.reason == "out.bin is stale here; rebuilding"


def test_failed_build_is_never_published(src):
    def fails(tmp: Path) -> dict:
        (tmp / "out.bin").write_bytes(b"half")
        raise RuntimeError("compiler crashed")

    with pytest.raises(RuntimeError, match="compiler crashed"):
        cache.get_or_build(_request(src), fails)
    assert _artifacts(src) == [] and not list((src / "_compiled").glob(".tmp-*"))

    def no_space(tmp: Path) -> dict:
        raise OSError(28, "No space left on device")

    with pytest.raises(BundleError, match="No space left on device"):
        cache.get_or_build(_request(src), no_space)
    after = cache.get_or_build(_request(src), _build)
    assert after.cache == "miss" and after.reason == "no test artifact for this route yet"


def build_in_process(src: str, log: str) -> tuple[str, str]:
    """Run in spawned processes: build the artifact, logging each build that runs."""

    def build(tmp: Path) -> dict:
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.2)  # widen the window in which a second builder would overlap
        return _build(tmp)

    entry = cache.get_or_build(_request(Path(src)), build)
    return str(entry.folder), entry.cache


def test_concurrent_builders_build_once(src, tmp_path):
    log = tmp_path / "builds.log"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.starmap(build_in_process, [(str(src), str(log))] * 4)
    assert len({folder for folder, _ in results}) == 1 and [c for _, c in results].count("miss") == 1
    assert len(log.read_text().split()) == 1
    assert len(_artifacts(src)) == 1 and not list((src / "_compiled").glob(".tmp-*"))


def test_clean_waits_for_a_build_under_way(src):
    building, go, order, errors = threading.Event(), threading.Event(), [], []

    def slow(tmp: Path) -> dict:
        order.append("build started")
        building.set()
        go.wait(30)
        order.append("build done")
        return _build(tmp)

    def run(fn):
        try:
            fn()
        except Exception as exc:  # reported by the assert below
            errors.append(exc)

    builder = threading.Thread(target=run, args=(lambda: cache.get_or_build(_request(src), slow),))
    builder.start()
    assert building.wait(30)
    cleaner = threading.Thread(target=run, args=(lambda: order.append(("cleaned", cache.clean(src))),))
    cleaner.start()
    time.sleep(0.3)  # a clean that took no lock would remove the build's folder now
    go.set()
    builder.join(30)
    cleaner.join(30)
    assert not errors and order == ["build started", "build done", ("cleaned", [src / "_compiled"])]
    assert not (src / "_compiled").exists()
    assert cache.get_or_build(_request(src), _build).cache == "miss"  # the next build makes the root again


def test_clean_of_one_family_leaves_the_others(src):
    mine = cache.get_or_build(_request(src), _build)
    other = cache.get_or_build(cache.Request(src, "other", "test artifact", {}, [], shape={"payload": str}), _build)
    removed = cache.clean(src, "thing")
    assert mine.folder in removed and (src / "_compiled" / f".{mine.folder.name}.lock") in removed
    assert not mine.folder.exists() and other.folder.exists()
    cache.clean(src, "other")
    assert list((src / "_compiled").iterdir()) == []  # nothing left behind, not even the lock


def test_a_hold_that_built_nothing_leaves_no_root_behind(src):
    with cache.holding(src):
        assert (src / "_compiled" / cache.ROOT_LOCK).exists()  # held while the block runs
    assert not (src / "_compiled").exists()
    with pytest.raises(RuntimeError), cache.holding(src):  # a refused run too
        raise RuntimeError("bad route")
    assert not (src / "_compiled").exists()


def test_a_hold_keeps_a_root_it_did_not_make_or_one_with_artifacts(src, tmp_path):
    with cache.holding(src):
        cache.get_or_build(_request(src), _build)
    assert _artifacts(src), "what the run built stays"
    other = tmp_path / "other"
    other.mkdir()
    (other / "_compiled").mkdir()
    with cache.holding(other):
        pass
    assert (other / "_compiled").is_dir(), "a root that was there before the hold is not the hold's to remove"


@pytest.mark.skipif(os.name == "nt", reason="flock")
def test_a_hold_leaves_the_root_to_another_holder(src):
    import fcntl

    with cache.holding(src):
        fd = os.open(src / "_compiled" / cache.ROOT_LOCK, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_SH)  # a second run holding the same root
    try:
        assert (src / "_compiled" / cache.ROOT_LOCK).exists()
    finally:
        os.close(fd)
