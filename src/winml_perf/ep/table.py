"""Every fact about each execution provider, one entry per EP: names, aliases, device classes, provider
options, compile support, io-binding device, roofline memory. Data only, no I/O.

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

Every other fact about an EP lives in its entry too, so adding an EP is one entry here:

* ``compiles``: it writes EPContext models when compiled (QNN, OpenVINO, VitisAI, TensorRT-RTX);
* ``default_options`` / ``option_keys``: provider options added when not given, and the option names it
  parses, per plugin package version (empty: not checked; ep/effective.py checks against the installed
  version's list, else the newest listed). QNN needs ``backend_type=htp``: without it the QNN EP cannot
  even be created ("Could not determine default backend path for device"). QNN and OpenVINO ignore
  unknown keys silently, so their keys are listed: read from the library of each version listed, each
  QNN key confirmed by a session that logs parsing it (see the lists' comments);
* ``name_variants``: other EP names the same library registers (``<name>.<variant>``) and what each is;
* ``device_type_option``: its provider options carry ``device_type``, the resolved device class in
  upper case (OpenVINO, VitisAI);
* ``io_device``: onnxruntime's Python device name for OrtValue / IOBinding placement (``cpu``: tensors
  stay on the host, its device memory is not reachable from onnxruntime's Python API);
* ``memory``: which memory a stage on it reads, for the roofline (``host``: always host memory;
  ``nvidia-gpu``: the NVIDIA GPU's when the device listing says nothing; ``device``: whatever its
  listed device is);
* ``emulated_on_cpu``: the accelerator its CPU-type device emulates (QNN on x86: the HTP emulator);
* ``accuracy_level_kernel``: its MatMulNBits kernel computes at the accuracy_level the model writes (the
  CPU EP; another EP's kernel decides for itself); ``precision_options``: the provider options that set its
  compute precision; ``fp16_option``: the one that turns fp16 compute on, with its default (QNN's HTP);
* ``runtime_builds``: the builds of onnxruntime / onnxruntime-genai made for it, each installing the
  plain module under its own name (onnxruntime-gpu); ``runtime_distributions`` lists them for a version;
* ``genai_unavailable``: what onnxruntime-genai says when its build lacks the EP, and what to call it;
* ``no_device_hint``: why a registered plugin may offer no device here, and what to do;
* ``install_package``: the pip package that brings it to a machine where it is missing;
  ``install_extra``: the winml-perf extra that installs it; ``install_needs``: what else it needs
  (hardware, a driver). ``install_sentence`` makes of them the one sentence README, ``winml devices``
  and every error give for getting the EP.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from winml_perf.model.route import CPU
from winml_perf.support.errors import UsageError

CPU_EP = CPU
"""The CPU EP's name, every session's fallback: model/route.py spells it for the rooms below this one."""
#: How messages name the CPU EP when options were given for it (genai_config takes none for it).
CPU_TAKES_NO_OPTIONS = "the CPU EP (onnxruntime-genai takes no options for it)"

DEVICE_CLASSES: tuple[str, ...] = ("npu", "gpu", "cpu")
"""Concrete device classes, best first (the order ``--device auto`` tries them)."""

HOST_MEMORY, NVIDIA_GPU_MEMORY, DEVICE_MEMORY = "host", "nvidia-gpu", "device"
"""Values of ``EPInfo.memory``."""

_SUFFIX = "executionprovider"


@dataclass(frozen=True)
class DefaultOption:
    """A provider option added when the stage does not give it, nor any key in ``unless``."""

    key: str
    value: str
    unless: tuple[str, ...] = ()


@dataclass(frozen=True)
class OptionKeys:
    """The provider option names one version of an EP's plugin package parses."""

    package: str
    version: str
    keys: frozenset[str]
    #: What a key's value may be, where the EP's own facts say: a set of words, or INTEGER / BOOL01.
    values: tuple[tuple[str, frozenset[str] | str], ...] = ()


@dataclass(frozen=True)
class DeviceFree:
    """Whether one version of an EP's plugin package compiles with no device (registered as ``<EP>.virtual``)."""

    package: str
    version: str
    works: bool
    why: str  # what was measured


