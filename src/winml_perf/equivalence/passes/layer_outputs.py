"""One full-sequence pass of a decoder stage through plain onnxruntime, on a given EP with given
provider and session options, reading named tensors (issue 24's layer localisation: a stage model
copied with extra graph outputs on each decoder layer's output).

The pass starts from an empty KV cache: every token of the sequence at once, an all-ones attention
mask, position ids 0..S-1. A static KV buffer (shapes fixed in the file) is fed zeros of its size,
as onnxruntime-genai feeds it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from winml_perf.ep.table import CPU_EP
from winml_perf.support.errors import BenchmarkFailure

_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
}


@dataclass(frozen=True)
class KvShape:
    """What a symbolic KV dimension stands for: the decoder's KV heads and head size."""

    heads: int
    head_size: int


def stage_ep(stage: Any) -> tuple[str, dict[str, Any]]:
    """The EP (canonical name) and provider options a genai stage runs on, as its genai_config says (none: CPU)."""
    from winml_perf.ep.table import ep_from_genai_provider

    if not stage.provider_options:
        return CPU_EP, {}
    key, options = next(iter(stage.provider_options[0].items()))
    return ep_from_genai_provider(key), dict(options)


def session_options(entries: Mapping[str, Any]) -> Any:
    """onnxruntime SessionOptions from a genai stage's session_options (optimisation level, threads,
    config entries); other keys (log_id, provider_options) are not session settings."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    level = entries.get("graph_optimization_level")
    if level:
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, str(level))
    for key, attr in (
        ("intra_op_num_threads", "intra_op_num_threads"),
        ("inter_op_num_threads", "inter_op_num_threads"),
    ):
        if entries.get(key) is not None:
            setattr(so, attr, int(entries[key]))
    for key, value in (entries.get("config_entries") or {}).items():
        so.add_session_config_entry(str(key), str(value))
    so.log_severity_level = 3
    return so


def open_session(model: Path, ep: str, provider_options: Mapping[str, str], entries: Mapping[str, Any]) -> Any:
    """An InferenceSession of ``model`` on ``ep`` (canonical name) with exactly these options."""
    import onnxruntime as ort

    from winml_perf.session.onnx_session import ort_ep_devices

    so = session_options(entries)
    if ep == CPU_EP:
        return ort.InferenceSession(str(model), sess_options=so, providers=[CPU_EP])
    devices = ort_ep_devices(ep)
    if not devices:
        raise BenchmarkFailure(f"{model}: onnxruntime offers no device for {ep} here", "see `winml devices`")
    so.add_provider_for_devices(devices[:1], {str(k): str(v) for k, v in provider_options.items()})
    return ort.InferenceSession(str(model), sess_options=so)


def _dim(value: Any, fallback: int) -> int:
    return value if isinstance(value, int) and value >= 0 else fallback


def full_sequence_feeds(
    inputs: Sequence[Any], tokens: Sequence[int], embeds: np.ndarray | None, kv: KvShape
) -> dict[str, np.ndarray]:
    """Feeds for one pass over ``tokens`` (or ``embeds``: 1 x S x hidden) from an empty cache."""
    n = len(tokens) if embeds is None else int(embeds.shape[1])
    feeds: dict[str, np.ndarray] = {}
    for info in inputs:
        dtype = _DTYPES.get(info.type)
        name, shape = info.name, list(info.shape)
        if dtype is None:
            raise ValueError(f"input {name}: type {info.type} is not fed by a full-sequence pass")
        if name == "input_ids":
            feeds[name] = np.asarray(tokens, dtype=dtype)[None, :]
        elif name == "inputs_embeds":
            if embeds is None:
                raise ValueError("input inputs_embeds: no embeddings given")
            feeds[name] = embeds.astype(dtype)
        elif name == "attention_mask":
            feeds[name] = np.ones((1, n), dtype=dtype)
        elif name == "position_ids":
            feeds[name] = np.arange(n, dtype=dtype)[None, :]
        elif name.startswith("past_key_values."):
            dims = (1, _dim(shape[1], kv.heads), _dim(shape[2], 0), _dim(shape[3], kv.head_size))
            feeds[name] = np.zeros(dims, dtype=dtype)
        else:
            raise ValueError(f"input {name} is not fed by a full-sequence pass")
    return feeds


@dataclass(frozen=True)
class StagePass:
    outputs: dict[str, np.ndarray]
    ms: float


def open_pass_session(model: Path, ep: str, provider_options: Mapping[str, str], entries: Mapping[str, Any]) -> Any:
    """open_session, with onnxruntime's failure as a BenchmarkFailure naming the model."""
    try:
        return open_session(model, ep, provider_options, entries)
    except BenchmarkFailure:
        raise
    except Exception as exc:  # onnxruntime raises its own exception types with the EP's message
        raise _pass_failed(model, ep, exc) from exc


def run_opened(
    session: Any,
    model: Path,
    ep: str,
    tokens: Sequence[int],
    wanted: Sequence[str],
    kv: KvShape,
    embeds: np.ndarray | None = None,
    given: Mapping[str, np.ndarray] | None = None,
) -> StagePass:
    """``wanted`` tensors (float32) of one pass over ``tokens`` from an empty cache, on a session opened
    on ``model`` (named in a failure); ``given``: inputs fed as they are, cast to the input's type."""
    t0 = time.perf_counter()
    given = dict(given or {})
    try:
        inputs = session.get_inputs()
        feeds = full_sequence_feeds([i for i in inputs if i.name not in given], tokens, embeds, kv)
        for info in inputs:
            if info.name in given:
                feeds[info.name] = np.asarray(given[info.name]).astype(_DTYPES.get(info.type, np.float32))
        values = session.run(list(wanted), feeds)
    except Exception as exc:  # onnxruntime raises its own exception types with the EP's message
        raise _pass_failed(model, ep, exc) from exc
    out = {name: np.asarray(v, dtype=np.float32) for name, v in zip(wanted, values)}
    return StagePass(out, (time.perf_counter() - t0) * 1000.0)


def _pass_failed(model: Path, ep: str, exc: Exception) -> BenchmarkFailure:
    return BenchmarkFailure(
        f"{model}: the layer pass on {ep} failed: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}",
        "the layers of this stage are left unobserved",
    )
