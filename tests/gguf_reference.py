"""A numpy forward pass of a llama-family GGUF model, written from llama.cpp's definitions, for tests.

Independent of the converter's graph: it reads the dequantized tensors in GGUF's own row order and
applies RoPE as llama.cpp does for each architecture (llama: adjacent pairs, the "normal" mode;
qwen2: halves, the "neox" mode), so a wrong Q/K un-permutation or rotary form in the bundle shows.
"""

from __future__ import annotations

import numpy as np

from winml_perf.convert.blocks import dequantize
from winml_perf.convert.gguf_file import GgufModel


def _w(model: GgufModel, name: str) -> np.ndarray:
    t = model.tensors[name]
    rows, cols = (t.shape[0], t.shape[1]) if len(t.shape) == 2 else (1, t.shape[0])
    values = dequantize(t.data, t.type_name, rows, cols)
    return values if len(t.shape) == 2 else values[0]


def _rms(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rope(x: np.ndarray, base: float, neox: bool) -> np.ndarray:
    """x: (seq, heads, dim), positions 0..seq-1."""
    seq, _, dim = x.shape
    inv = base ** (-np.arange(0, dim // 2) * 2.0 / dim)
    ang = np.arange(seq)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    if neox:
        a, b = x[..., : dim // 2], x[..., dim // 2 :]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
    return out


def logits(model: GgufModel, ids: list[int]) -> np.ndarray:
    """(seq, vocab) float64 logits for the token ids, causal attention, no cache."""
    h = model.hyper
    neox = h.architecture == "qwen2"
    x = _w(model, "token_embd.weight").astype(np.float64)[ids]
    seq = len(ids)
    causal = np.triu(np.full((seq, seq), -np.inf), 1)
    group = h.heads // h.kv_heads
    for i in range(h.layers):
        p = f"blk.{i}."
        a = _rms(x, _w(model, p + "attn_norm.weight"), h.rms_eps)
        q, k, v = (a @ _w(model, p + f"attn_{n}.weight").T for n in ("q", "k", "v"))
        if p + "attn_q.bias" in model.tensors:
            q, k, v = (t + _w(model, p + f"attn_{n}.bias") for t, n in zip((q, k, v), "qkv"))
        q = _rope(q.reshape(seq, h.heads, h.head_dim), h.rope_base, neox)
        k = _rope(k.reshape(seq, h.kv_heads, h.head_dim), h.rope_base, neox)
        v = v.reshape(seq, h.kv_heads, h.head_dim)
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(h.head_dim) + causal
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        attn = np.einsum("hqk,khd->qhd", scores, v).reshape(seq, -1)
        x = x + attn @ _w(model, p + "attn_output.weight").T
        m = _rms(x, _w(model, p + "ffn_norm.weight"), h.rms_eps)
        gate, up = m @ _w(model, p + "ffn_gate.weight").T, m @ _w(model, p + "ffn_up.weight").T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ _w(model, p + "ffn_down.weight").T
    x = _rms(x, _w(model, "output_norm.weight"), h.rms_eps)
    head = "output.weight" if "output.weight" in model.tensors else "token_embd.weight"
    return x @ _w(model, head).T