@dataclass(frozen=True)
class Fp16Option:
    """A provider option that turns fp16 compute on ('1') or off, what it applies to, and its default."""

    key: str
    default: str
    unit: str  # what computes in fp16: 'HTP'

    def declared(self, options: Mapping[str, object]) -> bool:
        return str(options.get(self.key, self.default)) == "1"

    def text(self, options: Mapping[str, object]) -> str:
        """'HTP fp16 (enable_htp_fp16_precision 1)'."""
        on = self.declared(options)
        return f"{self.unit} {'fp16' if on else 'fp32'} ({self.key} {'1' if on else '0'})"


@dataclass(frozen=True)
class EPInfo:
    name: str
    alias: str
    genai_name: str | None
    devices: tuple[str, ...]
    compiles: bool = False
    extra_spellings: tuple[str, ...] = ()
    default_options: tuple[DefaultOption, ...] = ()
    option_keys: tuple[OptionKeys, ...] = ()
    device_type_option: bool = False
    name_variants: tuple[tuple[str, str], ...] = ()
    io_device: str = "cpu"
    memory: str = DEVICE_MEMORY
    emulated_on_cpu: str | None = None
    install_package: str | None = None
    install_extra: str | None = None
    install_needs: str = ""
    device_free: tuple[DeviceFree, ...] = ()  # measured plugin versions: can they compile device-free?
    accuracy_level_kernel: bool = False
    precision_options: tuple[str, ...] = ()
    fp16_option: Fp16Option | None = None
    runtime_builds: tuple[tuple[str, str], ...] = ()  # (the plain distribution, this EP's build of it)
    genai_unavailable: tuple[str, str] | None = None  # (a regex of genai's load error, what to call the EP)
    no_device_hint: str = ""
    # its sessions may be opened and run in a second thread while onnxruntime-genai runs in the first
    # (the equivalence check's layer passes, equivalence/passes/layers_ahead.py): seen on CPU and on OpenVINO's CPU
    # device; WebGPU over lavapipe crashed (SIGSEGV) in 1 of 20 runs so; the others not tried
    sessions_beside: bool = False

    @property
    def home_device(self) -> str:
        return self.devices[0]

    @property
    def install_sentence(self) -> str:
        """How to get this EP, one sentence from its entry (``install_sentence``); '' for the CPU EP."""
        if self.name == CPU:
            return ""
        if self.install_package is None:
            return (
                f"{self.alias}: no pip package is known here; register its plugin library with"
                f" --ep-library {self.alias}=PATH (or WINML_PERF_EP_LIBRARIES)"
            )
        how = (
            f"pip install -e '.[{self.install_extra}]' ({self.install_package})"
            if self.install_extra
            else f"pip install {self.install_package}"
        )
        return f"{self.alias}: {how}" + (f"; {self.install_needs}" if self.install_needs else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "alias": self.alias,
            "genai_name": self.genai_name,
            "devices": list(self.devices),
            "compiles": self.compiles,
        }


#: Provider option names onnxruntime-qnn 2.7.0 (QNN SDK 2.51.0) parses: the option strings its library holds,
#: each confirmed by a session at log severity 0 given KEY=zz or KEY=1 (it logs the key or its value, or acts on
#: it), except op_packages and enable_htp_spill_fill_buffer, whose strings sit among the parsed keys but whose
#: probe values changed nothing visible.
#: Not here although older lists had them: enable_htp_weight_sharing (no such string in the library) and
#: htp_shared_memory_allocator (only enable_htp_shared_memory_allocator is read): 2.7.0 ignores both silently.
_QNN_2_7_0_KEYS = frozenset(
    {
        "backend_type",
        "backend_path",
        "profiling_level",
        "profiling_file_path",
        "rpc_control_latency",
        "vtcm_mb",
        "htp_performance_mode",
        "qnn_saver_path",
        "qnn_context_priority",
        "htp_graph_finalization_optimization_mode",
        "soc_model",
        "htp_arch",
        "device_id",
        "enable_htp_fp16_precision",
        "offload_graph_io_quantization",
        "enable_htp_spill_fill_buffer",
        "enable_htp_shared_memory_allocator",
        "enable_dx12_shared_memory_allocator",
        "dump_json_qnn_graph",
        "json_qnn_graph_dir",
        "op_affinity",
        "op_packages",
        "extended_udma",
        "disable_file_mapped_weights",
        "skip_qnn_version_check",
        "skip_backend_op_validation",
        "htp_bf16_enable",
        "enable_htp_graph_splitting",
        "htp_graph_splitting_num_prepare_threads",
        "enable_htp_fp16_clamp_overflow",
        "enable_htp_monolithic_lstm",
        "enable_block_quant_weight_optimization",
        "dump_qnn_ir_dlc",
        "dump_qnn_ir_dlc_dir",
        "qnn_ir_backend_path",
        "dump_qnn_ep_input_graph",
        "dump_qnn_ep_input_graph_dir",
        "enable_framework_op_trace",
        "framework_op_trace_dir",
        "enable_vtcm_backup_buffer_sharing",
        "htp_share_resource_optimization",
        "htp_reused_io_limit_mb",
        "enable_htp_prepare_only",
        "enable_htp_prepare_and_load",
        "num_graph_prepare_threads",
        "genie_log_level",
    }
)

