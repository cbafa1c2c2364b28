"""The store's writers' queue is filelock's lock (one lock on every platform), with its deadline,
its notice naming the holder, re-entrance and thread safety kept."""

from __future__ import annotations

import ast
import multiprocessing
import os
import threading
from pathlib import Path

import filelock
import pytest

import winml_perf.results.locking as locking
from winml_perf.results.locking import StoreLockTimeout, WriterLock


def test_the_module_has_no_lock_of_its_own():
    tree = ast.parse(Path(locking.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "fcntl" not in imported and "msvcrt" not in imported and "filelock" in imported


def test_a_filelock_held_on_the_path_excludes_the_writer(tmp_path):
    path = tmp_path / "s.db.lock"
    other = filelock.FileLock(str(path), preserve_lock_file=True)
    other.acquire()
    try:
        with pytest.raises(StoreLockTimeout, match="gave up waiting"):
            with WriterLock(path, timeout_s=0.2, notice=lambda _: None):
                pass
    finally:
        other.release()
    with WriterLock(path, timeout_s=0.2):
        assert path.read_text() == str(os.getpid())


def _hold(path: str, ready, done) -> None:
    with WriterLock(Path(path), timeout_s=5):
        ready.set()
        done.wait(10)


def test_a_waiter_in_another_process_is_told_the_holders_pid(tmp_path, monkeypatch):
    monkeypatch.setattr(locking, "NOTICE_AFTER_S", 0.05)
    path = tmp_path / "s.db.lock"
    ctx = multiprocessing.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold, args=(str(path), ready, done))
    child.start()
    try:
        assert ready.wait(30)
        said: list[str] = []
        with pytest.raises(StoreLockTimeout, match=f"pid {child.pid}"):
            with WriterLock(path, timeout_s=0.3, notice=said.append):
                pass
        assert len(said) == 1 and f"held by pid {child.pid}" in said[0]
    finally:
        done.set()
        child.join(30)
    with WriterLock(path, timeout_s=5):  # free again once the holder is gone
        pass


def test_reentrant_in_one_thread_and_exclusive_between_threads(tmp_path):
    path = tmp_path / "s.db.lock"
    lock = WriterLock(path, timeout_s=5)
    order: list[str] = []
    with lock:
        with lock:
            order.append("nested")
        waiter = threading.Thread(target=lambda: (lock.__enter__(), order.append("thread"), lock.__exit__()))
        waiter.start()
        waiter.join(0.2)
        assert order == ["nested"] and path.read_text() == str(os.getpid())
    waiter.join(5)
    assert order == ["nested", "thread"] and path.read_text() == ""


def test_a_lock_file_that_cannot_be_made_is_a_store_error(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(locking.StoreError, match="cannot open the results store's lock file"):
        with WriterLock(tmp_path / "a-file" / "s.db.lock", timeout_s=0.2):
            pass
