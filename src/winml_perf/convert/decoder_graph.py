"""The ONNX decoder graph of a llama-family model, in the operators onnxruntime-genai's builder uses.

Per layer: (Skip)SimplifiedLayerNormalization, one packed q|k|v projection, GroupQueryAttention with
rotary embedding (half-rotation form; llama.cpp's Q/K row order for llama is undone), the output
projection, SiLU-gated MLP. Linear weights are MatMulNBits (com.microsoft) where the file's blocks carry
over (``blocks.py``), else MatMul over float32; the embedding is GatherBlockQuantized over the same
8-bit blocks the tied LM head reads, or a float Gather. Inputs and outputs are named as genai expects.

fp16 computes in float16 as the builder's fp16 models do: activations, KV cache, logits, norm weights,
cos/sin caches, embedding and float matrices in float16; the file's Q4_0/Q4_1/Q8_0 blocks still carried
over as MatMulNBits / GatherBlockQuantized, their scales (and Q4_1's offsets) rounded to float16. No Casts
are written: onnxruntime's CPU EP has float16 kernels for GroupQueryAttention, (Skip)SimplifiedLayer-
Normalization, MatMulNBits, GatherBlockQuantized and Gather, and at session load inserts its own Casts
to float32 around the ops it has none for (MatMul, Sigmoid, Mul, Add, ReduceSum in 1.32).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from winml_perf.convert import blocks
from winml_perf.convert.gguf_file import GgufModel, GgufTensor, Hyper
from winml_perf.support.errors import UsageError

if TYPE_CHECKING:
    from onnx import ModelProto, NodeProto, TensorProto, ValueInfoProto

PRECISIONS = ("auto", "int4", "fp32", "fp16")
MS = "com.microsoft"


@dataclass(frozen=True)
class GraphOptions:
    precision: str = "auto"  # auto: each tensor as the file stores it; int4: float ones quantized; fp32: all float
    # fp16: as auto for the quantized blocks (scales in float16), everything else float16
    accuracy_level: int = 4  # MatMulNBits: 4 = int8 activations (the builder's CPU default), 0 = float
    pipeline: bool = False  # three files (embeddings, transformer, lm_head) for a decoder-pipeline bundle


#: The files of a pipeline bundle, in the order genai runs them (names as `winml bundle synth --pipeline`).
EMBEDDINGS, TRANSFORMER, LM_HEAD = "embeddings.onnx", "transformer.onnx", "lm_head.onnx"
FLAT = "model.onnx"


@dataclass
class Built:
    """The graph's parts and what the conversion did to each weight (for the summary)."""

    # file -> (nodes, initializers)
    parts: dict[str, tuple[list[NodeProto], list[TensorProto]]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)  # how each weight was written -> count
    max_carry_error: float = 0.0
    block_sums: dict[str, str] = field(default_factory=dict)  # activation -> its per-block sums


