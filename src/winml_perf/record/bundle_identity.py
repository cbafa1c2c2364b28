"""A bundle's identity beyond its folder name: a digest of what it holds, so two bundles named alike
(/a/tiny-qwen2, /b/tiny-qwen2) with different weights are different series, and one bundle moved
to another folder or machine stays the same series.

The digest covers every file of a bundle folder (genai_config.json, the .onnx models and their
external data, the tokenizer), by relative path, size and sha256; folders whose name starts with
``_`` or ``.`` are the harness's own (``_compiled/``) or hidden, and left out. For a plain .onnx
model: the file and its external data beside it (``model.onnx.data``, ``model.onnx_data``,
``model.data``, ``model.bin``).

A file up to FULL_HASH_BYTES is hashed whole; a larger one (a model's weights) by its size and
SAMPLES chunks of SAMPLE_BYTES spread evenly from its first byte to its last, so a multi-GB bundle
costs about 16 MiB of reading per file instead of the whole file each run; a re-export or
re-quantization changes weights throughout and is seen, a single edited byte between samples of
a large file is not. Each file is read once per process while its size, mtime and inode stay the same.
"""

from __future__ import annotations

import hashlib
import os
import stat
from functools import lru_cache
from pathlib import Path

#: Hex digits of the stored identity (48 bits: a clash between two bundles of one store is ~1e-10).
ID_LENGTH = 12
#: Files up to this size are hashed whole; larger ones by evenly spread samples.
FULL_HASH_BYTES = 64 << 20
SAMPLES = 16
SAMPLE_BYTES = 1 << 20


def _files(root: Path) -> list[tuple[str, Path]]:
    """(relative path with '/', path) of the files that make up the bundle at ``root``."""
    if root.is_file():
        data = {f"{root.stem}.data", f"{root.stem}.bin"}  # model.onnx.data, model.onnx_data, model.data
        return sorted(
            (p.name, p)
            for p in root.parent.iterdir()
            if p.is_file() and (p.name.startswith(root.name) or p.name in data)
        )
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for name in names:
            if not name.startswith("."):
                path = Path(folder) / name
                out.append((path.relative_to(root).as_posix(), path))
    return sorted(out)


@lru_cache(maxsize=4096)
def _file_digest(path: str, size: int, mtime_ns: int, inode: int) -> str:
    """The file's sha256 (whole, or of its size and samples past FULL_HASH_BYTES); the stat figures
    key the memo, so an edited file is read again."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= FULL_HASH_BYTES:
            h.update(f.read(size))  # what stat said; a file growing meanwhile is read again next time
        else:
            h.update(f"sampled {size}\0".encode())
            last = size - SAMPLE_BYTES
            for k in range(SAMPLES):
                f.seek(last * k // (SAMPLES - 1))
                h.update(f.read(SAMPLE_BYTES))
    return h.hexdigest()


def bundle_id(path: str | os.PathLike[str]) -> str | None:
    """The bundle's content digest (ID_LENGTH hex digits), or None when it cannot be read."""
    try:
        entries = []
        for rel, p in _files(Path(path)):
            st = p.stat()
            if not stat.S_ISREG(st.st_mode):  # a FIFO or device (/dev/zero) would never end
                continue
            entries.append(f"{rel}\0{st.st_size}\0{_file_digest(str(p), st.st_size, st.st_mtime_ns, st.st_ino)}\n")
    except OSError:
        return None
    if not entries:
        return None
    return hashlib.sha256("".join(entries).encode()).hexdigest()[:ID_LENGTH]