INTEGER, BOOL01 = "a non-negative integer", "0 or 1"

#: The values onnxruntime-qnn 2.7.0 takes for the keys whose values are known (QNN_FACTS.md; the QNN EP's
#: option documentation for the word sets). A value outside them runs as something else, or is ignored
#: silently (htp_arch=99), so the record would claim what did not run: refused with exit 2.
_QNN_2_7_0_VALUES: dict[str, frozenset[str] | str] = {
    "backend_type": frozenset({"htp", "cpu", "gpu", "saver", "ir"}),
    "htp_performance_mode": frozenset(
        {
            "burst",
            "balanced",
            "default",
            "high_performance",
            "high_power_saver",
            "low_balanced",
            "extreme_power_saver",
            "low_power_saver",
            "power_saver",
            "sustained_high_performance",
        }
    ),
    "htp_arch": frozenset({"0", "68", "69", "73", "75", "79", "81"}),
    "soc_model": INTEGER,
    "device_id": INTEGER,
    "vtcm_mb": INTEGER,
    "rpc_control_latency": INTEGER,
    "htp_graph_finalization_optimization_mode": frozenset({"0", "1", "2", "3"}),
    "profiling_level": frozenset({"off", "basic", "detailed", "optrace"}),
    "qnn_context_priority": frozenset({"low", "normal", "normal_high", "high"}),
    "enable_htp_fp16_precision": BOOL01,
    "enable_htp_shared_memory_allocator": BOOL01,
    "htp_bf16_enable": BOOL01,
    "enable_htp_graph_splitting": BOOL01,
    "enable_htp_fp16_clamp_overflow": BOOL01,
    "enable_htp_monolithic_lstm": BOOL01,
    "enable_htp_prepare_only": BOOL01,
    "enable_htp_prepare_and_load": BOOL01,
}

#: Provider option names onnxruntime-ep-openvino 1.8.1 parses: the strings next to ``ParseProviderOptions``
#: in libonnxruntime_providers_openvino_plugin.so (device_type is its own entry fact, device_type_option).
_OPENVINO_1_8_1_KEYS = frozenset(
    {
        "device_type",
        "device_id",
        "device_luid",
        "precision",
        "num_of_threads",
        "num_streams",
        "cache_dir",
        "load_config",
        "model_priority",
        "enable_opencl_throttling",
        "enable_qdq_optimizer",
        "enable_causallm",
        "reshape_input",
        "hint_enable_gqa",
        "dump_subgraphs",
    }
)

