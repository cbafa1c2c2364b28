"""llama.cpp's quantized blocks carried into MatMulNBits without re-quantizing, and dequantized.

A GGUF matrix of numpy shape (N, K) holds N rows of K/32 blocks; MatMulNBits (com.microsoft) holds
B as (N, K/block, block·bits/8) with per-block scales and computes ``scale · (q − zero_point)``:

- Q4_0, value ``d · (q − 8)``: 4 bits, scale d, the default zero point 8 (no zero-point input).
- Q4_1, value ``d · q + m`` = ``d · (q − 8) + (m + 8d)``: 4 bits, scale d, the default zero point 8, and a
  per-block offset ``m + 8d`` that the graph adds as (sum of the block's activations) × offset, a small
  MatMul beside the MatMulNBits. (A float zero point ``−m / d`` is exact too, but onnxruntime's CPU
  kernel takes a path 6-10× slower with float zero points: measured 1.24 ms against 0.19 ms for a
  576×1536 product here, so the offset form is used.)
- Q8_0, value ``d · q`` with q in int8: 8 bits, ``q + 128`` as uint8, scale d, the default zero point 128.

GGUF packs a 4-bit block as 16 bytes whose low nibbles are elements 0..15 and high nibbles 16..31;
MatMulNBits packs element 2i in the low and 2i + 1 in the high nibble of byte i: the nibbles are re-packed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BLOCK = 32
# bytes of one block: the fp16 scale (and the fp16 min for Q4_1) then the values
_BLOCK_BYTES = {"Q4_0": 2 + 16, "Q4_1": 4 + 16, "Q8_0": 2 + 32}


@dataclass(frozen=True)
class NBits:
    """MatMulNBits inputs for one (N, K) matrix."""

    bits: int
    packed: np.ndarray  # uint8 (N, K/32, 32·bits/8)
    scales: np.ndarray  # float32 (N, K/32)
    zero_points: np.ndarray | None  # float32 (N, K/32), or None for the default (2^(bits-1))
    offsets: np.ndarray | None = None  # float32 (N, K/32) added to every value of a block (Q4_1's min)

    @property
    def rows(self) -> int:
        return int(self.packed.shape[0])

    @property
    def cols(self) -> int:
        return int(self.packed.shape[1]) * BLOCK

    def take_rows(self, order: np.ndarray) -> NBits:
        """The same matrix with its rows (output features) reordered; exact, as each row is its own blocks."""
        zp = None if self.zero_points is None else self.zero_points[order]
        offsets = None if self.offsets is None else self.offsets[order]
        return NBits(self.bits, self.packed[order], self.scales[order], zp, offsets)


def _blocks(raw: np.ndarray, type_name: str, rows: int, cols: int) -> np.ndarray:
    if cols % BLOCK:
        raise ValueError(f"a {type_name} row of {cols} values is not whole blocks of {BLOCK}")
    size = _BLOCK_BYTES[type_name]
    data = np.ascontiguousarray(raw, dtype=np.uint8).reshape(rows, cols // BLOCK, size)
    return data


def _halves(data: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
    """GGUF's 16 packed bytes → the 32 values 0..15 (low nibbles) then 16..31 (high nibbles)."""
    qs = data[..., start : start + 16]
    return qs & 0x0F, qs >> 4


def _fp16(data: np.ndarray, start: int) -> np.ndarray:
    return np.ascontiguousarray(data[..., start : start + 2]).view(np.float16)[..., 0].astype(np.float32)


def _pack_nibbles(values: np.ndarray) -> np.ndarray:
    """(…, 32) values in 0..15 → (…, 16) bytes, element 2i low and 2i + 1 high."""
    packed: np.ndarray = values[..., 0::2] | (values[..., 1::2] << 4)  # numpy's stubs give this as Any
    return packed.astype(np.uint8)


def _nibbles(data: np.ndarray, start: int) -> np.ndarray:
    low, high = _halves(data, start)
    return np.concatenate([low, high], axis=-1)


