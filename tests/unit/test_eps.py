"""EP name table: every canonical name, alias and common spelling maps to one EP."""

from __future__ import annotations

import pytest

from winml_perf.ep.table import (
    _TABLE,
    DEVICE_CLASSES,
    EPS,
    ep_alias,
    ep_from_genai_provider,
    genai_provider_name,
    normalize_ep_name,
)
from winml_perf.support.errors import EXIT_USAGE, UsageError

#: Every canonical name, in the table's order (its preference order among equally good EPs).
CANONICAL = list(EPS)

#: The EPs the table has held since issue 38, in their preference order: none may go, be renamed or move
#: (a new EP may sit anywhere among them).
KNOWN_ORDER = [
    "CPUExecutionProvider",
    "CUDAExecutionProvider",
    "NvTensorRTRTXExecutionProvider",
    "QNNExecutionProvider",
    "OpenVINOExecutionProvider",
    "VitisAIExecutionProvider",
    "DmlExecutionProvider",
    "WebGpuExecutionProvider",
    "MIGraphXExecutionProvider",
    "CoreMLExecutionProvider",
]

# spelling -> canonical
SPELLINGS = {
    "cpu": "CPUExecutionProvider",
    "CPU": "CPUExecutionProvider",
    "cpuexecutionprovider": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "CUDA": "CUDAExecutionProvider",
    "nv_tensorrt_rtx": "NvTensorRTRTXExecutionProvider",
    "trt-rtx": "NvTensorRTRTXExecutionProvider",
    "TRT_RTX": "NvTensorRTRTXExecutionProvider",
    "tensorrt-rtx": "NvTensorRTRTXExecutionProvider",
    "NvTensorRtRtx": "NvTensorRTRTXExecutionProvider",
    "nvtensorrtrtx": "NvTensorRTRTXExecutionProvider",
    "NvTensorRtRtxExecutionProvider": "NvTensorRTRTXExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "QNN": "QNNExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "OpenVINO": "OpenVINOExecutionProvider",
    "open-vino": "OpenVINOExecutionProvider",
    "vitisai": "VitisAIExecutionProvider",
    "VitisAI": "VitisAIExecutionProvider",
    "vitis-ai": "VitisAIExecutionProvider",
    "dml": "DmlExecutionProvider",
    "DML": "DmlExecutionProvider",
    "directml": "DmlExecutionProvider",
    "DirectML": "DmlExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
    "WebGPU": "WebGpuExecutionProvider",
    "web_gpu": "WebGpuExecutionProvider",
    "WebGPUExecutionProvider": "WebGpuExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "MIGraphX": "MIGraphXExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "CoreML": "CoreMLExecutionProvider",
    "  cuda  ": "CUDAExecutionProvider",
}

ALIASES = {
    "CPUExecutionProvider": "cpu",
    "CUDAExecutionProvider": "cuda",
    "NvTensorRTRTXExecutionProvider": "nv_tensorrt_rtx",
    "QNNExecutionProvider": "qnn",
    "OpenVINOExecutionProvider": "openvino",
    "VitisAIExecutionProvider": "vitisai",
    "DmlExecutionProvider": "dml",
    "WebGpuExecutionProvider": "webgpu",
    "MIGraphXExecutionProvider": "migraphx",
    "CoreMLExecutionProvider": "coreml",
}

# onnxruntime-genai's own names (its NormalizeProviderName), as used in provider_options
GENAI = {
    "CPUExecutionProvider": "cpu",
    "CUDAExecutionProvider": "cuda",
    "NvTensorRTRTXExecutionProvider": "NvTensorRtRtx",
    "QNNExecutionProvider": "QNN",
    "OpenVINOExecutionProvider": "OpenVINO",
    "VitisAIExecutionProvider": "VitisAI",
    "DmlExecutionProvider": "DML",
    "WebGpuExecutionProvider": "WebGPU",
}


def test_the_known_eps_keep_their_names_and_order():
    assert [name for name in CANONICAL if name in KNOWN_ORDER] == KNOWN_ORDER


def test_each_entry_is_one_ep_under_every_spelling_it_gives():
    """A new entry's alias or spelling may not take another EP's (the lookup would hand it over silently)."""
    assert len(_TABLE) == len(EPS) and len({info.alias for info in _TABLE}) == len(_TABLE)
    for info in _TABLE:
        assert info.name.endswith("ExecutionProvider") and info.name == info.name.strip(), info.name
        for spelling in (info.name, info.alias, *info.extra_spellings, *filter(None, [info.genai_name])):
            assert normalize_ep_name(spelling) == info.name, (spelling, info.name)


@pytest.mark.parametrize("name", CANONICAL)
def test_canonical_name_and_suffixless_form_normalise_to_itself(name):
    assert normalize_ep_name(name) == name
    assert normalize_ep_name(name.lower()) == name
    assert normalize_ep_name(name[: -len("ExecutionProvider")]) == name


@pytest.mark.parametrize("spelling,canonical", sorted(SPELLINGS.items()))
def test_spelling_normalises(spelling, canonical):
    assert normalize_ep_name(spelling) == canonical


@pytest.mark.parametrize("canonical,alias", sorted(ALIASES.items()))
def test_alias_round_trip(canonical, alias):
    assert ep_alias(canonical) == alias
    assert normalize_ep_name(alias) == canonical
    assert ep_alias(alias) == alias


def test_unknown_ep_lists_valid_names():
    with pytest.raises(UsageError) as info:
        normalize_ep_name("warpdrive")
    text = str(info.value)
    assert "warpdrive" in text and "--ep" in text
    for alias in ALIASES.values():
        assert alias in text
    assert info.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("bad", ["", "ExecutionProvider", "tensorrt", "rocm"])
def test_not_an_ep(bad):
    with pytest.raises(UsageError):
        normalize_ep_name(bad)


def test_unknown_plugin_ep_keeps_its_name_as_alias():
    assert ep_alias("AcmeNpuExecutionProvider") == "AcmeNpuExecutionProvider"


@pytest.mark.parametrize("canonical,genai", sorted(GENAI.items()))
def test_genai_provider_names_and_reverse(canonical, genai):
    assert genai_provider_name(canonical) == genai
    assert ep_from_genai_provider(genai) == canonical
    assert ep_from_genai_provider(genai.upper()) == canonical
    assert ep_from_genai_provider(genai + "ExecutionProvider") == canonical


@pytest.mark.parametrize("canonical", ["MIGraphXExecutionProvider", "CoreMLExecutionProvider"])
def test_genai_has_no_name_for_migraphx_or_coreml(canonical):
    with pytest.raises(UsageError, match="no provider name"):
        genai_provider_name(canonical)


def test_unknown_genai_provider_key():
    with pytest.raises(UsageError, match="provider_options"):
        ep_from_genai_provider("warpdrive")


def test_devices_home_first_and_compiles():
    for info in EPS.values():
        assert info.devices and set(info.devices) <= set(DEVICE_CLASSES)
        assert info.home_device == info.devices[0]
    assert EPS["QNNExecutionProvider"].devices == ("npu", "gpu", "cpu")
    assert EPS["WebGpuExecutionProvider"].devices == ("gpu",)
    assert EPS["CPUExecutionProvider"].devices == ("cpu",)
    compiling = {name for name, info in EPS.items() if info.compiles}
    assert compiling == {
        "QNNExecutionProvider",
        "OpenVINOExecutionProvider",
        "VitisAIExecutionProvider",
        "NvTensorRTRTXExecutionProvider",
    }
