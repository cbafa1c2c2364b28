"""The reference's band variants kept for the length of one check over several prompts.

The noise-floor and precision variants of a reference (bundle/variants.py) depend on the reference
bundle alone, not on the prompt; the tune's check judges up to three prompts against one reference.
Inside ``keep_variants()`` each variant folder is made once and removed when the block ends (with the
model pool, its model is loaded once too); outside it a variant is made per use and removed after it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

_KEPT: ContextVar[dict[tuple[object, ...], Any] | None] = ContextVar("winml_kept_variants", default=None)


@contextmanager
def keep_variants() -> Iterator[dict[tuple[object, ...], Any]]:
    kept: dict[tuple[object, ...], Any] = {}
    token = _KEPT.set(kept)
    try:
        yield kept
    finally:
        _KEPT.reset(token)
        for folder in variant_folders(kept):
            shutil.rmtree(folder, ignore_errors=True)


def variant(kind: str, reference: Path, make: Callable[[Path], Any]) -> Any:
    """``make(reference)``: made once per (kind, reference folder) inside keep_variants(), else each time."""
    kept = _KEPT.get()
    if kept is None:
        return make(reference)
    key = (kind, str(Path(reference).resolve()))
    if key not in kept:
        kept[key] = make(reference)
    return kept[key]


def release(folder: Path) -> None:
    """Remove a variant folder after use, unless keep_variants() keeps it for a later prompt."""
    kept = _KEPT.get()
    if kept is not None and str(folder) in {str(f) for f in variant_folders(kept)}:
        return
    shutil.rmtree(folder, ignore_errors=True)


def variant_folders(kept: dict[tuple[object, ...], Any]) -> list[Path]:
    """Every folder among the kept variants (a variant is a folder, or a tuple holding folders)."""
    out: list[Path] = []
    for value in kept.values():
        for part in value if isinstance(value, tuple) else (value,):
            if isinstance(part, Path):
                out.append(part)
    return out
