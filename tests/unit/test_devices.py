"""Device listing and resolution, against fake device lists at the get_ep_devices seam only."""

from __future__ import annotations

from types import SimpleNamespace

import onnxruntime as ort
import pytest

from winml_perf.ep import devices as dev
from winml_perf.ep.devices import (
    EPDevice,
    Target,
    list_ep_devices,
    resolve_device,
    resolve_eps,
    resolve_target,
    target_for,
)
from winml_perf.ep.route_flags import ROUTE_SPEC
from winml_perf.model.runtime import runtime_named
from winml_perf.support.errors import EXIT_USAGE, EPUnavailableError, UsageError

HW = ort.OrtHardwareDeviceType
CPU, CUDA, QNN, OV, DML, WEBGPU = (
    "CPUExecutionProvider",
    "CUDAExecutionProvider",
    "QNNExecutionProvider",
    "OpenVINOExecutionProvider",
    "DmlExecutionProvider",
    "WebGpuExecutionProvider",
)
WEBGPU_LIB = "/opt/plugins/libonnxruntime_providers_webgpu.so"


def fake(ep, hw_type, vendor="AMD", vendor_id=0x1022, device_id=0, library=None, ep_vendor="Microsoft"):
    metadata = {"version": "1.31.1"}
    if library:
        metadata["library_path"] = library
    hw = SimpleNamespace(type=hw_type, vendor=vendor, vendor_id=vendor_id, device_id=device_id, metadata={})
    return SimpleNamespace(ep_name=ep, ep_vendor=ep_vendor, ep_metadata=metadata, ep_options={}, device=hw)


FULL = [  # a machine with an NPU, two GPU stacks and OpenVINO on all three classes
    fake(CPU, HW.CPU),
    fake(OV, HW.CPU, "Intel", 0x8086, ep_vendor="Intel"),
    fake(OV, HW.GPU, "Intel", 0x8086, 0x7D55, ep_vendor="Intel"),
    fake(OV, HW.NPU, "Intel", 0x8086, 0x7D1D, ep_vendor="Intel"),
    fake(QNN, HW.NPU, "Qualcomm", 0x5143),
    fake(CUDA, HW.GPU, "NVIDIA", 0x10DE, 0x2335),
    fake(DML, HW.GPU, "NVIDIA", 0x10DE, 0x2335),
    fake(WEBGPU, HW.GPU, "NVIDIA", 0x10DE, 0x2335, library=WEBGPU_LIB),
]
CPU_ONLY = [fake(CPU, HW.CPU)]
CPU_AND_SOFT_WEBGPU = [fake(CPU, HW.CPU), fake(WEBGPU, HW.CPU, library=WEBGPU_LIB)]


@pytest.fixture
def machine(monkeypatch):
    """Install a fake device list at the seam; returns a setter."""

    def install(raw_devices, providers=("AzureExecutionProvider", "CPUExecutionProvider")):
        monkeypatch.setattr(dev, "_ort_ep_devices", lambda: list(raw_devices))
        monkeypatch.setattr(dev, "_ort_available_providers", lambda: list(providers))

    return install


# --- listing ---------------------------------------------------------------------------------


def test_real_machine_lists_builtin_cpu():
    devices = list_ep_devices()
    cpu = [d for d in devices if d.ep_name == CPU]
    assert cpu and cpu[0].device_type == "cpu" and cpu[0].source == "builtin"
    assert all(d.ep_name != "AzureExecutionProvider" for d in devices)


def test_conversion_of_fake_devices(machine):
    machine(FULL)
    devices = list_ep_devices()
    assert len(devices) == len(FULL)
    webgpu = next(d for d in devices if d.ep_name == WEBGPU)
    assert (webgpu.source, webgpu.library_path, webgpu.device_type) == ("plugin", WEBGPU_LIB, "gpu")
    npu = next(d for d in devices if d.ep_name == OV and d.device_type == "npu")
    assert (npu.hw_vendor, npu.vendor_id, npu.device_id, npu.ep_vendor) == ("Intel", 0x8086, 0x7D1D, "Intel")
    assert not any(d.inferred for d in devices)
    assert EPDevice.from_dict(npu.to_dict()) == npu


