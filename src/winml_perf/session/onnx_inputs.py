"""Inputs for a plain ONNX model: parse `--shape` / `--input`, plan every input's shape, make the arrays.

Rules (pure functions; only ``plan_inputs`` reads .npy headers and ``materialize`` reads .npy data):

* ``--shape NAME=1x3x224x224`` names an *input* and gives its whole shape ('x' or ',' between dims;
  0 is allowed, e.g. an empty past sequence). ``--shape DIM=N`` names a *symbolic dimension*
  (``dim_param``, e.g. ``seq``) and sets it in every input that uses it. A name that is both an
  input and a dimension means the input.
* ``--input NAME=file.npy`` feeds real data. Its dtype must equal the model's exactly (no silent
  cast) and its shape must fit the input's rank and fixed dimensions.
* A dynamic dimension takes, in order: the input's own ``--shape`` or ``.npy`` shape; the value the
  same symbolic dimension got from another input's ``--shape``/``.npy``; a ``--shape DIM=N``;
  **1 when it is batch-like** (axis 0, or a name containing "batch"); otherwise it is an error that
  names the input, the axis and the dimension, with the flag that fixes it. One symbolic dimension
  must get one value across all inputs.
* Generated data is deterministic per seed: floats uniform in [-1, 1); integers are 1 (a valid
  index, mask value and length for any vocabulary); bools are True. Strings and types numpy cannot
  hold (bfloat16, float8, int4) need ``--input``.

Every mistake raises ``UsageError`` (exit 2) naming the flag, the input and what would fit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from winml_perf.model import flag_bounds
from winml_perf.support.errors import UsageError

ORT_TO_NUMPY: dict[str, Any] = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int8)": np.int8,
    "tensor(int16)": np.int16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
}
BATCH_DEFAULT = 1
_DIM_SPLIT = re.compile(r"[xX,]")

Dim = int | str | None


@dataclass(frozen=True)
class TensorInfo:
    """An input or output as onnxruntime reports it: ``shape`` holds ints (fixed), strings
    (symbolic ``dim_param``) or None (unnamed dynamic)."""

    name: str
    onnx_type: str
    shape: tuple[Dim, ...]

    @property
    def numpy_dtype(self) -> np.dtype | None:
        kind = ORT_TO_NUMPY.get(self.onnx_type)
        return np.dtype(kind) if kind is not None else None

    @classmethod
    def from_node_arg(cls, arg: Any) -> TensorInfo:
        shape = tuple(d if isinstance(d, (int, str)) or d is None else None for d in (arg.shape or ()))
        return cls(arg.name, str(arg.type), shape)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.onnx_type, "shape": list(self.shape)}


@dataclass(frozen=True)
class PlannedInput:
    """One input's concrete shape and where its data comes from ('generated' or 'file')."""

    name: str
    onnx_type: str
    model_shape: tuple[Dim, ...]
    shape: tuple[int, ...]
    source: str
    file: str | None = None
    filled: Mapping[str, str] = field(default_factory=dict)  # "axis k (dim)" -> how it got its value

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.onnx_type,
            "model_shape": list(self.model_shape),
            "shape": list(self.shape),
            "source": self.source,
            "file": self.file,
            "filled": dict(self.filled),
        }


# -- flag parsing -----------------------------------------------------------------------------------
def _split_pair(text: str, flag: str, example: str) -> tuple[str, str]:
    name, sep, value = str(text).rpartition("=")
    if not sep or not name.strip() or not value.strip():
        raise UsageError(f"{flag} {text!r} is not NAME=VALUE", f"e.g. {flag} {example}")
    return name.strip(), value.strip()


