"""ep/table.py is the one place that holds EP facts: every consumer asks an EP's entry, so changing the
entry changes what the consumer does, and no module keeps its own copy of a fact."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from tests.unit.bundle_fakes import FLAT_CPU, ep_target, make_bundle
from winml_perf.bundle.config import load_config
from winml_perf.bundle.epcontext import compile as compiler
from winml_perf.bundle.routing import plan_route
from winml_perf.ep import options as epo
from winml_perf.ep import table as eps
from winml_perf.ep.devices import EPDevice
from winml_perf.ep.effective import effective_options
from winml_perf.record import device_bandwidth as bandwidth
from winml_perf.support.errors import UsageError

CPU, CUDA, QNN = "CPUExecutionProvider", "CUDAExecutionProvider", "QNNExecutionProvider"
OPENVINO, WEBGPU = "OpenVINOExecutionProvider", "WebGpuExecutionProvider"


def _replace(monkeypatch, name: str, **changes) -> None:
    monkeypatch.setitem(eps.EPS, name, dataclasses.replace(eps.EPS[name], **changes))


def _env(*rows, gpus=()):
    return {
        "ep_devices": {"devices": [dict(zip(("ep_name", "device_type", "vendor_id"), r)) for r in rows]},
        "gpu": {"gpus": [{"vendor": "NVIDIA", "name": g} for g in gpus]},
    }


QNN_DEFAULT = (eps.DefaultOption("backend_type", "htp", unless=("backend_path",)),)
#: The facts each EP's entry holds where they differ from EPInfo's defaults (what the modules used to keep).
FACTS = {
    CPU: {"memory": "host"},
    CUDA: {"io_device": "cuda", "memory": "nvidia-gpu", "install_package": "onnxruntime-gpu"},
    "NvTensorRTRTXExecutionProvider": {"compiles": True, "io_device": "cuda", "memory": "nvidia-gpu"},
    QNN: {
        "compiles": True,
        "default_options": QNN_DEFAULT,
        "option_keys": [("onnxruntime-qnn", "2.7.0", 46)],
        "emulated_on_cpu": "HTP",
        "install_package": "onnxruntime-qnn",
        "install_extra": "qnn",
        "device_free": [("onnxruntime-qnn", "2.7.0", True)],
    },
    OPENVINO: {
        "compiles": True,
        "device_type_option": True,
        "option_keys": [("onnxruntime-ep-openvino", "1.8.1", 15)],
        "name_variants": (("AUTO", "OpenVINO's AUTO meta-device, which picks the device itself"),),
        "install_package": "onnxruntime-ep-openvino",  # the plugin EP (onnxruntime-openvino replaces onnxruntime)
        "install_extra": "openvino",
    },
    "VitisAIExecutionProvider": {"compiles": True, "device_type_option": True},
    "DmlExecutionProvider": {"io_device": "dml", "install_package": "onnxruntime-directml"},
    WEBGPU: {
        "io_device": "webgpu",
        "install_package": "onnxruntime-ep-webgpu",
        "install_extra": "webgpu",
        "device_free": [("onnxruntime-ep-webgpu", "0.4.0", False)],
    },
    "MIGraphXExecutionProvider": {},
    "CoreMLExecutionProvider": {},
}


def _facts(info: eps.EPInfo) -> dict:
    defaults = {f.name: f.default for f in dataclasses.fields(eps.EPInfo)}
    spellings = {"name", "alias", "genai_name", "devices", "extra_spellings", "install_needs"}  # prose: README's test
    out = {name: getattr(info, name) for name in defaults.keys() - spellings if getattr(info, name) != defaults[name]}
    if "option_keys" in out:
        out["option_keys"] = [(t.package, t.version, len(t.keys)) for t in out["option_keys"]]
    if "device_free" in out:
        out["device_free"] = [(d.package, d.version, d.works) for d in out["device_free"]]
    return out


@pytest.mark.parametrize("name", sorted(FACTS))
def test_the_entries_hold_the_facts_the_modules_used_to_keep(name):
    assert _facts(eps.EPS[name]) == FACTS[name]


def test_qnn_keys_and_eps_outside_the_table():
    assert {"backend_type", "backend_path", "soc_model", "htp_arch"} <= eps.EPS[QNN].option_keys[0].keys
    assert eps.memory_of("TensorrtExecutionProvider") == eps.NVIDIA_GPU_MEMORY  # listed by onnxruntime-gpu
    assert eps.memory_of("AcmeExecutionProvider") == eps.DEVICE_MEMORY
    assert eps.io_device("AcmeExecutionProvider") == "cpu" and not eps.compiles("AcmeExecutionProvider")


@pytest.mark.parametrize(
    "module,copy",
    [
        ("winml_perf.session.onnx_session", "IO_DEVICE_TYPES"),
        ("winml_perf.record.device_bandwidth", "NVIDIA_EPS"),
        ("winml_perf.bundle.routing", "DEVICE_TYPE_EPS"),
        ("winml_perf.ep.options", "DEFAULTS"),
        ("winml_perf.ep.options", "KNOWN_KEYS"),
        ("winml_perf.ep.table", "EMULATED_ON_CPU"),
        ("winml_perf.ep.table", "INSTALL_PACKAGES"),
    ],
)
def test_no_module_keeps_its_own_copy_of_an_ep_fact(module, copy):
    assert not hasattr(importlib.import_module(module), copy)


def test_io_binding_device_and_roofline_memory_come_from_the_entry(monkeypatch):
    for name, info in eps.EPS.items():
        assert eps.io_device(name) == info.io_device and eps.memory_of(name) == info.memory
    _replace(monkeypatch, WEBGPU, io_device="cuda", memory=eps.HOST_MEMORY)
    assert eps.io_device(WEBGPU) == "cuda"
    assert bandwidth.stage_device("webgpu", _env((WEBGPU, "gpu", 0x10DE))).label == "host (WEBGPU EP)"
    _replace(monkeypatch, CPU, memory=eps.DEVICE_MEMORY)
    assert bandwidth.stage_device(CPU, _env()).device == bandwidth.UNKNOWN
    _replace(monkeypatch, OPENVINO, memory=eps.NVIDIA_GPU_MEMORY)
    assert bandwidth.stage_device(OPENVINO, _env(gpus=["NVIDIA H200"])).device == bandwidth.NVIDIA_GPU


def test_compile_support_and_the_emulator_come_from_the_entry(monkeypatch):
    assert not compiler._compiles(CUDA)
    _replace(monkeypatch, CUDA, compiles=True)
    assert compiler._compiles(CUDA)
    webgpu_on_cpu = EPDevice(WEBGPU, "Microsoft", "cpu", "AMD", 0x1022, 0, "plugin", "/x.so")
    assert not webgpu_on_cpu.emulated
    _replace(monkeypatch, WEBGPU, emulated_on_cpu="GPU")
    assert webgpu_on_cpu.emulated and webgpu_on_cpu.serves == ()
    label = bandwidth.stage_device(WEBGPU, _env((WEBGPU, "cpu", 0x1022))).label
    assert label == "host (WebGPU GPU emulator, emulated)"


def test_provider_options_come_from_the_entry(monkeypatch, tmp_path):
    _replace(
        monkeypatch,
        CUDA,
        default_options=(eps.DefaultOption("arena", "on", unless=("no_arena",)),),
        option_keys=(eps.OptionKeys("onnxruntime-gpu", "1.0", frozenset({"arena", "no_arena"})),),
        device_type_option=True,
    )
    assert epo.with_defaults(CUDA, {}) == {"arena": "on"}
    assert epo.with_defaults(CUDA, {"no_arena": "1"}) == {"no_arena": "1"}
    with pytest.raises(UsageError, match="has no provider option 'bogus'"):
        effective_options(CUDA, "gpu", {"bogus": "1"}, version=lambda _ep: "1.0", names=lambda _ep: ())
    plan = plan_route(load_config(make_bundle(tmp_path, FLAT_CPU)), ep_target("cuda"))
    assert plan.stages[0].provider_options_after == ({"cuda": {"arena": "on", "device_type": "GPU"}},)
    assert eps.install_sentence(CUDA).startswith("cuda: pip install onnxruntime-gpu; it replaces onnxruntime")
    _replace(monkeypatch, CUDA, install_package=None)
    assert eps.install_sentence(CUDA).startswith("cuda: no pip package is known here; register its plugin library")