def test_fallback_to_available_providers(machine, monkeypatch):
    machine([], providers=["AzureExecutionProvider", CPU, CUDA, "TensorrtExecutionProvider"])

    def broken():
        raise AttributeError("module 'onnxruntime' has no attribute 'get_ep_devices'")

    monkeypatch.setattr(dev, "_ort_ep_devices", broken)
    devices = list_ep_devices()
    assert [(d.ep_name, d.device_type, d.inferred) for d in devices] == [(CPU, "cpu", True), (CUDA, "gpu", True)]


def test_software_webgpu_serves_no_class():
    soft = EPDevice(WEBGPU, "Microsoft", "cpu", "AMD", 0x1022, 0, "plugin", WEBGPU_LIB)
    assert soft.serves == ()
    assert EPDevice(WEBGPU, "Microsoft", "gpu", "NVIDIA", 0x10DE, 1, "plugin", WEBGPU_LIB).serves == ("gpu",)
    assert EPDevice("AcmeExecutionProvider", "Acme", "npu", "Acme", 1, 1, "plugin", "/x.so").serves == ("npu",)


# --- resolve_device / resolve_eps -----------------------------------------------------------


@pytest.mark.parametrize(
    "device,expected",
    [
        ("npu", [QNN, OV]),
        ("gpu", [CUDA, DML, WEBGPU, OV]),  # home-gpu EPs in table order, then OpenVINO (secondary)
        ("cpu", [CPU, OV]),  # the CPU EP is the home EP of cpu
        ("auto", [QNN, OV]),  # auto: npu first
    ],
)
def test_resolve_eps_full_machine(machine, device, expected):
    machine(FULL)
    assert resolve_eps(device) == expected


def test_auto_prefers_gpu_then_cpu(machine):
    machine([fake(CPU, HW.CPU), fake(DML, HW.GPU)])
    assert resolve_device("auto") == "gpu"
    machine(CPU_ONLY)
    assert resolve_device("auto") == "cpu"
    assert resolve_device(None) == "cpu"


def test_unknown_plugin_ep_ranks_after_home_eps_before_secondary(machine):
    machine(
        [
            fake(CPU, HW.CPU),
            fake(DML, HW.NPU),
            fake("AcmeNpuExecutionProvider", HW.NPU, library="/a.so"),
            fake(OV, HW.NPU),
        ]
    )
    assert resolve_eps("npu") == [OV, "AcmeNpuExecutionProvider", DML]


def test_missing_device_class_is_an_error_listing_what_is_here(machine):
    machine(CPU_AND_SOFT_WEBGPU)
    with pytest.raises(EPUnavailableError) as info:
        resolve_device("gpu")
    text = str(info.value)
    assert text.startswith("no gpu device here; available: cpu (CPUExecutionProvider)")
    assert "WebGpuExecutionProvider" in text and "--ep webgpu" in text
    assert info.value.exit_code == EXIT_USAGE
    assert resolve_eps("cpu") == [CPU]  # software WebGPU never stands in for cpu
    # asked by --device (`winml bundle prepare` has no --route): the remedy names --device alone
    assert info.value.remedy.startswith("pick an available device class with --device;")
    with pytest.raises(EPUnavailableError) as spec:
        resolve_device("gpu", flags=ROUTE_SPEC)
    # the class came from a route's device=: the remedy names both, as a --route user gave no --device
    assert spec.value.remedy.startswith("pick an available device class with --device, or device= in --route;")


def test_resolve_device_with_ep(machine):
    machine(FULL)
    assert resolve_device("auto", ep="openvino") == "npu"
    assert resolve_device("gpu", ep=OV) == "gpu"
    with pytest.raises(EPUnavailableError, match="QNNExecutionProvider has no cpu device here"):
        resolve_device("cpu", ep="qnn")
    with pytest.raises(EPUnavailableError, match="VitisAIExecutionProvider is not available here"):
        resolve_device("auto", ep="vitisai")