_TABLE: tuple[EPInfo, ...] = (
    EPInfo(CPU_EP, "cpu", "cpu", ("cpu",), memory=HOST_MEMORY, accuracy_level_kernel=True, sessions_beside=True),
    EPInfo(
        "CUDAExecutionProvider",
        "cuda",
        "cuda",
        ("gpu",),
        io_device="cuda",
        memory=NVIDIA_GPU_MEMORY,
        install_package="onnxruntime-gpu",
        install_needs="it replaces onnxruntime (pip uninstall onnxruntime first); needs an NVIDIA GPU and its driver",
        runtime_builds=(("onnxruntime", "onnxruntime-gpu"), ("onnxruntime-genai", "onnxruntime-genai-cuda")),
        genai_unavailable=(r"Cuda interface not available", "CUDA (onnxruntime-genai-cuda is not installed)"),
    ),
    EPInfo(
        "NvTensorRTRTXExecutionProvider",
        "nv_tensorrt_rtx",
        "NvTensorRtRtx",
        ("gpu",),
        compiles=True,
        extra_spellings=("trt-rtx", "tensorrt-rtx", "trtrtx", "nvtrtrtx", "NvTensorRtRtx"),
        io_device="cuda",
        memory=NVIDIA_GPU_MEMORY,
    ),
    EPInfo(
        "QNNExecutionProvider",
        "qnn",
        "QNN",
        ("npu", "gpu", "cpu"),
        compiles=True,
        default_options=(DefaultOption("backend_type", "htp", unless=("backend_path",)),),
        option_keys=(OptionKeys("onnxruntime-qnn", "2.7.0", _QNN_2_7_0_KEYS, tuple(_QNN_2_7_0_VALUES.items())),),
        emulated_on_cpu="HTP",
        install_package="onnxruntime-qnn",
        install_extra="qnn",
        install_needs="on x86_64 Linux it runs QNN's HTP emulator on the CPU (not NPU speed); an NPU needs a Snapdragon machine",
        device_free=(
            DeviceFree("onnxruntime-qnn", "2.7.0", True, "QNNExecutionProvider.virtual compiles EPContext models"),
        ),
        precision_options=("enable_htp_fp16_precision", "htp_bf16_enable", "enable_htp_fp16_clamp_overflow"),
        fp16_option=Fp16Option("enable_htp_fp16_precision", "1", "HTP"),
        runtime_builds=(("onnxruntime", "onnxruntime-qnn"),),  # the onnxruntime build before the plugin package
    ),
    EPInfo(
        "OpenVINOExecutionProvider",
        "openvino",
        "OpenVINO",
        ("npu", "gpu", "cpu"),
        compiles=True,
        option_keys=(OptionKeys("onnxruntime-ep-openvino", "1.8.1", _OPENVINO_1_8_1_KEYS),),
        device_type_option=True,
        name_variants=(("AUTO", "OpenVINO's AUTO meta-device, which picks the device itself"),),
        install_package="onnxruntime-ep-openvino",
        install_extra="openvino",
        install_needs="it offers devices on Intel hardware only (CPU, GPU, NPU), none on an AMD CPU",
        precision_options=("precision", "load_config"),
        runtime_builds=(("onnxruntime", "onnxruntime-openvino"),),  # replaces onnxruntime, unlike the plugin
        sessions_beside=True,
    ),
    EPInfo(
        "VitisAIExecutionProvider",
        "vitisai",
        "VitisAI",
        ("npu",),
        compiles=True,
        extra_spellings=("vitis-ai",),
        device_type_option=True,
    ),
    EPInfo(
        "DmlExecutionProvider",
        "dml",
        "DML",
        ("gpu", "npu"),
        extra_spellings=("directml",),
        io_device="dml",
        install_package="onnxruntime-directml",
        install_needs="it replaces onnxruntime (pip uninstall onnxruntime first); Windows only",
        runtime_builds=(("onnxruntime", "onnxruntime-directml"), ("onnxruntime-genai", "onnxruntime-genai-directml")),
        genai_unavailable=(r"DML provider requested", "DML (this onnxruntime-genai build has no DirectML)"),
    ),
    EPInfo(
        "WebGpuExecutionProvider",
        "webgpu",
        "WebGPU",
        ("gpu",),
        io_device="webgpu",
        install_package="onnxruntime-ep-webgpu",
        install_extra="webgpu",
        install_needs='needs a GPU with a Vulkan driver on Linux (eval "$(scripts/setup-webgpu-software.sh)" gives a software one)',
        device_free=(
            DeviceFree(
                "onnxruntime-ep-webgpu",
                "0.4.0",
                False,
                "it predates the compile-only mode: compiling on its virtual GPU aborts the process "
                "(an assertion in its BufferManager)",
            ),
        ),
        no_device_hint="no GPU adapter found; ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER=1 before start offers a software one",
    ),
    EPInfo("MIGraphXExecutionProvider", "migraphx", None, ("gpu",)),
    EPInfo("CoreMLExecutionProvider", "coreml", None, ("npu", "gpu", "cpu")),
)

