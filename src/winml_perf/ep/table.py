"""Execution-provider names, aliases and the device classes each EP serves. Data only, no I/O.

Three spellings of one EP meet in this tool:

* the canonical onnxruntime name (``QNNExecutionProvider``), as ``get_ep_devices()`` reports it;
* a short alias people type on the command line (``qnn``);
* the key onnxruntime-genai uses inside ``provider_options`` (``QNN``).

Spellings for ``normalize_ep_name`` are compared case-insensitively, with or without the
``ExecutionProvider`` suffix, ignoring ``-``, ``_``, spaces and dots (so ``trt-rtx``,
``NvTensorRtRtx``, ``nv_tensorrt_rtx`` and ``NvTensorRTRTXExecutionProvider`` are all one EP).

Genai names follow onnxruntime-genai's own provider-name normalisation (src/config.cpp,
``NormalizeProviderName``): cpu, cuda, QNN, WebGPU, DML, OpenVINO, VitisAI, NvTensorRtRtx. Genai has
no provider name for MIGraphX or CoreML (its AMD GPU path is a separate ``AMDGPU`` EP), so their
``genai_name`` is ``None`` and ``genai_provider_name`` refuses them with a clear error.

``devices`` lists the device classes an EP serves, home device first. Choices worth stating:

* QNN: npu, gpu, cpu (HTP backend first; the GPU and CPU backends exist but are not why one uses it).
* OpenVINO: npu, gpu, cpu. Its ``device_type`` picks any of the three; it is listed NPU-first because
  on the machines this tool targets (Intel Core Ultra laptops) OpenVINO is *the* NPU route, while for
  a GPU the dedicated GPU EPs rank ahead of it ("home" decides ties in ``devices.resolve_eps``).
* VitisAI: npu (its CPU part is only a fallback for unsupported ops).
* DML: gpu, npu (DirectML can drive some NPUs on Windows).
* CoreML: npu, gpu, cpu (Apple Neural Engine first; CoreML's compute units span all three).
* WebGPU, CUDA, NvTensorRTRTX, MIGraphX: gpu only. A WebGPU device on a software adapter reports
  hardware type CPU; it then serves no device class (see devices.py) and is reachable by ``--ep`` only.

``compiles`` marks EPs that write EPContext models when compiled (QNN, OpenVINO, VitisAI, TensorRT-RTX).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from winml_perf.support.errors import UsageError

DEVICE_CLASSES: tuple[str, ...] = ("npu", "gpu", "cpu")
"""Concrete device classes, best first (the order ``--device auto`` tries them)."""

_SUFFIX = "executionprovider"


@dataclass(frozen=True)
class EPInfo:
    name: str
    alias: str
    genai_name: str | None
    devices: tuple[str, ...]
    compiles: bool
    extra_spellings: tuple[str, ...] = ()

    @property
    def home_device(self) -> str:
        return self.devices[0]

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "alias": self.alias,
            "genai_name": self.genai_name,
            "devices": list(self.devices),
            "compiles": self.compiles,
        }


_TABLE: tuple[EPInfo, ...] = (
    EPInfo("CPUExecutionProvider", "cpu", "cpu", ("cpu",), False),
    EPInfo("CUDAExecutionProvider", "cuda", "cuda", ("gpu",), False),
    EPInfo(
        "NvTensorRTRTXExecutionProvider",
        "nv_tensorrt_rtx",
        "NvTensorRtRtx",
        ("gpu",),
        True,
        ("trt-rtx", "tensorrt-rtx", "trtrtx", "nvtrtrtx", "NvTensorRtRtx"),
    ),
    EPInfo("QNNExecutionProvider", "qnn", "QNN", ("npu", "gpu", "cpu"), True),
    EPInfo("OpenVINOExecutionProvider", "openvino", "OpenVINO", ("npu", "gpu", "cpu"), True),
    EPInfo("VitisAIExecutionProvider", "vitisai", "VitisAI", ("npu",), True, ("vitis-ai",)),
    EPInfo("DmlExecutionProvider", "dml", "DML", ("gpu", "npu"), False, ("directml",)),
    EPInfo("WebGpuExecutionProvider", "webgpu", "WebGPU", ("gpu",), False),
    EPInfo("MIGraphXExecutionProvider", "migraphx", None, ("gpu",), False),
    EPInfo("CoreMLExecutionProvider", "coreml", None, ("npu", "gpu", "cpu"), False),
)

EPS: dict[str, EPInfo] = {info.name: info for info in _TABLE}
"""Canonical name -> EPInfo. Insertion order is the preference order among equally good EPs."""


def _key(spelling: str) -> str:
    key = re.sub(r"[\s_\-.]", "", spelling.strip().lower())
    if key.endswith(_SUFFIX) and len(key) > len(_SUFFIX):
        key = key[: -len(_SUFFIX)]
    return key


def _build_lookup() -> dict[str, str]:
    lookup: dict[str, str] = {}
    for info in _TABLE:
        spellings = (info.name, info.alias, *(info.extra_spellings), *((info.genai_name,) if info.genai_name else ()))
        for spelling in spellings:
            lookup[_key(spelling)] = info.name
    return lookup


_LOOKUP = _build_lookup()


#: The pip package that brings an EP to a machine where it is missing (plugin EPs and EP builds).
INSTALL_PACKAGES: dict[str, str] = {
    "QNNExecutionProvider": "onnxruntime-qnn",
    "WebGpuExecutionProvider": "onnxruntime-ep-webgpu",
    "OpenVINOExecutionProvider": "onnxruntime-openvino",
    "CUDAExecutionProvider": "onnxruntime-gpu",
    "DmlExecutionProvider": "onnxruntime-directml",
}


#: EPs whose device of hardware type CPU is an emulator of their accelerator (QNN on x86: the HTP emulator).
EMULATED_ON_CPU: dict[str, str] = {"QNNExecutionProvider": "HTP"}


def install_hint(canonical: str) -> str:
    """'install onnxruntime-qnn (pip install onnxruntime-qnn)', or '' for an EP with no known package."""
    package = INSTALL_PACKAGES.get(canonical)
    return f"install {package} (pip install {package})" if package else ""


def valid_names_text() -> str:
    return ", ".join(f"{info.alias} ({info.name})" for info in _TABLE)


def normalize_ep_name(spelling: str) -> str:
    """Any spelling of a known EP -> its canonical onnxruntime name; UsageError listing valid names."""
    canonical = _LOOKUP.get(_key(spelling or ""))
    if canonical is None:
        raise UsageError(
            f"unknown execution provider {spelling!r} (--ep)",
            remedy=f"use one of: {valid_names_text()}",
        )
    return canonical


def is_known_ep(spelling: str) -> bool:
    return _key(spelling or "") in _LOOKUP


def ep_info(spelling: str) -> EPInfo:
    return EPS[normalize_ep_name(spelling)]


def ep_alias(canonical: str) -> str:
    """Canonical (or any) spelling -> short alias, e.g. 'cpu', 'webgpu'.

    An EP this table does not know (a third-party plugin) keeps its own name, so route labels
    and derived-bundle keys stay readable.
    """
    if not is_known_ep(canonical):
        return canonical
    return ep_info(canonical).alias


def genai_provider_name(canonical: str) -> str:
    """Key onnxruntime-genai uses for this EP inside ``provider_options`` (e.g. 'QNN', 'WebGPU')."""
    info = ep_info(canonical)
    if info.genai_name is None:
        raise UsageError(
            f"onnxruntime-genai has no provider name for {info.name}",
            remedy="pick an EP genai can route to: " + ", ".join(i.alias for i in _TABLE if i.genai_name is not None),
        )
    return info.genai_name


def ep_from_genai_provider(key: str) -> str:
    """A ``provider_options`` key from genai_config.json -> canonical EP name.

    Case-insensitive, ``ExecutionProvider`` suffix optional (as genai itself reads it).
    """
    canonical = _LOOKUP.get(_key(key or ""))
    if canonical is None:
        raise UsageError(
            f"unknown provider {key!r} in provider_options",
            remedy="genai provider names known here: "
            + ", ".join(i.genai_name for i in _TABLE if i.genai_name is not None),
        )
    return canonical