def test_resolve_device_rejects_unknown_words(machine):
    machine(FULL)
    for word in ("tpu", "config", "gpu0"):
        with pytest.raises(UsageError, match=r"use one of: cpu\|gpu\|npu\|auto$"):
            resolve_device(word)
    assert resolve_device("") == resolve_device(None) == "npu"  # empty means auto


def test_explicit_device_list_needs_no_seam():
    listed = [EPDevice(CPU, "Microsoft", "cpu", "AMD", 1, 0, "builtin")]
    assert resolve_eps("auto", devices=listed) == [CPU]


# --- resolve_target: the precedence matrix ----------------------------------------------------

# (ep, device, runtime) -> expected Target fields (kind, ep, device) or an exception type
DEVICE_VALUES = [None, "cpu", "gpu", "npu", "auto", "config"]
MATRIX = {}
for runtime in ("winml-genai", "winml"):
    MATRIX[(None, None, runtime)] = ("config", None, None) if runtime == "winml-genai" else ("device", QNN, "npu")
    MATRIX[(None, "cpu", runtime)] = ("device", CPU, "cpu")
    MATRIX[(None, "gpu", runtime)] = ("device", CUDA, "gpu")
    MATRIX[(None, "npu", runtime)] = ("device", QNN, "npu")
    MATRIX[(None, "auto", runtime)] = ("device", QNN, "npu")
    MATRIX[(None, "config", runtime)] = ("config", None, None) if runtime == "winml-genai" else UsageError
    MATRIX[("openvino", None, runtime)] = ("ep", OV, "npu")
    MATRIX[("openvino", "cpu", runtime)] = ("ep", OV, "cpu")
    MATRIX[("openvino", "gpu", runtime)] = ("ep", OV, "gpu")
    MATRIX[("openvino", "npu", runtime)] = ("ep", OV, "npu")
    MATRIX[("openvino", "auto", runtime)] = ("ep", OV, "npu")
    MATRIX[("openvino", "config", runtime)] = ("ep", OV, "npu") if runtime == "winml-genai" else UsageError


@pytest.mark.parametrize("ep,device,runtime", sorted(MATRIX, key=repr))
def test_precedence_matrix(machine, ep, device, runtime):
    machine(FULL)
    expected = MATRIX[(ep, device, runtime)]
    if isinstance(expected, type):
        with pytest.raises(expected):
            resolve_target(ep, device, runtime)
        return
    target = resolve_target(ep, device, runtime)
    assert (target.kind, target.ep, target.device) == expected
    assert (target.requested_ep, target.requested_device) == (ep, device)


def test_matrix_covers_every_combination():
    assert len(MATRIX) == 2 * len(DEVICE_VALUES) * 2


def test_target_labels_and_dict(machine):
    machine(FULL)
    assert resolve_target(None, None, "winml-genai").label == "config"
    assert resolve_target("OpenVINO", "gpu", "winml-genai").label == "ep=openvino"
    auto = resolve_target(None, "auto", "winml-genai")
    assert auto.label == "device=npu"
    data = auto.to_dict()
    assert data == {
        "kind": "device",
        "label": "device=npu",
        "requested_ep": None,
        "requested_device": "auto",
        "ep": QNN,
        "device": "npu",
    }
    assert Target.from_dict(data) == auto