def parse_dims(text: str, flag: str = "--shape") -> tuple[int, ...]:
    parts = [p.strip() for p in _DIM_SPLIT.split(text)]
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise UsageError(f"{flag}: {text!r} is not a list of whole numbers", f"e.g. {flag} input=1x3x224x224") from None
    if any(d < 0 for d in dims):
        raise UsageError(f"{flag}: {text!r} has a negative dimension", "dimensions are 0 or more")
    for d in dims:
        flag_bounds.check(flag, d, text)
    return dims


def parse_shapes(values: Iterable[str] | None) -> dict[str, tuple[int, ...]]:
    """``["x=1x3x224x224", "seq=128"]`` -> ``{"x": (1, 3, 224, 224), "seq": (128,)}``."""
    out: dict[str, tuple[int, ...]] = {}
    for text in values or ():
        name, value = _split_pair(text, "--shape", "input=1x3x224x224 or seq=128")
        if name in out:
            raise UsageError(f"--shape gives {name!r} twice", "give each input or dimension once")
        out[name] = parse_dims(value)
    return out


def parse_inputs(values: Iterable[str] | None) -> dict[str, str]:
    """``["x=data/x.npy"]`` -> ``{"x": "data/x.npy"}`` (files are checked by ``plan_inputs``)."""
    out: dict[str, str] = {}
    for text in values or ():
        name, value = _split_pair(text, "--input", "input_ids=ids.npy")
        if name in out:
            raise UsageError(f"--input gives {name!r} twice", "give each input once")
        out[name] = value
    return out


# -- planning ---------------------------------------------------------------------------------------
def _names(infos: Sequence[TensorInfo]) -> str:
    return ", ".join(f"{i.name} {_shape_text(i.shape)}" for i in infos) or "none"


def _shape_text(shape: Sequence[Dim]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _symbolic_dims(infos: Sequence[TensorInfo]) -> set[str]:
    return {d for i in infos for d in i.shape if isinstance(d, str)}


def _check_fits(info: TensorInfo, shape: Sequence[int], what: str, flag: str) -> None:
    if len(shape) != len(info.shape):
        raise UsageError(
            f"{flag}: {what} has rank {len(shape)} {list(shape)}, but input {info.name!r} has rank "
            f"{len(info.shape)} {_shape_text(info.shape)}",
            f"give {len(info.shape)} dimensions",
        )
    for axis, (want, got) in enumerate(zip(info.shape, shape)):
        if isinstance(want, int) and want != got:
            raise UsageError(
                f"{flag}: {what} has {got} at axis {axis}, but input {info.name!r} fixes it to {want} "
                f"(model shape {_shape_text(info.shape)})",
                f"use {want} at axis {axis}",
            )


def _npy_header(path_text: str, info: TensorInfo) -> tuple[tuple[int, ...], np.dtype]:
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"--input {info.name}={path_text}: file not found", "give the path of an existing .npy file")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:
        raise UsageError(
            f"--input {info.name}={path_text}: not a readable .npy array ({exc})",
            "save the data with numpy.save (one array per file, no pickled objects)",
        ) from exc
    if not isinstance(arr, np.ndarray):
        raise UsageError(
            f"--input {info.name}={path_text}: holds several arrays (.npz), not one", "save one array with numpy.save"
        )
    want = info.numpy_dtype
    if want is not None and arr.dtype != want:
        raise UsageError(
            f"--input {info.name}={path_text}: dtype {arr.dtype}, but input {info.name!r} is {info.onnx_type} ({want})",
            f"save it as {want}, e.g. numpy.save(path, data.astype(numpy.{want}))",
        )
    return tuple(int(d) for d in arr.shape), arr.dtype


def _bind(bindings: dict[str, tuple[int, str]], dim: str, value: int, origin: str) -> None:
    known = bindings.get(dim)
    if known is not None and known[0] != value:
        raise UsageError(
            f"dimension {dim!r} gets {known[0]} from {known[1]} but {value} from {origin}",
            "make them agree: one symbolic dimension has one size across all inputs",
        )
    bindings.setdefault(dim, (value, origin))


