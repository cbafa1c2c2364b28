"""Pixels of a PNG screenshot as a numpy array (height x width x channels), without an imaging
library: 8-bit, non-interlaced RGB or RGBA, as headless chromium writes them."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

_CHANNELS = {2: 3, 6: 4}  # PNG colour type -> channels


def read_png(path: Path) -> np.ndarray:
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (size,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + size]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + size
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in _CHANNELS and interlace == 0, f"unsupported PNG {header}"
    bpp = _CHANNELS[colour]
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(height, 1 + width * bpp)
    return _unfilter(raw, width, bpp).reshape(height, width, bpp)


def _unfilter(raw: np.ndarray, width: int, bpp: int) -> np.ndarray:
    out = np.zeros((raw.shape[0], width * bpp), dtype=np.uint8)
    prior = np.zeros(width * bpp, dtype=np.int64)
    for y, row in enumerate(raw):
        kind, line = row[0], row[1:].astype(np.int64)
        if kind == 1:  # Sub: a running sum along each channel
            line = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1)
        elif kind == 2:  # Up
            line = line + prior
        elif kind in (3, 4):  # Average, Paeth: each byte needs the one decoded before it
            line = _sequential(line, prior, bpp, kind)
        elif kind != 0:
            raise AssertionError(f"PNG filter {kind}")
        prior = line % 256
        out[y] = prior
    return out


def _sequential(line: np.ndarray, prior: np.ndarray, bpp: int, kind: int) -> np.ndarray:
    cur, up = line.tolist(), prior.tolist()
    for i in range(len(cur)):
        a = cur[i - bpp] if i >= bpp else 0
        b, c = up[i], (up[i - bpp] if i >= bpp else 0)
        if kind == 3:
            cur[i] = (cur[i] + (a + b) // 2) % 256
        else:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) % 256
    return np.array(cur, dtype=np.int64)