def test_target_errors(machine):
    machine(CPU_AND_SOFT_WEBGPU)
    with pytest.raises(UsageError, match="warpdrive"):
        resolve_target("warpdrive", None, "winml-genai")
    with pytest.raises(
        EPUnavailableError,
        match="CUDAExecutionProvider is not available here; available: CPUExecutionProvider, WebGpuExecutionProvider",
    ):
        resolve_target("cuda", None, "winml-genai")
    with pytest.raises(EPUnavailableError, match="no npu device here"):
        resolve_target(None, "npu", "winml")
    with pytest.raises(EPUnavailableError, match="WebGpuExecutionProvider has no gpu device here"):
        resolve_target("webgpu", "gpu", "winml-genai")
    with pytest.raises(UsageError, match=r"cpu\|gpu\|npu\|auto\|config"):
        resolve_target(None, "tpu", "winml-genai")
    with pytest.raises(UsageError, match="runtime"):
        resolve_target(None, None, "tensorflow")
    with pytest.raises(UsageError, match="--device config"):
        resolve_target("cpu", "config", "winml")


def test_software_webgpu_reachable_by_ep_only(machine):
    machine(CPU_AND_SOFT_WEBGPU)
    target = resolve_target("webgpu", None, "winml-genai")
    assert (target.kind, target.ep, target.device, target.label) == ("ep", WEBGPU, "cpu", "ep=webgpu")
    assert resolve_target(None, "cpu", "winml-genai").ep == CPU


# --- an emulated NPU (QNN's HTP emulator on x86) -------------------------------------------------
QNN_EMULATOR = [
    fake(CPU, HW.CPU),
    fake(QNN, HW.CPU, "AMD", 0x1022, library="/opt/libonnxruntime_providers_qnn.so", ep_vendor="Qualcomm"),
]


def test_an_emulated_htp_device_is_no_npu_and_says_to_use_ep_qnn(machine):
    machine(QNN_EMULATOR)
    (qnn,) = [d for d in list_ep_devices() if d.ep_name == QNN]
    assert qnn.emulated and qnn.serves == () and qnn.to_dict()["emulated"] is True
    with pytest.raises(EPUnavailableError) as info:
        resolve_target(None, "npu", "winml-genai")
    assert info.value.exit_code == EXIT_USAGE
    assert "QNN is installed but offers only an emulated HTP device of type CPU; use --ep qnn" in str(info.value)
    assert resolve_target(None, "cpu", "winml-genai").ep == CPU  # never the emulator for --device cpu
    assert resolve_target("qnn", None, "winml-genai").device == "cpu"  # --ep qnn reaches it
    assert dev.emulated_eps() == [QNN]


def test_the_emulated_npu_remedy_gives_the_route_form_too(machine):
    # `--route device=npu` gets the same refusal; `--ep qnn` beside --route is refused, so the remedy
    # names the route's spelling as well
    machine(QNN_EMULATOR)
    with pytest.raises(EPUnavailableError) as info:
        target_for(None, "npu", runtime_named("winml-genai"), flags=ROUTE_SPEC)
    assert "use --ep qnn, or ep=qnn in --route (its timings" in str(info.value)
    assert "serves no --device class (use --ep qnn, or ep=qnn in --route)" in str(info.value)  # the remedy too
    with pytest.raises(EPUnavailableError) as info:  # `winml bundle prepare --device npu` has no --route
        resolve_target(None, "npu", "winml-genai")
    assert "use --ep qnn (its timings" in str(info.value) and "--route" not in str(info.value)


def test_a_routes_emulated_eps_are_those_it_takes_and_a_cpu_route_asks_no_device(machine, monkeypatch):
    """The record's route.emulated (measure/genai_route.py, measure/onnx_route.py): the route's EPs
    that offer only an emulator here; a route on the CPU EP alone lists no device."""
    machine(QNN_EMULATOR)
    assert dev.emulated_among([QNN, CPU, None]) == (QNN,)
    assert dev.emulated_among([CPU]) == ()
    monkeypatch.setattr(dev, "_ort_ep_devices", lambda: pytest.fail("a CPU route listed the devices"))
    assert dev.emulated_among([CPU, None]) == ()
    machine(FULL)
    assert dev.emulated_among([QNN]) == ()


def test_a_real_qnn_npu_is_not_emulated(machine):
    machine(FULL)
    assert not any(d.emulated for d in list_ep_devices())
    assert dev.emulated_eps() == []
