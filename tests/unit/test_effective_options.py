"""Issue 23, findings 6, 8, 9, 11: one decision (ep/effective.py) gives a forced route's provider options,
device_type and EP name, and `bundle show`, `bundle prepare`, `perf`, the record and the cache key read it.
OpenVINO offers no device on the CI's AMD CPU, so its routes run against fake device lists at the
get_ep_devices seam (two EP names, as the plugin registers them on an Intel host)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import onnxruntime as ort
import pytest
from typer.testing import CliRunner

from tests.unit.bundle_fakes import FLAT_CPU, ep_target, make_bundle
from winml_perf.bundle import derive
from winml_perf.bundle.prepare import plan_for
from winml_perf.cli import app
from winml_perf.ep import devices as dev
from winml_perf.ep import effective
from winml_perf.ep import table as eps
from winml_perf.ep.effective import effective_options
from winml_perf.support.errors import EXIT_USAGE, UsageError, WinmlPerfError

HW = ort.OrtHardwareDeviceType
CPU, QNN, OV = "CPUExecutionProvider", "QNNExecutionProvider", "OpenVINOExecutionProvider"
OV_AUTO = OV + ".AUTO"


def _device(ep, hw_type, vendor="Intel", vendor_id=0x8086):
    hw = SimpleNamespace(type=hw_type, vendor=vendor, vendor_id=vendor_id, device_id=0, metadata={})
    return SimpleNamespace(ep_name=ep, ep_vendor="Intel", ep_metadata={}, ep_options={}, device=hw)


#: The H200 machine's Intel Xeon host: OpenVINO offers its CPU under two EP names.
INTEL_HOST = [_device(CPU, HW.CPU), _device(OV, HW.CPU), _device(OV_AUTO, HW.CPU)]


@pytest.fixture
def intel_host(monkeypatch):
    monkeypatch.setattr(dev, "_ort_ep_devices", lambda: list(INTEL_HOST))
    monkeypatch.setattr(dev, "_ort_available_providers", lambda: ["CPUExecutionProvider"])


def _show(bundle, *args) -> tuple[int, dict]:
    """(exit code as cli.main gives it, the JSON document or {'error': message and remedy})."""
    result = CliRunner().invoke(app, ["bundle", "show", str(bundle), "--format", "json", *args])
    if isinstance(result.exception, WinmlPerfError):
        return result.exception.exit_code, {"error": f"{result.exception} {result.exception.remedy}"}
    return result.exit_code, (json.loads(result.stdout) if result.exit_code == 0 else {"error": result.output})


def _options(doc: dict) -> dict:
    (entry,) = doc["stages"][0]["provider_options_after"]
    return next(iter(entry.values()))


# --- finding 9: an unknown key is refused, naming the accepted ones ----------------------------


def test_bogus_key_exits_2_naming_the_accepted_keys(tmp_path, intel_host):
    """Fails on main: `bundle show --ep openvino --ep-option bogus_key=1` exited 0."""
    code, doc = _show(make_bundle(tmp_path, FLAT_CPU), "--ep", "openvino", "--ep-option", "bogus_key=1")
    assert code == EXIT_USAGE
    assert "bogus_key" in doc["error"] and "device_type" in doc["error"] and "num_streams" in doc["error"]


def test_unknown_key_names_the_version_it_was_checked_against():
    with pytest.raises(UsageError, match=r"onnxruntime-ep-openvino 1\.8\.1") as raised:
        effective_options(OV, "cpu", {"bogus_key": "1"}, version=lambda _ep: "1.8.1", names=lambda _ep: ())
    assert "cache_dir" in raised.value.remedy
    newer = effective_options(QNN, "npu", {"soc_model": "60"}, version=lambda _ep: "9.9.9", names=lambda _ep: ())
    assert newer.keys_checked_against == "onnxruntime-qnn 2.7.0"  # the newest list, said in the record
    with pytest.raises(UsageError, match="9.9.9 is installed and not in ep/table.py"):
        effective_options(QNN, "npu", {"bogus": "1"}, version=lambda _ep: "9.9.9", names=lambda _ep: ())


# --- finding 6: QNN 2.7.0's keys are the ones it parses -----------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "htp_share_resource_optimization",
        "enable_htp_prepare_and_load",
        "htp_reused_io_limit_mb",
        "genie_log_level",
        "enable_block_quant_weight_optimization",
        "skip_backend_op_validation",
    ],
)
def test_qnn_2_7_0_accepts_keys_it_parses(key):
    """Fails on main: these keys, which onnxruntime-qnn 2.7.0 parses (its session logs them), were refused."""
    decided = effective_options(QNN, "npu", {key: "1"}, version=lambda _ep: "2.7.0", names=lambda _ep: ())
    assert decided.for_stage({})[key] == "1"


@pytest.mark.parametrize("key", ["enable_htp_weight_sharing", "htp_shared_memory_allocator"])
def test_qnn_2_7_0_refuses_keys_it_ignores(key):
    """Fails on main: onnxruntime-qnn 2.7.0 never reads these (no string in its library), yet they were accepted."""
    with pytest.raises(UsageError, match=key):
        effective_options(QNN, "npu", {key: "1"}, version=lambda _ep: "2.7.0", names=lambda _ep: ())


def test_the_key_lists_are_per_ep_and_per_version():
    for name in (QNN, OV):
        tables = eps.EPS[name].option_keys
        assert tables and all(t.package and t.version and t.keys for t in tables)
    assert [(t.package, t.version) for t in eps.EPS[QNN].option_keys] == [("onnxruntime-qnn", "2.7.0")]


# --- finding 8: show, prepare and perf decide device_type in one place -------------------------


def test_show_takes_the_device_openvino_has_here_as_perf_does(tmp_path, intel_host):
    """Fails on main: show wrote device_type NPU on a host where OpenVINO offers only the CPU (perf ran CPU)."""
    code, doc = _show(make_bundle(tmp_path, FLAT_CPU), "--ep", "openvino")
    assert code == 0, doc
    assert _options(doc)["device_type"] == "CPU" and doc["target"]["device"] == "cpu"
    assert dev.resolve_target("openvino", None, "winml-genai").device == doc["target"]["device"]


def test_ep_option_device_type_wins_and_is_recorded(tmp_path):
    """Fails on main: `--ep-option device_type=CPU` was overwritten by the home device's NPU."""
    code, doc = _show(make_bundle(tmp_path, FLAT_CPU), "--ep", "openvino", "--ep-option", "device_type=CPU")
    assert code == 0, doc
    assert _options(doc)["device_type"] == "CPU"
    assert doc["options"]["device_type_source"] == "--ep-option" and doc["target"]["device"] == "cpu"