def _explicit_shapes(
    infos: Sequence[TensorInfo], shapes: Mapping[str, tuple[int, ...]], files: Mapping[str, str]
) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """Per input: the whole shape given by --shape NAME=... or by its .npy file, and its origin."""
    by_name = {i.name: i for i in infos}
    explicit: dict[str, tuple[int, ...]] = {}
    origin: dict[str, str] = {}
    for name, path_text in files.items():
        if name not in by_name:
            raise UsageError(f"--input {name}={path_text}: the model has no input {name!r}", f"inputs: {_names(infos)}")
        shape, _ = _npy_header(path_text, by_name[name])
        _check_fits(by_name[name], shape, f"{path_text} (shape {list(shape)})", f"--input {name}")
        explicit[name], origin[name] = shape, f"--input {name}"
    for name, dims in shapes.items():
        if name not in by_name:
            continue
        _check_fits(by_name[name], dims, "x".join(map(str, dims)) or "()", f"--shape {name}")
        if name in explicit and explicit[name] != dims:
            raise UsageError(
                f"--shape {name}={'x'.join(map(str, dims))} disagrees with --input {name} (shape {list(explicit[name])})",
                f"drop --shape {name}; the file sets the shape",
            )
        explicit.setdefault(name, dims)
        origin.setdefault(name, f"--shape {name}")
    return explicit, origin


def _dim_bindings(
    infos: Sequence[TensorInfo],
    shapes: Mapping[str, tuple[int, ...]],
    explicit: Mapping[str, tuple[int, ...]],
    origin: Mapping[str, str],
) -> dict[str, tuple[int, str]]:
    by_name = {i.name: i for i in infos}
    symbolic = _symbolic_dims(infos)
    bindings: dict[str, tuple[int, str]] = {}
    for name, dims in explicit.items():
        for want, got in zip(by_name[name].shape, dims):
            if isinstance(want, str):
                _bind(bindings, want, got, origin[name])
    for name, dims in shapes.items():
        if name in by_name:
            continue
        if name not in symbolic:
            raise UsageError(
                f"--shape {name}=...: the model has no input or dimension named {name!r}",
                f"inputs: {_names(infos)}; dimensions: {', '.join(sorted(symbolic)) or 'none'}",
            )
        if len(dims) != 1:
            raise UsageError(
                f"--shape {name}={'x'.join(map(str, dims))}: {name!r} is a dimension and takes one number",
                f"e.g. --shape {name}=128",
            )
        _bind(bindings, name, dims[0], f"--shape {name}")
    return bindings


def _batch_like(axis: int, dim: Dim) -> bool:
    return axis == 0 or (isinstance(dim, str) and "batch" in dim.lower())


def _unset_dims(
    infos: Sequence[TensorInfo], bindings: Mapping[str, tuple[int, str]], explicit: Mapping[str, tuple[int, ...]]
) -> list[str]:
    """The named dimensions nothing sets, in input order: a remedy that names one at a time fails when followed."""
    unset: dict[str, None] = {}
    for info in infos:
        if info.name not in explicit:
            for axis, dim in enumerate(info.shape):
                if isinstance(dim, str) and dim not in bindings and not _batch_like(axis, dim):
                    unset.setdefault(dim, None)
    return list(unset)


