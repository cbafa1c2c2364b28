"""ep/table.py is the one place that holds EP facts: every consumer asks an EP's entry, so changing the
entry changes what the consumer does, and no module keeps its own copy of a fact: no code outside the
table spells an EP's name, a package or build that brings one, or a sentence the table holds."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from importlib import metadata
from pathlib import Path

import pytest

from tests.unit.bundle_fakes import FLAT_CPU, ep_target, make_bundle
from winml_perf.bundle import cache, variants
from winml_perf.bundle.config import load_config
from winml_perf.bundle.epcontext import compile as compiler
from winml_perf.bundle.routing import plan_route
from winml_perf.ep import options as epo
from winml_perf.ep import table as eps
from winml_perf.ep.devices import EPDevice
from winml_perf.ep.effective import effective_options
from winml_perf.ep.plugins import PluginRegistration
from winml_perf.model import route
from winml_perf.record import device_bandwidth as bandwidth
from winml_perf.record import environment
from winml_perf.session import genai_session
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
WEBGPU_NO_DEVICE = "no GPU adapter found; ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER=1 before start offers a software one"
#: The facts each EP's entry holds where they differ from EPInfo's defaults (what the modules used to keep).
FACTS = {
    CPU: {"memory": "host", "accuracy_level_kernel": True, "sessions_beside": True},
    CUDA: {
        "io_device": "cuda",
        "memory": "nvidia-gpu",
        "install_package": "onnxruntime-gpu",
        "runtime_builds": (("onnxruntime", "onnxruntime-gpu"), ("onnxruntime-genai", "onnxruntime-genai-cuda")),
        "genai_unavailable": ("Cuda interface not available", "CUDA (onnxruntime-genai-cuda is not installed)"),
    },
    "NvTensorRTRTXExecutionProvider": {"compiles": True, "io_device": "cuda", "memory": "nvidia-gpu"},
    QNN: {
        "compiles": True,
        "default_options": QNN_DEFAULT,
        "option_keys": [("onnxruntime-qnn", "2.7.0", 46)],
        "emulated_on_cpu": "HTP",
        "install_package": "onnxruntime-qnn",
        "install_extra": "qnn",
        "device_free": [("onnxruntime-qnn", "2.7.0", True)],
        "precision_options": ("enable_htp_fp16_precision", "htp_bf16_enable", "enable_htp_fp16_clamp_overflow"),
        "fp16_option": eps.Fp16Option("enable_htp_fp16_precision", "1", "HTP"),
        "runtime_builds": (("onnxruntime", "onnxruntime-qnn"),),
    },
    OPENVINO: {
        "sessions_beside": True,
        "compiles": True,
        "device_type_option": True,
        "option_keys": [("onnxruntime-ep-openvino", "1.8.1", 15)],
        "name_variants": (("AUTO", "OpenVINO's AUTO meta-device, which picks the device itself"),),
        "install_package": "onnxruntime-ep-openvino",  # the plugin EP (onnxruntime-openvino replaces onnxruntime)
        "install_extra": "openvino",
        "precision_options": ("precision", "load_config"),
        "runtime_builds": (("onnxruntime", "onnxruntime-openvino"),),
    },
    "VitisAIExecutionProvider": {"compiles": True, "device_type_option": True},
    "DmlExecutionProvider": {
        "io_device": "dml",
        "install_package": "onnxruntime-directml",
        "runtime_builds": (
            ("onnxruntime", "onnxruntime-directml"),
            ("onnxruntime-genai", "onnxruntime-genai-directml"),
        ),
        "genai_unavailable": ("DML provider requested", "DML (this onnxruntime-genai build has no DirectML)"),
    },
    WEBGPU: {
        "io_device": "webgpu",
        "install_package": "onnxruntime-ep-webgpu",
        "install_extra": "webgpu",
        "device_free": [("onnxruntime-ep-webgpu", "0.4.0", False)],
        "no_device_hint": WEBGPU_NO_DEVICE,
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
        ("winml_perf.bundle.variants", "PRECISION_OPTIONS"),
        ("winml_perf.bundle.variants", "QNN_FP16_DEFAULT"),
        ("winml_perf.bundle.cache", "_VERSION_DISTS"),
        ("winml_perf.record.environment", "ALTERNATES"),
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


def test_a_plans_compile_jobs_follow_the_entry_it_carries(monkeypatch, tmp_path):
    """Whether a stage compiles, and the EP's name in the note, are read from the entry the plan took when made."""
    config = load_config(make_bundle(tmp_path, FLAT_CPU))
    _replace(monkeypatch, CUDA, alias="cuda-entry")
    plan = plan_route(config, ep_target("cuda"))
    _replace(monkeypatch, CUDA, compiles=True)  # after the plan was made: not asked again
    jobs, (note,) = compiler.compile_jobs(plan)
    assert jobs == [] and note.reason == "cuda-entry does not produce EPContext models"
    (job,), notes = compiler.compile_jobs(plan_route(config, ep_target("cuda")))
    assert notes == [] and job.ep == CUDA and job.stages == ("decoder",)


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