def test_device_and_device_type_that_disagree_exit_2(tmp_path):
    code, doc = _show(
        make_bundle(tmp_path, FLAT_CPU), "--ep", "openvino", "--device", "gpu", "--ep-option", "device_type=CPU"
    )
    assert code == EXIT_USAGE and "two devices" in doc["error"]


def test_absent_ep_plans_its_home_device_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(dev, "_ort_ep_devices", lambda: [_device(CPU, HW.CPU)])
    # an installed plugin registers itself there too
    monkeypatch.setattr(dev, "_ort_available_providers", lambda: [CPU])
    code, doc = _show(make_bundle(tmp_path, FLAT_CPU), "--ep", "openvino")
    assert code == 0 and _options(doc)["device_type"] == "NPU"
    assert "not available here" in doc["target"]["device_source"]
    assert "not available here" in doc["options"]["device_type_source"]


def test_options_and_device_type_are_in_the_cache_key(tmp_path):
    """Fails on main: device_type=CPU and the default NPU derived the same bundle (same key)."""
    bundle = make_bundle(tmp_path, FLAT_CPU)
    npu = derive.derive_bundle(plan_for(bundle, ep_target("openvino", "npu")))
    cpu = derive.derive_bundle(plan_for(bundle, ep_target("openvino", "npu"), ep_options={"device_type": "CPU"}))
    assert npu.key != cpu.key
    manifest = json.loads((cpu.path / "manifest.json").read_text())
    assert manifest["components"]["options"] == {
        "ep_name": OV,
        "asked": {"device_type": "CPU"},
        "device_type": "CPU",
    }


