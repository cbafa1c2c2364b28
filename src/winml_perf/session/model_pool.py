"""Loaded onnxruntime-genai models kept for the length of one equivalence check.

The tune judges a route near its limit on three prompts (tune/check.py); each prompt's pass used to
load the route's model again, and on an EP that compiles (OpenVINO, WebGPU) the load is most of the
pass. Inside ``keep_models()`` a teacher-forced pass takes the model of a folder it has loaded before
in the same check. A model is kept while the bundles of all kept models add up to no more than half
of the memory free when the check began (the oldest one is let go first), so a large model is loaded
again rather than pressing the machine; outside ``keep_models()`` nothing is kept.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

#: The share of the memory free at the check's start that the kept models' bundles may take.
MEMORY_SHARE = 0.5


class ModelPool:
    """The models loaded so far, by folder, oldest first, within ``budget`` bytes of bundle files."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.models: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()  # model_key -> (model, its files' bytes)
        self.loads = 0
        self.reused = 0

    def model(self, folder: str | Path) -> Any:
        """The model of the bundle at ``folder``: kept from before, else loaded (and kept if it fits)."""
        import onnxruntime_genai as og

        key = model_key(folder)
        if key in self.models:
            self.models.move_to_end(key)
            self.reused += 1
            return self.models[key][0]
        model = og.Model(og.Config(str(folder)))
        self.loads += 1
        size = folder_bytes(Path(folder))
        while self.models and self._held() + size > self.budget:
            self.models.popitem(last=False)
        if size <= self.budget:
            self.models[key] = (model, size)
        return model

    def retain(self, folders: Iterable[str | Path]) -> None:
        """Let go of every kept model but those of ``folders``."""
        keep = {str(Path(f).resolve()) for f in folders}
        for key in [k for k in self.models if k[0] not in keep]:
            del self.models[key]

    def _held(self) -> int:
        return sum(size for _, size in self.models.values())


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


def load_model(folder: str | Path) -> Any:
    """The bundle's onnxruntime-genai model: from the check's pool inside keep_models(), else loaded."""
    pool = _POOL.get()
    if pool is not None:
        return pool.model(folder)
    import onnxruntime_genai as og

    return og.Model(og.Config(str(folder)))


def model_key(folder: str | Path) -> tuple:
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