def _fill(
    info: TensorInfo, bindings: Mapping[str, tuple[int, str]], unset: Sequence[str] = ()
) -> tuple[tuple[int, ...], dict[str, str]]:
    shape: list[int] = []
    filled: dict[str, str] = {}
    for axis, dim in enumerate(info.shape):
        if isinstance(dim, int):
            shape.append(dim)
            continue
        label = f"axis {axis} ({dim or '?'})"
        if isinstance(dim, str) and dim in bindings:
            shape.append(bindings[dim][0])
            filled[label] = bindings[dim][1]
        elif _batch_like(axis, dim):
            shape.append(BATCH_DEFAULT)
            filled[label] = f"batch-like default {BATCH_DEFAULT}"
        else:
            example = "x".join(str(d) if isinstance(d, int) else "N" for d in info.shape)
            fix = f"--shape {dim}=N or " if isinstance(dim, str) else ""
            others = [d for d in unset if d != dim]
            remedy = (
                f"pass {' '.join(f'--shape {d}=N' for d in (dim, *others))} (every dimension that nothing sets)"
                if isinstance(dim, str) and others
                else f"pass {fix}--shape {info.name}={example}"
            )
            raise UsageError(
                f"input {info.name!r} {_shape_text(info.shape)} has a dynamic dimension "
                f"{repr(dim) if isinstance(dim, str) else '(unnamed)'} at axis {axis} that nothing sets",
                remedy,
            )
    return tuple(shape), filled


def plan_inputs(
    infos: Sequence[TensorInfo],
    shapes: Mapping[str, Sequence[int]] | None = None,
    files: Mapping[str, str] | None = None,
) -> list[PlannedInput]:
    """Concrete shape and data source of every model input (see the module doc for the rules)."""
    given = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}
    files = dict(files or {})
    explicit, origin = _explicit_shapes(infos, given, files)
    bindings = _dim_bindings(infos, given, explicit, origin)
    unset = _unset_dims(infos, bindings, explicit)
    planned = []
    for info in infos:
        if info.name not in files and info.numpy_dtype is None:
            raise UsageError(
                f"input {info.name!r} is {info.onnx_type}, which cannot be generated here",
                f"feed it with --input {info.name}=file.npy",
            )
        if info.name in explicit:
            shape, filled = explicit[info.name], {"all axes": origin[info.name]}
        else:
            shape, filled = _fill(info, bindings, unset)
        source = "file" if info.name in files else "generated"
        planned.append(PlannedInput(info.name, info.onnx_type, info.shape, shape, source, files.get(info.name), filled))
    _check_fits_memory(planned)
    return planned


def generated_bytes(p: PlannedInput) -> int:
    """Peak bytes of making one generated input (floats are drawn as float64, then cast)."""
    dtype = np.dtype(ORT_TO_NUMPY[p.onnx_type])
    per: int = dtype.itemsize + (8 if dtype.kind == "f" else 0)
    return math.prod(int(d) for d in p.shape) * per


def _check_fits_memory(planned: Sequence[PlannedInput]) -> None:
    """Refuse, before any allocation, generated inputs larger than the memory available now."""
    import psutil

    sizes = {p.name: generated_bytes(p) for p in planned if p.source == "generated"}
    free = int(psutil.virtual_memory().available)
    if sum(sizes.values()) > free:
        name = max(sizes, key=sizes.__getitem__)
        shape = "x".join(str(d) for d in next(p.shape for p in planned if p.name == name))
        raise UsageError(
            f"--shape: input {name!r} of shape {shape} would take {sizes[name] / 2**30:,.1f} GiB to generate, "
            f"more than the {free / 2**30:.1f} GiB of memory available",
            "give smaller --shape values",
        )


# -- data -------------------------------------------------------------------------------------------
def generate(dtype: np.dtype, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, size=tuple(shape)).astype(dtype)
    return np.ones(tuple(shape), dtype=dtype)  # integers 1, bools True


def materialize(planned: Sequence[PlannedInput], seed: int = 0) -> dict[str, np.ndarray]:
    """The arrays fed each iteration: files loaded (C-contiguous), the rest generated with ``seed``."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for p in planned:
        if p.source == "file":
            assert p.file is not None  # a "file" input names its file (plan_inputs)
            feeds[p.name] = np.ascontiguousarray(np.load(p.file, allow_pickle=False))
        else:
            kind = ORT_TO_NUMPY[p.onnx_type]
            feeds[p.name] = generate(np.dtype(kind), p.shape, rng)
    return feeds