# -- no EP fact spelled outside the table ------------------------------------------------------------

SRC = Path(eps.__file__).resolve().parents[1]
EP_NAME = re.compile(r"[A-Za-z]\w*ExecutionProvider(\.\w+)?")
#: The one EP name spelled below the table's floor: the CPU fallback, which model/ (the typed spine)
#: needs and the table takes from it (``eps.CPU_EP``).
SPINE = {("model/route.py", CPU)}


def _table_literals() -> set[str]:
    """Every name, package and sentence the table holds, as code elsewhere would spell it."""
    out = {*eps.IGNORED_PROVIDERS, *eps.UNLISTED_MEMORY}
    out |= {
        build for runtime in ("onnxruntime", "onnxruntime-genai") for build in eps.runtime_distributions(runtime)[1:]
    }
    for info in eps.EPS.values():
        out |= {info.name, *(f"{info.name}.{variant}" for variant, _ in info.name_variants)}
        out |= {info.install_package or "", info.no_device_hint, *(info.genai_unavailable or ())}
        out |= {k.package for k in info.option_keys} | {d.package for d in info.device_free}
    return out - {""}


def _code_strings(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of a module that are code, not docstrings."""
    bodies = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, bodies)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def ep_facts_outside_the_table(literals: set[str], source: dict[str, str]) -> list[str]:
    """'file:line: literal' for each code string that is an EP name or one of the table's ``literals``."""
    found = []
    for rel, text in sorted(source.items()):
        for node in sorted(_code_strings(ast.parse(text)), key=lambda n: (n.lineno, n.col_offset)):
            if (node.value in literals or EP_NAME.fullmatch(node.value)) and (rel, node.value) not in SPINE:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    return found


def _package_source() -> dict[str, str]:
    files = (p for p in SRC.rglob("*.py") if p != Path(eps.__file__).resolve())
    return {p.relative_to(SRC).as_posix(): p.read_text(encoding="utf-8") for p in files}


def test_no_code_outside_the_table_spells_an_ep_fact():
    assert ep_facts_outside_the_table(_table_literals(), _package_source()) == []
    assert eps.CPU_EP == route.CPU and eps.EPS[route.CPU].alias == "cpu"


def test_the_check_sees_names_packages_and_sentences_but_not_prose():
    source = {
        "bundle/x.py": (
            '"""Runs on the QNNExecutionProvider (onnxruntime-gpu)."""\n'
            'EP = "AcmeExecutionProvider"\n'
            'BUILDS = ("onnxruntime-genai-cuda", "onnxruntime")\n'
            f"HINT = {WEBGPU_NO_DEVICE!r}\n"
            "def f():\n    return ep.removesuffix('ExecutionProvider')\n"
        )
    }
    assert ep_facts_outside_the_table(_table_literals(), source) == [
        "bundle/x.py:2: 'AcmeExecutionProvider'",
        "bundle/x.py:3: 'onnxruntime-genai-cuda'",
        f"bundle/x.py:4: {WEBGPU_NO_DEVICE!r}",
    ]


def test_runtime_builds_precision_and_hints_come_from_the_entry(monkeypatch):
    _replace(monkeypatch, CUDA, runtime_builds=(("onnxruntime", "acme-onnxruntime"),))
    installed = {"acme-onnxruntime": "9.1", "onnxruntime-genai": "0.18.0", "winml-perf": "0.1.0"}

    def version(dist):
        if dist not in installed:
            raise metadata.PackageNotFoundError(dist)
        return installed[dist]

    monkeypatch.setattr(metadata, "version", version)
    assert cache.runtime_versions() == {"onnxruntime": "9.1", "onnxruntime_genai": "0.18.0"}
    assert environment.package_versions()["onnxruntime"] == "9.1 (acme-onnxruntime)"

    assert variants._compute(CPU, (4,), "fp32", False, {}) == "fp32 model, MatMulNBits accuracy_level 4 (int8 A)"
    _replace(monkeypatch, CPU, accuracy_level_kernel=False, precision_options=("acme_precision",))
    assert variants._compute(CPU, (4,), "fp32", False, {"acme_precision": "fp16"}) == (
        "fp32 model, MatMulNBits accuracy_level 4 (int8 A) as written (the EP's kernel decides), acme_precision fp16"
    )
    _replace(monkeypatch, OPENVINO, fp16_option=eps.Fp16Option("acme_fp16", "0", "GPU"))
    assert variants._compute(OPENVINO, (), "fp32", False, {}) == "fp32 model, GPU fp32 (acme_fp16 0)"

    _replace(monkeypatch, CUDA, genai_unavailable=("acme missing", "CUDA (acme)"))
    error = genai_session._explain_load_error(Path("b"), RuntimeError("acme missing here"))
    assert "CUDA (acme) is not available here" in str(error)

    from winml_perf.commands.devices import _notes

    _replace(monkeypatch, CUDA, no_device_hint="plug the GPU in")
    notes = _notes([], [PluginRegistration(CUDA, "/x.so", "path", 1.0)])
    assert notes[0] == f"{CUDA} registered from /x.so but offers no device here (plug the GPU in)"
