"""The layer passes of one equivalence check, shared between the routes that run a stage file alike.

A route's layer pass over a stage file depends only on the file, the EP, provider options and session
entries it runs with, and the check's inputs (tokens, the reference's embeddings and, for the
layer-by-layer pass, the reference's layer outputs), which one check holds fixed. Routes that place
some stage as another route (or as the reference) did run that stage file alike, so its pass is run
once per check: a tune over every assignment of EPs to stages runs each distinct (stage file, EP,
options) once instead of once per route. A stage file is the same when it is the same file on disk
(device, inode, size, modification time) with the same external data files: derived bundles link
their sources, so a file left as it was is found again, and a file rewritten by preparation is not.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Session entries that do not change what a session computes (the stage's name in logs) or that the
#: pass takes elsewhere (the EP and its options are part of the key on their own).
_NOT_COMPUTING = frozenset({"log_id", "provider_options"})


@dataclass(frozen=True)
class StageFile:
    """One stage file of a bundle as a layer pass runs it."""

    folder: Path
    filename: str
    label: str  # its stages, 'context/iterator' (a flat bundle: 'decoder')
    ep: str
    options: dict[str, Any]
    entries: dict[str, Any]
    takes_ids: bool  # fed token ids (a flat decoder), else the embeddings


@dataclass(frozen=True)
class FilePass:
    """A stage file's tapped pass: {layer: tensor name} and each tapped tensor's value."""

    taps: dict[int, str]
    outputs: dict[str, Any]


@dataclass
class PassClock:
    """Where one pass's time went (ms)."""

    tap_ms: float = 0.0  # rewriting the stage file with its layers' outputs
    run_ms: float = 0.0  # making its session on the stage's EP, and the one run


@dataclass
class FilePasses:
    """The passes one check ran, by what decides them; ``runs`` and ``reused`` count them, ``tap_ms`` and
    ``run_ms`` add up the time of those run."""

    # a pass, or why its layers are unobserved
    done: dict[tuple[object, ...], FilePass | str] = field(default_factory=dict)
    runs: int = 0
    reused: int = 0
    tap_ms: float = 0.0
    run_ms: float = 0.0
    # the routes' passes run in a second thread, and a route on an EP not run there in the first
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def get(self, file: StageFile, teacher: bool) -> FilePass | str | None:
        key = pass_key(file, teacher)
        with self._lock:
            found = self.done.get(key)
            if found is not None:
                self.reused += 1
        return found

    def put(self, file: StageFile, teacher: bool, done: FilePass | str, clock: PassClock | None = None) -> None:
        key = pass_key(file, teacher)
        with self._lock:
            self.runs += 1
            if clock is not None:
                self.tap_ms += clock.tap_ms
                self.run_ms += clock.run_ms
            self.done[key] = done


def pass_key(file: StageFile, teacher: bool) -> tuple[object, ...]:
    """What decides a stage file's pass within one check (its inputs are the check's own)."""
    entries = {k: v for k, v in file.entries.items() if k not in _NOT_COMPUTING}
    return (
        file.label,
        file.takes_ids,
        teacher,
        file_identity(file.folder / file.filename),
        file.ep,
        json.dumps(file.options, sort_keys=True, default=str),
        json.dumps(entries, sort_keys=True, default=str),
    )


def session_key(file: StageFile, teacher: bool) -> tuple[object, ...]:
    """What decides a layer pass's session (its tapped graph, EP, options and entries), whatever the
    prompt: the key under which the check keeps it for its later prompts (equivalence/passes/model_pool.py)."""
    return ("layer session", *pass_key(file, teacher))


def stage_file_bytes(file: StageFile) -> int:
    """The bytes of the stage file and its external data files."""
    return sum(part[2] for part in file_identity(file.folder / file.filename))


# the external data files each ONNX file names, by the file's identity (read once per process)
_EXTERNAL: dict[tuple[int, int, int, int], tuple[str, ...]] = {}


def file_identity(path: Path) -> tuple[tuple[int, int, int, int], ...]:
    """The ONNX file and each external data file it names, as files on disk (links resolved)."""
    own = _stat(path)
    if own not in _EXTERNAL:
        _EXTERNAL[own] = _external_names(path)
    return (own, *(_stat(path.parent / name) for name in _EXTERNAL[own]))


def _external_names(path: Path) -> tuple[str, ...]:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return tuple(
        sorted(
            {
                entry.value
                for tensor in model.graph.initializer
                if tensor.data_location == onnx.TensorProto.EXTERNAL
                for entry in tensor.external_data
                if entry.key == "location"
            }
        )
    )


def _stat(path: Path) -> tuple[int, int, int, int]:
    st = os.stat(path.resolve())
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
