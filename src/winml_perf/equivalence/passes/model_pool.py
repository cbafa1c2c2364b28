"""Loaded onnxruntime-genai models, and the layer passes' sessions, kept for the length of one check.

The tune judges a route near its limit on three prompts (equivalence/pooled.py); each prompt's pass used to
load the route's model again, and open each layer pass's session again, and on an EP that compiles
(OpenVINO, WebGPU) opening is most of a pass. Inside ``keep_models()`` a teacher-forced pass takes
the model of a folder it has loaded before in the same check, and a layer pass the session it opened
before on the same stage file, EP and options (its tapped graph does not depend on the prompt).
Models and sessions are kept while their files add up to no more than half of the memory free when
the check began (the oldest one is let go first), so a large model is loaded again rather than
pressing the machine; outside ``keep_models()`` nothing is kept.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

#: The share of the memory free at the check's start that the kept models' bundles may take.
MEMORY_SHARE = 0.5


class ModelPool:
    """The models and layer sessions opened so far, oldest first, within ``budget`` bytes of their files."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        # model_key -> (model, its files' bytes)
        self.models: OrderedDict[tuple[object, ...], tuple[Any, int]] = OrderedDict()
        # a layer pass's key (equivalence/passes/shared_passes.session_key) -> (what it opened, its file's bytes, folder)
        self.sessions: OrderedDict[tuple[object, ...], tuple[Any, int, str]] = OrderedDict()
        self.loads = 0
        self.reused = 0
        self.sessions_opened = 0
        self.sessions_reused = 0
        self._lock = threading.Lock()  # the check's layer passes keep sessions from a second thread

    def model(self, folder: str | Path) -> Any:
        """The model of the bundle at ``folder``: kept from before, else loaded (and kept if it fits)."""
        import onnxruntime_genai as og

        key = model_key(folder)
        with self._lock:
            if key in self.models:
                self.models.move_to_end(key)
                self.reused += 1
                return self.models[key][0]
        model = og.Model(og.Config(str(folder)))
        size = folder_bytes(Path(folder))
        with self._lock:
            self.loads += 1
            self._make_room(size)
            if size <= self.budget:
                self.models[key] = (model, size)
        return model

    def session(self, key: tuple[object, ...]) -> Any:
        """What a layer pass opened before under ``key``, or None."""
        with self._lock:
            if key not in self.sessions:
                return None
            self.sessions.move_to_end(key)
            self.sessions_reused += 1
            return self.sessions[key][0]

    def keep_session(self, key: tuple[object, ...], folder: str | Path, opened: Any, size: int) -> None:
        """Keep ``opened`` (a layer pass's session and taps) of a stage file of ``size`` bytes in ``folder``."""
        with self._lock:
            self.sessions_opened += 1
            self._make_room(size)
            if size <= self.budget:
                self.sessions[key] = (opened, size, str(Path(folder).resolve()))

    def count(self, reused: bool) -> None:
        """Count a model loaded, or kept from before, in a pass lane (equivalence/passes/genai_passes.py)."""
        with self._lock:
            if reused:
                self.reused += 1
            else:
                self.loads += 1

    def retain(self, folders: Iterable[str | Path]) -> None:
        """Let go of every kept model and session but those of ``folders``."""
        keep = {str(Path(f).resolve()) for f in folders}
        with self._lock:
            for key in [k for k in self.models if k[0] not in keep]:
                del self.models[key]
            for key in [k for k, kept in self.sessions.items() if kept[2] not in keep]:
                del self.sessions[key]

    def _make_room(self, size: int) -> None:
        """(Under the lock.) Let go of the oldest models, then the oldest sessions, until ``size`` more bytes fit."""
        while self.models and self._held() + size > self.budget:
            self.models.popitem(last=False)
        while self.sessions and self._held() + size > self.budget:
            self.sessions.popitem(last=False)

    def _held(self) -> int:
        return sum(size for _, size in self.models.values()) + sum(kept[1] for kept in self.sessions.values())


_POOL: ContextVar[ModelPool | None] = ContextVar("winml_model_pool", default=None)


@contextmanager
def keep_models(budget: int | None = None) -> Iterator[ModelPool]:
    """Within the block, teacher-forced passes share loaded models (the module doc says how many)."""
    pool = ModelPool(budget if budget is not None else free_memory_share())
    token = _POOL.set(pool)
    try:
        yield pool
    finally:
        _POOL.reset(token)
        pool.models.clear()
        pool.sessions.clear()


def keep_models_from_now(budget: int) -> None:
    """In a process that lives for one check (an equivalence pass lane, equivalence/passes/genai_passes.py): keep
    models from now on, within ``budget`` bytes; the process's end lets them go."""
    _POOL.set(ModelPool(budget))


def current_pool() -> ModelPool | None:
    """The pool of the enclosing keep_models() (or of this lane process), else None."""
    return _POOL.get()


def load_model(folder: str | Path) -> Any:
    """The bundle's onnxruntime-genai model: from the check's pool inside keep_models(), else loaded."""
    pool = _POOL.get()
    if pool is not None:
        return pool.model(folder)
    import onnxruntime_genai as og

    return og.Model(og.Config(str(folder)))


def kept_session(key: tuple[object, ...]) -> Any:
    """Inside keep_models(), what a layer pass opened before under ``key``; else None."""
    pool = _POOL.get()
    return pool.session(key) if pool is not None else None


def keep_session(key: tuple[object, ...], folder: str | Path, opened: Any, size: int) -> None:
    """Inside keep_models(), keep a layer pass's session for the check's later prompts; else nothing."""
    pool = _POOL.get()
    if pool is not None:
        pool.keep_session(key, folder, opened, size)


def model_key(folder: str | Path) -> tuple[object, ...]:
    """The folder, and its genai_config.json as a file on disk: a folder made again under the same name
    (a temporary variant) is not taken for the one loaded before."""
    folder = Path(folder).resolve()
    st = os.stat(folder / "genai_config.json")
    return (str(folder), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def free_memory_share() -> int:
    import psutil

    return int(psutil.virtual_memory().available * MEMORY_SHARE)


def folder_bytes(folder: Path) -> int:
    """The bytes of the bundle's files (links followed; a derived bundle links its sources)."""
    total = 0
    for entry in folder.iterdir():
        if entry.is_file():
            total += os.stat(entry.resolve()).st_size
    return total