EPS: dict[str, EPInfo] = {info.name: info for info in _TABLE}
"""Canonical name -> EPInfo. Insertion order is the preference order among equally good EPs."""

#: Providers onnxruntime lists that run nothing on a device here: never a route.
IGNORED_PROVIDERS = frozenset({"AzureExecutionProvider"})

#: The builds of each runtime that bring no EP of their own: the plain one, and Windows ML's.
_PLAIN_BUILDS = {
    "onnxruntime": ("onnxruntime", "onnxruntime-winml"),
    "onnxruntime-genai": ("onnxruntime-genai", "onnxruntime-genai-winml"),
}

#: Memory of EPs that are not in the table (no route here forces them) but whose stages a record may
#: name: the TensorRT EP, which onnxruntime-gpu lists next to CUDA.
UNLISTED_MEMORY: Mapping[str, str] = {"TensorrtExecutionProvider": NVIDIA_GPU_MEMORY}


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


def install_sentence(canonical: str) -> str:
    """How to get an EP, one sentence from its table entry, the same in README ("Getting WebGPU,
    QNN, OpenVINO"), `winml devices` and every error: 'qnn: pip install -e '.[qnn]' (onnxruntime-qnn);
    on x86_64 Linux ...'. '' for the CPU EP (always there) and a name not in the table."""
    info = EPS.get(canonical)
    return info.install_sentence if info is not None else ""


def install_sentences() -> list[str]:
    """Every EP's install sentence, in table order (the CPU EP has none)."""
    return [text for text in (install_sentence(name) for name in EPS) if text]


def runtime_distributions(runtime: str) -> tuple[str, ...]:
    """Every distribution that installs ``runtime`` ('onnxruntime' or 'onnxruntime-genai'), in the order a
    version is looked for: the plain one, each EP's build in table order, Windows ML's last."""
    plain, windows_ml = _PLAIN_BUILDS[runtime]
    builds = (build for info in EPS.values() for of, build in info.runtime_builds if of == runtime)
    return (plain, *builds, windows_ml)


def emulator_of(canonical: str) -> str | None:
    """The accelerator an EP's CPU-type device emulates ('HTP' for QNN), or None."""
    info = EPS.get(canonical)
    return info.emulated_on_cpu if info else None


def io_device(canonical: str) -> str:
    """onnxruntime's Python device name for an EP's bound tensors; 'cpu' (the host) for EPs not in the table."""
    info = EPS.get(canonical)
    return info.io_device if info else "cpu"


def memory_of(canonical: str) -> str:
    """Which memory a stage on this EP reads (``EPInfo.memory``); ``device`` for EPs not in the table."""
    info = EPS.get(canonical)
    return info.memory if info else UNLISTED_MEMORY.get(canonical, DEVICE_MEMORY)


def compiles(canonical: str) -> bool:
    """True when the EP writes EPContext models when compiled."""
    info = EPS.get(canonical)
    return bool(info and info.compiles)


def valid_names_text() -> str:
    return ", ".join(f"{info.alias} ({info.name})" for info in _TABLE)


def normalize_ep_name(spelling: str, flag: str = "--ep") -> str:
    """Any spelling of a known EP -> its canonical onnxruntime name; UsageError naming ``flag`` (where the
    spelling came from) and listing valid names."""
    canonical = _LOOKUP.get(_key(spelling or ""))
    if canonical is None:
        raise UsageError(
            f"unknown execution provider {spelling!r} ({flag})",
            remedy=f"use one of: {valid_names_text()}",
        )
    return canonical


def is_known_ep(spelling: str) -> bool:
    return _key(spelling or "") in _LOOKUP


def canonical_ep(name: str) -> str:
    """A known EP's canonical name: ``name`` itself when it is one already (no lookup: a route's EP is
    normalised once, where the route is resolved), else ``normalize_ep_name(name)``."""
    return name if name in EPS else normalize_ep_name(name)


def canonical_or_own(name: str) -> str:
    """A known EP's canonical name (no lookup when ``name`` is one already); an unknown one as written."""
    return name if name in EPS or not is_known_ep(name) else normalize_ep_name(name)


def ep_info(spelling: str) -> EPInfo:
    return EPS[canonical_ep(spelling)]


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