def test_the_plan_stages_and_compile_jobs_read_one_decision(tmp_path):
    from winml_perf.bundle.epcontext import compile as compiler

    plan = plan_for(make_bundle(tmp_path, FLAT_CPU), ep_target("qnn", "npu"), ep_options={"soc_model": "60"})
    assert plan.options is not None
    (job,), _notes = compiler.compile_jobs(plan, compiles=lambda _ep: True)
    assert job.provider_options == plan.options.for_stage({}) == {"soc_model": "60", "backend_type": "htp"}


# --- finding 11: OpenVINO's two EP names: which one, and why --------------------------------------


def test_openvino_says_which_of_its_two_names_it_took(tmp_path, intel_host):
    """Fails on main: nothing said that OpenVINOExecutionProvider.AUTO was also registered, nor which ran."""
    bundle = make_bundle(tmp_path, FLAT_CPU)
    code, doc = _show(bundle, "--ep", "openvino")
    assert code == 0, doc
    assert doc["options"]["ep_name"] == OV
    reason = doc["options"]["ep_name_reason"]
    assert OV_AUTO in reason and "device_type" in reason
    table = CliRunner().invoke(app, ["bundle", "show", str(bundle), "--ep", "openvino"])
    assert f"EP name {OV}:" in table.stdout and "device_type=CPU (from device cpu)" in table.stdout


def test_the_record_and_perf_screen_carry_the_decision(tmp_path, intel_host):
    from winml_perf.bundle.prepare import prepare_route
    from winml_perf.ep.effective import options_lines

    route = prepare_route(
        make_bundle(tmp_path, FLAT_CPU), dev.resolve_target("openvino", None, "winml-genai"), require_available=False
    )
    recorded = route.to_dict()["target"]["options"]
    assert recorded["ep_name"] == OV and OV_AUTO in recorded["ep_name_reason"]
    assert any(line.startswith(f"EP name {OV}:") for line in options_lines(recorded))


def test_one_name_needs_no_reason():
    decided = effective_options(OV, "cpu", {}, names=lambda _ep: (OV,))
    assert (decided.ep_name, decided.ep_name_reason) == (OV, None)
    assert effective.effective_options(CPU, "cpu", {}).device_type is None


def test_perf_pins_the_device_from_device_type_and_records_the_decision(tmp_path, intel_host):
    """perf's route (measure/genai_route.py) reads the same decision: device_type=CPU pins the cpu
    device, and the record's route.target holds the options, the EP name taken and why."""
    from winml_perf.ep.resolved import resolve_route
    from winml_perf.measure.genai_route import genai_route as _genai_route
    from winml_perf.measure.orchestrate import PerfRequest, RouteRequest

    bundle = make_bundle(tmp_path, FLAT_CPU)
    request = RouteRequest(ep="openvino", options=(("device_type", "CPU"),))
    req = PerfRequest(path=bundle, routes=(request,))
    spec = _genai_route(req, resolve_route(request, req.runtime_value, req.ep_options), (), 0.0)
    target = spec.route.target
    assert target["device"] == "cpu" and target["options"]["device_type"] == "CPU"
    assert target["options"]["device_type_source"] == "--ep-option"
    assert target["options"]["ep_name"] == OV and OV_AUTO in target["options"]["ep_name_reason"]
    (stage,) = spec.route.stages
    assert stage.provider_options_after == ({"OpenVINO": {"device_type": "CPU"}},)


def test_options_an_ep_without_a_key_list_takes_are_said_to_be_unchecked():
    # WebGPU's entry lists no keys: --ep webgpu --ep-option soc_model=60 ran with no word that nothing checked it
    from winml_perf.ep.effective import options_lines

    decided = effective_options("WebGpuExecutionProvider", "cpu", {"soc_model": "60"}, names=lambda _ep: ())
    assert decided.keys_checked_against is None
    assert options_lines(decided.to_dict()) == [
        "options not checked: ep/table.py lists no keys webgpu parses, so a key it does not parse may be ignored silently"
    ]
    assert options_lines(effective_options("WebGpuExecutionProvider", "cpu", {}, names=lambda _ep: ()).to_dict()) == []
