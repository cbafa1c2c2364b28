"""Bytes a decode step reads, from the graphs the token-generation stages run.

Per stage graph (read once per file, cached in-process, no tensor data loaded):

* an initializer read by any node other than a row lookup is read whole every step (MatMulNBits'
  packed weights, scales and zero points; MatMul/Gemm weights; norms and biases), and counts as
  ``lm_head`` when it feeds the matmul that produces the logits (or the stage is the lm_head stage);
* a table that is only looked up by rows (Gather / GatherBlockQuantized over axis 0, the rotary
  cos/sin caches of GroupQueryAttention / RotaryEmbedding) costs one row per generated token:
  table bytes / rows (or as many rows as a constant index tensor holds);
* the KV cache is read at the current length: per cached position, the bytes of one position of
  every ``past_key_values`` input (kv heads x head size x dtype, from the graph or genai_config).

Sizes are dims x dtype, so external data (.onnx.data) counts by its tensors, not by its file size.
A stage compiled to an EPContext node hides its weights: its bytes are not computable.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.onnxfile.wire import DTYPE_BITS, GraphInfo, Initializer, read_graph
from winml_perf.support.errors import BundleError

if TYPE_CHECKING:
    from winml_perf.bundle.config import GenaiConfig

#: (op type, input index) pairs that read one row of their table per token, and the axis attribute they gather over.
ROW_LOOKUPS = {
    ("Gather", 0): "axis",
    ("GatherBlockQuantized", 0): "gather_axis",
    ("GatherBlockQuantized", 2): "gather_axis",
    ("GatherBlockQuantized", 3): "gather_axis",
    ("GroupQueryAttention", 7): None,
    ("GroupQueryAttention", 8): None,
    ("RotaryEmbedding", 2): None,
    ("RotaryEmbedding", 3): None,
}
#: Ops that look only at an input's shape, never its data.
SHAPE_ONLY_OPS = frozenset({"Shape", "Size"})
MATMUL_OPS = frozenset(
    {"MatMul", "MatMulNBits", "Gemm", "FusedMatMul", "MatMulInteger", "QLinearMatMul", "MatMulIntegerToFloat"}
)
DEFAULT_PAST_PATTERNS = ("past_key_values.%d.key", "past_key_values.%d.value")
LOGITS = "logits"
#: How many single-path ops (Cast, Reshape, Add of a bias...) may sit between the lm_head matmul and the logits.
MAX_LOGITS_HOPS = 8


@dataclass(frozen=True)
class GraphBytes:
    """What one graph reads per decode step, before the KV length is known."""

    weights_bytes: int
    lm_head_bytes: int
    gathered_row_bytes: int
    kv_bytes_per_position: int
    kv_inputs: int


@dataclass(frozen=True)
class StageBytes:
    stage: str
    file: str
    weights_bytes: int  # initializers read whole, except the lm_head's
    lm_head_bytes: int
    gathered_row_bytes: int  # one row per token of each looked-up table (token embedding, rotary caches)
    kv_cache_bytes: float  # KV cache at the mean past length of the decode steps

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.lm_head_bytes + self.gathered_row_bytes + self.kv_cache_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "file": self.file,
            "weights_bytes": self.weights_bytes,
            "lm_head_bytes": self.lm_head_bytes,
            "gathered_row_bytes": self.gathered_row_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "total_bytes": self.total_bytes,
        }


@dataclass(frozen=True)
class DecodeBytes:
    """Bytes read per decode step by every stage that runs on token generation."""

    stages: tuple[StageBytes, ...]
    mean_past_tokens: float

    def _sum(self, name: str) -> float:
        return float(sum(getattr(s, name) for s in self.stages))

    @property
    def total_bytes(self) -> float:
        return self._sum("total_bytes")

    def to_dict(self) -> dict[str, Any]:
        names = ("weights_bytes", "lm_head_bytes", "gathered_row_bytes", "kv_cache_bytes", "total_bytes")
        return {
            **{n: self._sum(n) for n in names},
            "mean_past_tokens": self.mean_past_tokens,
            "stages": [s.to_dict() for s in self.stages],
        }


def mean_past_tokens(prompt_tokens: int, max_new_tokens: int) -> float | None:
    """Mean KV length over the decode steps: step k (1..n-1) attends to prompt + k - 1 cached positions."""
    steps = max_new_tokens - 1
    if steps < 1:
        return None
    return prompt_tokens + (steps - 1) / 2


def _row_bytes(table: Initializer, rows: int) -> int:
    if not table.dims or table.dims[0] == 0:
        return table.nbytes
    return min(table.nbytes, -(-table.nbytes * rows // table.dims[0]))


def _lm_head_names(graph: GraphInfo, initializers: Mapping[str, Initializer]) -> set[str]:
    """Initializers of the matmul that produces the logits, walking back through single-path ops."""
    producer = {out: n for n in graph.nodes for out in n.outputs}
    if not any(o.name == LOGITS for o in graph.outputs):
        return set()
    name = LOGITS
    for _ in range(MAX_LOGITS_HOPS):
        node = producer.get(name)
        if node is None:
            break
        if node.op_type in MATMUL_OPS:
            return {i for i in node.inputs if i in initializers}
        activations = [i for i in node.inputs if i and i not in initializers]
        if len(activations) != 1:
            break
        name = activations[0]
    return set()


def _kv_bytes_per_position(
    graph: GraphInfo, patterns: Sequence[str], kv_heads: int | None, head_size: int | None
) -> tuple[int, int]:
    regexes = [re.compile("^" + re.escape(p).replace("%d", r"\d+") + "$") for p in patterns]
    total = count = 0
    for value in graph.inputs:
        if not any(r.match(value.name) for r in regexes):
            continue
        dims = value.dims
        heads = dims[1] if len(dims) == 4 and isinstance(dims[1], int) else kv_heads
        size = dims[3] if len(dims) == 4 and isinstance(dims[3], int) else head_size
        bits = DTYPE_BITS.get(value.elem_type or 0)
        if not (heads and size and bits):
            raise BundleError(
                f"KV input {value.name!r}: kv heads, head size or dtype unknown",
                "set model.decoder.num_key_value_heads and head_size in genai_config.json",
            )
        total += heads * size * bits // 8
        count += 1
    return total, count


def graph_bytes(
    path: Path,
    patterns: Sequence[str] = DEFAULT_PAST_PATTERNS,
    kv_heads: int | None = None,
    head_size: int | None = None,
    lm_head_stage: bool = False,
) -> GraphBytes:
    """Per-step bytes of one graph (cached by file identity: path, size and modification time)."""
    st = Path(path).stat()
    return _graph_bytes(
        str(Path(path).resolve()), st.st_size, st.st_mtime_ns, tuple(patterns), kv_heads, head_size, lm_head_stage
    )


@functools.lru_cache(maxsize=256)
def _graph_bytes(
    path: str,
    _size: int,
    _mtime_ns: int,
    patterns: tuple[str, ...],
    kv_heads: int | None,
    head_size: int | None,
    lm_head_stage: bool,
) -> GraphBytes:
    graph = read_graph(path)
    if any(n.op_type == "EPContext" for n in graph.nodes):
        raise BundleError(
            f"{path} is a compiled EPContext model: its weights are inside the EP's binary",
            "measure the uncompiled route for a roofline (drop --compile)",
        )
    inits = {i.name: i for i in graph.initializers}
    whole: set[str] = set()
    rows: dict[str, int] = {}
    for node in graph.nodes:
        if node.op_type in SHAPE_ONLY_OPS:
            continue
        for index, name in enumerate(node.inputs):
            if name not in inits:
                continue
            axis_attr = ROW_LOOKUPS.get((node.op_type, index), "whole")
            if axis_attr == "whole" or (axis_attr and node.attribute(axis_attr, 0) != 0):
                whole.add(name)
                continue
            indices = inits.get(node.inputs[1]) if node.op_type.startswith("Gather") and len(node.inputs) > 1 else None
            count = 1
            for d in indices.dims if indices is not None else ():
                count *= d
            rows[name] = max(rows.get(name, 0), count)  # nodes that look up the same token's row share it
    lm_head = set(whole) if lm_head_stage else _lm_head_names(graph, inits) & whole
    kv, kv_inputs = _kv_bytes_per_position(graph, patterns, kv_heads, head_size)
    return GraphBytes(
        weights_bytes=sum(inits[n].nbytes for n in whole - lm_head),
        lm_head_bytes=sum(inits[n].nbytes for n in lm_head),
        gathered_row_bytes=sum(_row_bytes(inits[n], r) for n, r in rows.items() if n not in whole),
        kv_bytes_per_position=kv,
        kv_inputs=kv_inputs,
    )


def _past_patterns(decoder: Mapping[str, Any]) -> tuple[str, ...]:
    names = decoder.get("inputs") or {}
    return (
        names.get("past_key_names") or DEFAULT_PAST_PATTERNS[0],
        names.get("past_value_names") or DEFAULT_PAST_PATTERNS[1],
    )


def decode_bytes(
    bundle: str | Path,
    prompt_tokens: int,
    max_new_tokens: int,
    stages: Sequence[str] | None = None,
    config: GenaiConfig | None = None,
) -> DecodeBytes:
    """Bytes per decode step of a bundle's token-generation stages (``stages``: only these names;
    ``config``: the bundle's, when the caller has it, else read here).
    BundleError when a stage's graph cannot be sized (unreadable, compiled, KV shape unknown)."""
    from winml_perf.bundle.config import load_config

    config = config if config is not None else load_config(Path(bundle))
    decoder = config.raw["model"]["decoder"]
    past = mean_past_tokens(prompt_tokens, max_new_tokens)
    if past is None:
        raise BundleError(
            f"{max_new_tokens} new token(s) leave no decode step to bound", "use --max-new-tokens 2 or more"
        )
    out = []
    for stage in config.stages:
        if not stage.run_on_token_gen or (stages is not None and stage.name not in stages):
            continue
        g = graph_bytes(
            config.bundle / stage.filename,
            _past_patterns(decoder),
            decoder.get("num_key_value_heads"),
            decoder.get("head_size"),
            stage.is_lm_head,
        )
        out.append(
            StageBytes(
                stage.name,
                stage.filename,
                g.weights_bytes,
                g.lm_head_bytes,
                g.gathered_row_bytes,
                g.kv_bytes_per_position * past,
            )
        )
    if not out:
        raise BundleError(f"{bundle}: no stage runs on token generation", "check run_on_token_gen in genai_config.json")
    return DecodeBytes(tuple(out), past)