def to_nbits(raw: np.ndarray, type_name: str, rows: int, cols: int) -> NBits:
    """The GGUF blocks of an (N, K) matrix as MatMulNBits inputs, without re-quantizing."""
    data = _blocks(raw, type_name, rows, cols)
    d = _fp16(data, 0)
    if type_name == "Q4_0":
        return NBits(4, _pack_nibbles(_nibbles(data, 2)), d, None)
    if type_name == "Q4_1":
        offsets = (_fp16(data, 2) + 8 * d).astype(np.float32)
        return NBits(4, _pack_nibbles(_nibbles(data, 4)), d, None, offsets)
    if type_name == "Q8_0":
        q = np.ascontiguousarray(data[..., 2:]).view(np.int8).astype(np.int16)
        return NBits(8, (q + 128).astype(np.uint8), d, None)
    raise ValueError(f"{type_name} is not a block type MatMulNBits can hold")


def dequantize(raw: np.ndarray, type_name: str, rows: int, cols: int) -> np.ndarray:
    """The (N, K) float32 values llama.cpp's definition of the type gives (the reference for checks)."""
    if type_name == "F32":
        return np.asarray(raw, dtype=np.float32).reshape(rows, cols)
    if type_name == "F16":
        return np.asarray(raw, dtype=np.float16).reshape(rows, cols).astype(np.float32)
    data = _blocks(raw, type_name, rows, cols)
    d = _fp16(data, 0)[..., None]
    if type_name == "Q4_0":
        values = d * (_nibbles(data, 2).astype(np.float32) - 8)
    elif type_name == "Q4_1":
        values = d * _nibbles(data, 4).astype(np.float32) + _fp16(data, 2)[..., None]
    elif type_name == "Q8_0":
        values = d * np.ascontiguousarray(data[..., 2:]).view(np.int8).astype(np.float32)
    else:
        raise ValueError(f"unknown tensor type {type_name}")
    return values.reshape(rows, cols).astype(np.float32)


def nbits_values(nb: NBits) -> np.ndarray:
    """What MatMulNBits computes from these inputs, as an (N, K) float32 matrix (for checks)."""
    if nb.bits == 4:
        q = np.stack([nb.packed & 0x0F, nb.packed >> 4], axis=-1).reshape(nb.rows, -1, BLOCK).astype(np.float32)
    else:
        q = nb.packed.astype(np.float32)
    zp = nb.zero_points if nb.zero_points is not None else np.full(nb.scales.shape, 2 ** (nb.bits - 1), np.float32)
    values: np.ndarray = (q - zp[..., None]) * nb.scales[..., None]  # numpy's stubs give this as Any
    if nb.offsets is not None:
        values = values + nb.offsets[..., None]
    return values.reshape(nb.rows, -1).astype(np.float32)


def quantize_int4(weights: np.ndarray, accuracy_block: int = BLOCK) -> NBits:
    """Symmetric 4-bit blocks of an (N, K) float matrix through onnxruntime's own MatMulNBits quantizer."""
    from onnxruntime.capi._pybind_state import quantize_matmul_4bits

    rows, cols = weights.shape
    if cols % accuracy_block:
        raise ValueError(f"a row of {cols} values is not whole blocks of {accuracy_block}")
    n_blocks = cols // accuracy_block
    packed = np.zeros((rows, n_blocks, accuracy_block // 2), dtype=np.uint8)
    scales = np.zeros((rows * n_blocks,), dtype=np.float32)
    zero_points = np.zeros((rows * ((n_blocks + 1) // 2),), dtype=np.uint8)
    # the quantizer takes the (K, N) layout of a MatMul's B
    quantize_matmul_4bits(
        packed, np.ascontiguousarray(weights.T, dtype=np.float32), scales, zero_points, accuracy_block, rows, cols, True
    )
    return NBits(4, packed, scales.reshape(rows, n_blocks), None)