def rope_caches(hyper: Hyper) -> tuple[np.ndarray, np.ndarray]:
    half = hyper.head_dim // 2
    inv_freq = 1.0 / (hyper.rope_base ** (np.arange(0, half, dtype=np.float64) * 2 / hyper.head_dim))
    angles = np.outer(np.arange(hyper.context_length, dtype=np.float64), inv_freq)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def unpermute_order(rows: int, heads: int) -> np.ndarray:
    """Row order that turns llama.cpp's Q/K rows (pairs interleaved per head) back into Hugging Face's."""
    head_dim = rows // heads
    return np.arange(rows).reshape(heads, head_dim // 2, 2).swapaxes(1, 2).reshape(-1)


class _Writer:
    def __init__(self, model: GgufModel, options: GraphOptions, log: Callable[[str], None]) -> None:
        import onnx
        from onnx import helper, numpy_helper

        self.onnx, self.helper, self.numpy_helper = onnx, helper, numpy_helper
        self.model, self.hyper, self.options, self.log = model, model.hyper, options, log
        self.out = Built()
        self.part = TRANSFORMER
        self.embeds = "inputs_embeds" if options.pipeline else "/embed/output_0"
        self.hidden = "hidden_states" if options.pipeline else "/final_norm/output_0"
        self.fp16 = options.precision == "fp16"

    def cast(self, array: np.ndarray) -> np.ndarray:
        """A float initializer in the graph's compute type: unchanged but under fp16, then float16."""
        return array.astype(np.float16) if self.fp16 else array

    def fp16_nbits(self, nb: blocks.NBits) -> blocks.NBits:
        """nb as fp16 holds it (scales and offsets in float16), or nb unchanged."""
        if not self.fp16:
            return nb
        offsets = None if nb.offsets is None else nb.offsets.astype(np.float16)
        return blocks.NBits(nb.bits, nb.packed, nb.scales.astype(np.float16), nb.zero_points, offsets)

    # -- small helpers -------------------------------------------------------------------------------
    def node(self, op: str, inputs: list[str], outputs: list[str], name: str, domain: str = "", **attrs: Any) -> None:
        """``attrs``: the node's ONNX attributes, as onnx.helper.make_node takes them (``**kwargs: Any``)."""
        self._bucket()[0].append(self.helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))

    def init(self, name: str, array: np.ndarray) -> str:
        self._bucket()[1].append(self.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def _bucket(self) -> tuple[list[NodeProto], list[TensorProto]]:
        return self.out.parts.setdefault(self.part, ([], []))

    def tensor(self, name: str) -> GgufTensor:
        try:
            return self.model.tensors[name]
        except KeyError:
            raise UsageError(
                f"{self.model.path}: tensor '{name}' is missing", "is this a complete llama-family GGUF file?"
            ) from None

    def floats(self, t: GgufTensor) -> np.ndarray:
        rows, cols = (t.shape[0], t.shape[1]) if len(t.shape) == 2 else (1, t.shape[0])
        return blocks.dequantize(t.data, t.type_name, rows, cols)

    def count(self, how: str) -> None:
        self.out.weights[how] = self.out.weights.get(how, 0) + 1

    # -- weights ---------------------------------------------------------------------------------------
    def nbits_of(self, t: GgufTensor, order: np.ndarray | None) -> blocks.NBits | None:
        """MatMulNBits inputs for a linear weight, or None where it is written as float."""
        precision = self.options.precision
        rows, cols = t.shape
        if precision == "fp32":
            return None
        if t.type_name in ("Q4_0", "Q4_1") or (t.type_name == "Q8_0" and precision in ("auto", "fp16")):
            nb = self.fp16_nbits(blocks.to_nbits(t.data, t.type_name, rows, cols))
            reference = blocks.dequantize(t.data, t.type_name, rows, cols)
            err = float(np.max(np.abs(blocks.nbits_values(nb) - reference)))
            self.out.max_carry_error = max(self.out.max_carry_error, err)
            return nb if order is None else nb.take_rows(order)
        if precision == "int4":
            values = self.floats(t)
            return blocks.quantize_int4(values if order is None else values[order])
        return None

    def linear(self, x: str, tensors: list[GgufTensor], orders: list[np.ndarray | None], name: str) -> str:
        """x @ Wᵀ for the row-concatenation of ``tensors`` (one packed projection), as MatMulNBits or MatMul."""
        parts = [self.nbits_of(t, o) for t, o in zip(tensors, orders)]
        out = f"/{name}/output_0"
        if all(p is not None for p in parts) and len({p.bits for p in parts if p}) == 1:
            packed = np.concatenate([p.packed for p in parts if p])
            scales = np.concatenate([p.scales for p in parts if p])
            zps = [p.zero_points for p in parts if p]
            inputs = [x, self.init(f"{name}.weight_Q", packed), self.init(f"{name}.weight_scales", scales)]
            if any(z is not None for z in zps):
                default = float(2 ** (parts[0].bits - 1))  # type: ignore[union-attr]
                zp = np.concatenate(
                    [
                        z if z is not None else np.full(p.scales.shape, default, p.scales.dtype)
                        for z, p in zip(zps, parts)
                        if p
                    ]
                )
                inputs.append(self.init(f"{name}.weight_zp", zp))
            for t, p in zip(tensors, parts):
                carried = t.type_name.startswith("Q") and p is not None and (p.bits == 8 or t.type_name != "Q8_0")
                self.count(
                    f"{t.type_name} carried over as {p.bits}-bit MatMulNBits{' (fp16 scales)' if self.fp16 else ''}"
                    if carried and p
                    else f"{t.type_name} quantized to int4 (onnxruntime's quantizer)"
                )
            n, k = packed.shape[0], packed.shape[1] * blocks.BLOCK
            offsets = [p.offsets for p in parts if p]
            main = out if all(o is None for o in offsets) else f"/{name}/nbits"
            self.node(
                "MatMulNBits", inputs, [main], name, MS,
                K=k, N=n, bits=parts[0].bits, block_size=blocks.BLOCK,  # type: ignore[union-attr]
                accuracy_level=self.options.accuracy_level,
            )  # fmt: skip
            if main != out:
                table = np.concatenate(
                    [
                        o if o is not None else np.zeros(p.scales.shape, p.scales.dtype)
                        for o, p in zip(offsets, parts)
                        if p
                    ]
                )
                offset = self.init(f"{name}.block_offsets", np.ascontiguousarray(table.T))
                self.node("MatMul", [self.block_sums(x), offset], [f"/{name}/offsets"], f"{name}/offsets")
                self.node("Add", [main, f"/{name}/offsets"], [out], f"{name}/add_offsets")
            return out
        weights = []
        for t, o in zip(tensors, orders):
            values = self.floats(t)
            weights.append(values if o is None else values[o])
            self.count(f"{t.type_name} as {'float16' if self.fp16 else 'float32'} MatMul")
        self.node("MatMul", [x, self.init(f"{name}.weight", self.cast(np.concatenate(weights).T))], [out], name)
        return out

    def block_sums(self, x: str) -> str:
        """x's sums over each block of 32 features (once per activation): what a Q4_1 block's offset multiplies."""
        if x not in self.out.block_sums:
            shape = self.init(f"{x}/block_shape", np.array([0, 0, -1, blocks.BLOCK], np.int64))
            axes = self.init(f"{x}/block_axes", np.array([-1], np.int64))
            self.node("Reshape", [x, shape], [f"{x}/blocks"], f"{x}/Reshape")
            self.node("ReduceSum", [f"{x}/blocks", axes], [f"{x}/block_sums"], f"{x}/BlockSums", keepdims=0)
            self.out.block_sums[x] = f"{x}/block_sums"
        return self.out.block_sums[x]

    # -- the graph -------------------------------------------------------------------------------------
    def attention_mask(self) -> tuple[str, str]:
        one = self.init("const_int64_1", np.array([1], np.int64))
        self.node("ReduceSum", ["attention_mask", one], ["/mask/sum"], "/mask/ReduceSum", keepdims=0)
        self.node("Sub", ["/mask/sum", one], ["/mask/sub"], "/mask/Sub")
        self.node("Cast", ["/mask/sub"], ["seqlens_k"], "/mask/Cast", to=self.onnx.TensorProto.INT32)
        self.node("Shape", ["attention_mask"], ["/mask/shape"], "/mask/Shape")
        self.node(
            "Gather",
            ["/mask/shape", self.init("const_int64_idx1", np.array(1, np.int64))],
            ["/mask/len"],
            "/mask/Gather",
            axis=0,
        )
        self.node("Cast", ["/mask/len"], ["total_seq_len"], "/mask/CastLen", to=self.onnx.TensorProto.INT32)
        return "seqlens_k", "total_seq_len"

    def embeddings(self) -> tuple[str, blocks.NBits | None]:
        t = self.tensor("token_embd.weight")
        rows, cols = t.shape
        if t.type_name == "Q8_0" and self.options.precision in ("auto", "fp16"):
            nb = self.fp16_nbits(blocks.to_nbits(t.data, t.type_name, rows, cols))
            self.init("embed.weight_Q8", nb.packed.reshape(rows, cols))
            self.init("embed.weight_scales", nb.scales)
            self.node(
                "GatherBlockQuantized", ["embed.weight_Q8", "input_ids", "embed.weight_scales"], [self.embeds],
                "/embed/GatherBlockQuantized", MS, gather_axis=0, quantize_axis=1, block_size=blocks.BLOCK, bits=8,
            )  # fmt: skip
            self.count(
                f"Q8_0 embedding carried over as 8-bit GatherBlockQuantized{' (fp16 scales)' if self.fp16 else ''}"
            )
            return self.embeds, nb
        embed = self.init("embed.weight", self.cast(self.floats(t)))
        self.node("Gather", [embed, "input_ids"], [self.embeds], "/embed/Gather")
        self.count(f"{t.type_name} embedding as {'float16' if self.fp16 else 'float32'} Gather")
        return self.embeds, None

    def lm_head(self, x: str, shared: blocks.NBits | None) -> None:
        head = self.model.tensors.get("output.weight")
        if head is None and shared is not None:
            # tied: the LM head reads the embedding's own 8-bit blocks
            scales = (
                self.init("lm_head.weight_scales", shared.scales) if self.options.pipeline else "embed.weight_scales"
            )
            inputs = [x, self.init("lm_head.weight_Q", shared.packed), scales]
            n, k = shared.rows, shared.cols
            self.node(
                "MatMulNBits", inputs, ["logits"], "/lm_head/MatMulNBits", MS,
                K=k, N=n, bits=8, block_size=blocks.BLOCK, accuracy_level=self.options.accuracy_level,
            )  # fmt: skip
            self.count("tied LM head over the embedding's 8-bit blocks")
            return
        out = self.linear(x, [head or self.tensor("token_embd.weight")], [None], "/lm_head")
        self.node("Identity", [out], ["logits"], "/lm_head/Identity")

    def layer(self, i: int, x: str, residual: str | None, mask: tuple[str, str]) -> tuple[str, str]:
        h, p = self.hyper, f"/model/layers.{i}"  # the builder's names: the layer taps (bundle/variants) read them
        blk = f"blk.{i}"
        norm = self.init(f"{blk}.attn_norm", self.cast(self.floats(self.tensor(f"{blk}.attn_norm.weight"))[0]))
        if residual is None:
            self.node(
                "SimplifiedLayerNormalization",
                [x, norm],
                [f"{p}/in_norm"],
                f"{p}/input_layernorm/LayerNorm",
                axis=-1,
                epsilon=h.rms_eps,
                stash_type=1,
            )
            residual = x
        else:
            self.node(
                "SkipSimplifiedLayerNormalization",
                [residual, x, norm],
                [f"{p}/in_norm", "", "", f"{p}/in_sum"],
                f"{p}/input_layernorm/SkipLayerNorm",
                MS,
                epsilon=h.rms_eps,
            )
            residual = f"{p}/in_sum"
        q, k, v = (self.tensor(f"{blk}.attn_{n}.weight") for n in ("q", "k", "v"))
        permute = h.architecture == "llama"
        orders = [
            unpermute_order(q.shape[0], h.heads) if permute else None,
            unpermute_order(k.shape[0], h.kv_heads) if permute else None,
            None,
        ]
        qkv = self.linear(f"{p}/in_norm", [q, k, v], orders, f"{p}/attn/qkv_proj")
        biases = [self.model.tensors.get(f"{blk}.attn_{n}.bias") for n in ("q", "k", "v")]
        if any(b is not None for b in biases):
            if not all(b is not None for b in biases):
                raise UsageError(f"{self.model.path}: layer {i} has a bias on some of q/k/v only", "not supported")
            bias = np.concatenate([self.floats(b)[0] for b in biases if b is not None])
            self.node(
                "Add",
                [qkv, self.init(f"{blk}.attn_qkv.bias", self.cast(bias))],
                [f"{p}/attn/qkv_bias"],
                f"{p}/attn/qkv_bias",
            )
            qkv = f"{p}/attn/qkv_bias"
        self.node(
            "GroupQueryAttention",
            [qkv, "", "", f"past_key_values.{i}.key", f"past_key_values.{i}.value", *mask, "cos_cache", "sin_cache"],
            [f"{p}/attn/output_0", f"present.{i}.key", f"present.{i}.value"],
            f"{p}/attn/GroupQueryAttention", MS,
            num_heads=h.heads, kv_num_heads=h.kv_heads, scale=float(1 / np.sqrt(h.head_dim)),
            do_rotary=1, rotary_interleaved=0, local_window_size=-1, softcap=0.0,
        )  # fmt: skip
        attn = self.linear(f"{p}/attn/output_0", [self.tensor(f"{blk}.attn_output.weight")], [None], f"{p}/attn/o_proj")
        ffn_norm = self.init(f"{blk}.ffn_norm", self.cast(self.floats(self.tensor(f"{blk}.ffn_norm.weight"))[0]))
        self.node(
            "SkipSimplifiedLayerNormalization",
            [residual, attn, ffn_norm],
            [f"{p}/post_norm", "", "", f"{p}/post_sum"],
            f"{p}/post_attention_layernorm",
            MS,
            epsilon=h.rms_eps,
        )
        gate = self.linear(f"{p}/post_norm", [self.tensor(f"{blk}.ffn_gate.weight")], [None], f"{p}/mlp/gate_proj")
        up = self.linear(f"{p}/post_norm", [self.tensor(f"{blk}.ffn_up.weight")], [None], f"{p}/mlp/up_proj")
        self.node("Sigmoid", [gate], [f"{p}/mlp/sigmoid"], f"{p}/mlp/act_fn/Sigmoid")
        self.node("Mul", [gate, f"{p}/mlp/sigmoid"], [f"{p}/mlp/silu"], f"{p}/mlp/act_fn/Mul")
        self.node("Mul", [f"{p}/mlp/silu", up], [f"{p}/mlp/gated"], f"{p}/mlp/Mul")
        down = self.linear(f"{p}/mlp/gated", [self.tensor(f"{blk}.ffn_down.weight")], [None], f"{p}/mlp/down_proj")
        return down, f"{p}/post_sum"

    def build(self) -> tuple[dict[str, ModelProto], Built]:
        h = self.hyper
        cos, sin = rope_caches(h)
        self.init("cos_cache", self.cast(cos))
        self.init("sin_cache", self.cast(sin))
        mask = self.attention_mask()
        self.part = EMBEDDINGS
        x, shared = self.embeddings()
        self.part = TRANSFORMER
        residual: str | None = None
        for i in range(h.layers):
            x, residual = self.layer(i, x, residual, mask)
            if i % 5 == 4 or i == h.layers - 1:
                self.log(f"  layer {i + 1}/{h.layers}")
        final = self.init("output_norm", self.cast(self.floats(self.tensor("output_norm.weight"))[0]))
        self.node(
            "SkipSimplifiedLayerNormalization",
            [cast(str, residual), x, final],  # set by the last layer (a model has one at least)
            [self.hidden],
            f"/model/layers.{h.layers}/final_norm_layernorm/SkipLayerNorm",
            MS,
            epsilon=h.rms_eps,
        )
        self.part = LM_HEAD
        self.lm_head(self.hidden, shared)
        return self._models()

    def _models(self) -> tuple[dict[str, ModelProto], Built]:
        """{file name: ModelProto}: one flat decoder, or the three stages of a pipeline."""
        onnx, helper, h = self.onnx, self.helper, self.hyper
        # the compute type of activations, KV cache and logits (named f32 as it is but under fp16)
        f32 = onnx.TensorProto.FLOAT16 if self.fp16 else onnx.TensorProto.FLOAT
        i64 = onnx.TensorProto.INT64
        seq = ["batch_size", "sequence_length"]
        ids = helper.make_tensor_value_info("input_ids", i64, seq)
        embeds = helper.make_tensor_value_info("inputs_embeds", f32, [*seq, h.hidden])
        hidden = helper.make_tensor_value_info("hidden_states", f32, [*seq, h.hidden])
        logits = helper.make_tensor_value_info("logits", f32, [*seq, h.vocab_size])
        kv = ["batch_size", h.kv_heads, "past_sequence_length", h.head_dim]
        kv_out = ["batch_size", h.kv_heads, "total_sequence_length", h.head_dim]
        past, present = [], []
        for i in range(h.layers):
            for kind in ("key", "value"):
                past.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", f32, kv))
                present.append(helper.make_tensor_value_info(f"present.{i}.{kind}", f32, kv_out))
        mask = helper.make_tensor_value_info("attention_mask", i64, ["batch_size", "total_sequence_length"])
        parts = self.out.parts
        if not self.options.pipeline:
            nodes = [n for f in (EMBEDDINGS, TRANSFORMER, LM_HEAD) for n in parts[f][0]]
            inits = [t for f in (EMBEDDINGS, TRANSFORMER, LM_HEAD) for t in parts[f][1]]
            return {FLAT: self._model("decoder", nodes, inits, [ids, mask, *past], [logits, *present])}, self.out
        return {
            EMBEDDINGS: self._model("embeddings", *parts[EMBEDDINGS], [ids], [embeds]),
            TRANSFORMER: self._model("transformer", *parts[TRANSFORMER], [embeds, mask, *past], [hidden, *present]),
            LM_HEAD: self._model("lm_head", *parts[LM_HEAD], [hidden], [logits]),
        }, self.out

    def _model(
        self,
        name: str,
        nodes: list[NodeProto],
        inits: list[TensorProto],
        inputs: list[ValueInfoProto],
        outputs: list[ValueInfoProto],
    ) -> ModelProto:
        helper = self.helper
        graph = helper.make_graph(nodes, name, inputs, outputs, inits)
        model: ModelProto = helper.make_model(  # mypy reads onnx's make_model as untyped
            graph,
            opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)],
            producer_name="winml-perf bundle from-gguf",
        )
        model.ir_version = 10
        return model


def build_decoder(
    model: GgufModel, options: GraphOptions, log: Callable[[str], None]
) -> tuple[dict[str, ModelProto], Built]:
    """{file name: onnx ModelProto} (weights still inside) and what was done to each weight."""
    if options.precision not in PRECISIONS:
        raise UsageError(
            f"--precision {options.precision!r} is not one of {', '.join(PRECISIONS)}", "pick one of those"
        )
    return _Writer(model, options, log).build()
