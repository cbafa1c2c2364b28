"""OnnxSession: a plain ONNX model in an onnxruntime InferenceSession, for timed inference (`--runtime winml`).

* The EP comes from ``devices.resolve_target(ep, device, "winml")`` (``--ep`` > ``--device``, default
  ``auto``). The session is created through the EP device API: ``add_provider_for_devices`` with the
  ``OrtEpDevice`` of the resolved EP on the resolved device class (``ort_ep_devices``). Only an EP that
  onnxruntime lists in ``get_available_providers()`` but offers no EP device for is added by name, and
  the description says so (``creation: "provider-name"``).
* After creation ``get_providers()`` is checked: if the resolved EP is not among them onnxruntime fell
  back to CPU, and ``load()`` raises ``EPUnavailableError`` (no silent fallback). Nodes that the EP
  left to the CPU EP (normal for partial support) are counted per EP from onnxruntime's graph
  assignment info and reported as an ``ep_partial_fallback`` warning in ``describe()``.
* Inputs come from ``onnx_inputs`` (model metadata, ``--shape``, ``--input``).
* IO binding (``io_binding=True``): inputs are copied once to OrtValues on the EP's device where
  onnxruntime's Python API can place them (the EP's ``io_device`` in ep/table.py: cuda, dml, webgpu),
  else on the host; outputs are bound to the same device, and after the first run the outputs onnxruntime allocated
  are bound back, so later runs reuse every buffer. ``describe()["io_binding"]`` says where tensors
  lived, and why when a device placement was refused.
* ``run_timed()`` times only ``run`` (or ``run_with_iobinding`` + ``synchronize_outputs``) with
  ``perf_counter`` and returns milliseconds. ``session_create_ms`` times only the InferenceSession
  constructor. A prepared model (``prepared=True``, see bundle/onnx_prepare.py) is loaded with graph
  optimisation disabled; with ``source_model`` the load also times (then drops) a session over the
  unprepared source at the requested level, so the record shows both creation times.

Options are plain JSON-able keyword arguments, so a ``SessionSpec(runtime="winml", options=...)`` can
build this class in a child process: ``OnnxSession.from_options(path, **spec.options)`` (each key to its
group: OnnxIO, OnnxSettings, or the EP, device and prepared model); ``onnx_options.options_from_flags``
makes them from `winml perf` flags, and ``preflight`` checks them in the parent (usage errors, exit 2).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from winml_perf.ep import table as eps
from winml_perf.ep.table import CPU_EP
from winml_perf.model.runtime import ONNX
from winml_perf.onnxfile.integrity import not_a_model_file
from winml_perf.session import onnx_inputs
from winml_perf.session.onnx_inputs import TensorInfo
from winml_perf.session.onnx_options import graph_optimization_enum, parse_graph_optimization_level, parse_threads
from winml_perf.support.errors import BundleError, EPUnavailableError

if TYPE_CHECKING:
    from winml_perf.ep.devices import Target

PARTIAL_FALLBACK = "ep_partial_fallback"


# -- EP devices -------------------------------------------------------------------------------------
def _hw_class(ep_device: Any) -> str:
    kind = ep_device.device.type
    return str(getattr(kind, "name", kind)).rsplit(".", 1)[-1].lower()


def ort_ep_devices(ep: str, device_class: str | None = None) -> list[Any]:
    """The ``onnxruntime.OrtEpDevice`` objects of ``ep`` (canonical name), on ``device_class`` when given.

    Plugin EPs are asked of the process's registry first. Empty when onnxruntime offers none.
    """
    import onnxruntime as ort

    from winml_perf.ep.plugins import registered_plugins

    if ep != CPU_EP:
        registered_plugins()

    own = [d for d in ort.get_ep_devices() if d.ep_name == ep]
    if device_class is None:
        return own
    return [d for d in own if _hw_class(d) == device_class]


def _ep_device_dict(d: Any) -> dict[str, Any]:
    hw = d.device
    return {
        "ep_name": d.ep_name,
        "ep_vendor": d.ep_vendor,
        "device_type": _hw_class(d),
        "hw_vendor": hw.vendor,
        "vendor_id": hw.vendor_id,
        "device_id": hw.device_id,
    }


def _explain_create_error(model: Path, ep: str, exc: Exception) -> Exception:
    text = " ".join(str(exc).split())
    if "INVALID_PROTOBUF" in text or "No graph was found" in text or "Protobuf parsing failed" in text:
        return BundleError(f"{model}: not an ONNX model (onnxruntime: {text})", "pass an .onnx model file")
    if "NO_SUCHFILE" in text:
        return BundleError(
            f"{model}: onnxruntime cannot read the model or a file it refers to ({text})",
            "check the path and that external data files sit next to the model",
        )
    if ep != CPU_EP:
        return EPUnavailableError(
            f"{model}: onnxruntime could not create a session on {ep}: {text}",
            "try --ep cpu to check that the model loads at all, or see `winml devices`",
        )
    return BundleError(f"{model}: onnxruntime could not load the model: {text}", "check the model with onnx.checker")


@dataclass(frozen=True)
class OnnxIO:
    """A plain model's inputs and outputs: ``shapes`` fixes dynamic dimensions (input -> dims),
    ``inputs`` reads inputs from .npy files (input -> path), ``seed`` seeds the generated rest;
    ``io_binding`` keeps inputs and outputs in bound OrtValues (on the EP's device where it can)."""

    shapes: Mapping[str, Sequence[int]] | None = None
    inputs: Mapping[str, str] | None = None
    seed: int = 0
    io_binding: bool = False


@dataclass(frozen=True)
class OnnxSettings:
    """How onnxruntime's session is made: thread counts, graph optimisation level, session config
    entries, the EP's provider options; whether it records which EP ran each node
    (``record_assignment``), and where onnxruntime's profile goes (``profile_prefix``: explain)."""

    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    graph_optimization_level: str | None = None
    session_config: Mapping[str, str] | None = None
    provider_options: Mapping[str, str] | None = None
    record_assignment: bool = True
    profile_prefix: str | None = None


_IO_KEYS = tuple(f.name for f in fields(OnnxIO))
_SETTINGS_KEYS = tuple(f.name for f in fields(OnnxSettings))
_OWN_KEYS = ("ep", "device", "prepared", "source_model")


class OnnxSession:
    """Load a plain ONNX model once, then run timed inferences with fixed inputs.

    ``with OnnxSession("m.onnx", ep="cpu", io=OnnxIO(shapes={"x": [1, 8]})) as s: s.run_timed()``
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        ep: str | None = None,
        device: str | None = None,
        io: OnnxIO | None = None,
        settings: OnnxSettings | None = None,
        prepared: bool = False,
        source_model: str | None = None,
    ) -> None:
        io, settings = io or OnnxIO(), settings or OnnxSettings()
        self.model_path = Path(model_path)
        self.ep_requested, self.device_requested = ep, device
        self.shapes = {str(k): tuple(int(d) for d in v) for k, v in (io.shapes or {}).items()}
        self.input_files = {str(k): str(v) for k, v in (io.inputs or {}).items()}
        self.io_binding = bool(io.io_binding)
        self.intra_op_threads = parse_threads(settings.intra_op_threads, "--intra-op-threads")
        self.inter_op_threads = parse_threads(settings.inter_op_threads, "--inter-op-threads")
        self.graph_optimization_level = parse_graph_optimization_level(settings.graph_optimization_level)
        self.session_config = {str(k): str(v) for k, v in (settings.session_config or {}).items()}
        self.provider_options = {str(k): str(v) for k, v in (settings.provider_options or {}).items()}
        self.seed = int(io.seed)
        self.prepared = bool(prepared)
        self.source_model = str(source_model) if source_model else None
        self.record_assignment = bool(settings.record_assignment)
        self.profile_prefix = str(settings.profile_prefix) if settings.profile_prefix else None  # profiling (explain)
        self._reset()

    @classmethod
    def from_options(cls, model_path: str | Path, **options: Any) -> OnnxSession:
        """The session for flat, JSON-able options (``SessionSpec.options``, ``onnx_options.options_from_flags``,
        ``PreparedModel.session_options()``), each key to its group; an unknown key is a TypeError."""
        unknown = sorted(set(options) - {*_IO_KEYS, *_SETTINGS_KEYS, *_OWN_KEYS})
        if unknown:
            raise TypeError(f"OnnxSession got unexpected options {unknown}")
        return cls(
            model_path,
            io=OnnxIO(**{k: options[k] for k in _IO_KEYS if k in options}),
            settings=OnnxSettings(**{k: options[k] for k in _SETTINGS_KEYS if k in options}),
            **{k: options[k] for k in _OWN_KEYS if k in options},
        )

    def _reset(self) -> None:
        self._session: Any = None  # an onnxruntime InferenceSession once loaded (onnxruntime is untyped)
        self._binding: Any = None  # its IOBinding
        self._values: dict[str, Any] = {}
        self._outputs_pinned = False
        self._feeds: dict[str, np.ndarray] = {}
        self._output_names: list[str] = []
        self.target: Target | None = None
        self.ep_device: dict[str, Any] | None = None
        self.creation: str | None = None
        self.providers: list[str] = []
        self.planned: list[onnx_inputs.PlannedInput] = []
        self.outputs: list[TensorInfo] = []
        self.node_assignment: dict[str, int] = {}
        self.io_placement: dict[str, Any] = {"enabled": self.io_binding, "input_device": None, "output_device": None}
        self.warnings: list[dict[str, Any]] = []
        self.session_create_ms: float | None = None
        self.unprepared_session_create_ms: float | None = None
        self.load_ms: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def effective_graph_optimization_level(self) -> str:
        return "disable" if self.prepared else self.graph_optimization_level

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def load(self) -> OnnxSession:
        if self._session is not None:
            return self
        t0 = time.perf_counter()
        unusable = not_a_model_file(self.model_path)
        if unusable is not None:
            raise unusable
        from winml_perf.ep.devices import resolve_target

        self.target = resolve_target(self.ep_requested, self.device_requested, ONNX)
        if self.prepared and self.source_model:
            self.unprepared_session_create_ms = self._time_unprepared()
        session, create_ms = self._create(self.model_path, self.effective_graph_optimization_level)
        self._session, self.session_create_ms = session, create_ms
        try:
            self._after_create()
        except BaseException:
            self.unload()
            raise
        self.load_ms = (time.perf_counter() - t0) * 1000.0
        return self

    def unload(self) -> None:
        self._binding = None
        self._values = {}
        self._session = None
        self._feeds = {}

    def __enter__(self) -> OnnxSession:
        return self.load()

    def __exit__(self, *exc: object) -> None:
        self.unload()

    def _require_loaded(self) -> Any:
        if self._session is None:
            raise RuntimeError("OnnxSession is not loaded; call load() or use it as a context manager")
        return self._session

    # -- creation ----------------------------------------------------------------------------------
    def _session_options(self, level: str) -> Any:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = graph_optimization_enum(level)
        if self.intra_op_threads is not None:
            so.intra_op_num_threads = self.intra_op_threads
        if self.inter_op_threads is not None:
            so.inter_op_num_threads = self.inter_op_threads
        if self.record_assignment:
            so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        for key, value in self.session_config.items():
            so.add_session_config_entry(key, value)
        if self.profile_prefix:
            so.enable_profiling = True
            so.profile_file_prefix = self.profile_prefix
        return so

    def _add_provider(self, so: Any) -> list[str | tuple[str, dict[str, str]]] | None:
        """Adds the target EP to ``so`` via its EP devices; returns a providers list for the
        legacy constructor when onnxruntime offers no EP device for it."""
        assert self.target is not None and self.target.ep is not None  # load() resolves it; runtime winml names an EP
        import onnxruntime as ort

        ep, cls = self.target.ep, self.target.device
        devices = ort_ep_devices(ep, cls) or ort_ep_devices(ep)
        if devices:
            so.add_provider_for_devices(devices[:1], dict(self.provider_options))
            self.ep_device, self.creation = _ep_device_dict(devices[0]), "ep-devices"
            return None
        if ep in ort.get_available_providers():
            self.creation = "provider-name"
            return [(ep, dict(self.provider_options))] + ([] if ep == CPU_EP else [CPU_EP])
        raise EPUnavailableError(
            f"onnxruntime offers no device for {ep} here", "see `winml devices` for what is available"
        )

    def _create(self, model: Path, level: str) -> tuple[Any, float]:
        assert self.target is not None and self.target.ep is not None  # load() resolves it; runtime winml names an EP
        import onnxruntime as ort

        so = self._session_options(level)
        providers = self._add_provider(so)
        t0 = time.perf_counter()
        try:
            if providers is None:
                session = ort.InferenceSession(str(model), sess_options=so)
            else:
                session = ort.InferenceSession(str(model), sess_options=so, providers=providers)
        except Exception as exc:
            raise _explain_create_error(model, self.target.ep, exc) from exc
        return session, (time.perf_counter() - t0) * 1000.0

    def _time_unprepared(self) -> float:
        assert self.source_model is not None  # load() times the source model only when there is one
        source = Path(self.source_model)
        if not source.is_file():
            raise BundleError(
                f"{source}: source model of the prepared model not found", "drop source_model or fix its path"
            )
        session, ms = self._create(source, self.graph_optimization_level)
        del session
        return ms

    def _after_create(self) -> None:
        assert self.target is not None and self.target.ep is not None  # load() resolves it; runtime winml names an EP
        session = self._session
        self.providers = list(session.get_providers())
        if self.target.ep not in self.providers:
            raise EPUnavailableError(
                f"{self.model_path}: asked for {self.target.ep} ({self.target.label}) but onnxruntime created the "
                f"session with {', '.join(self.providers)} only (it fell back silently)",
                "check that the EP is installed and supports this model (winml devices), or pick another --ep/--device",
            )
        self.node_assignment = self._assignment()
        self.warnings = self._placement_warnings()
        infos = [TensorInfo.from_node_arg(a) for a in session.get_inputs()]
        self.outputs = [TensorInfo.from_node_arg(a) for a in session.get_outputs()]
        self._output_names = [o.name for o in self.outputs]
        self.planned = onnx_inputs.plan_inputs(infos, self.shapes, self.input_files)
        self._feeds = onnx_inputs.materialize(self.planned, self.seed)
        if self.io_binding:
            self._bind()
        else:
            self.io_placement = {"enabled": False, "input_device": "cpu", "output_device": "cpu"}

    def _assignment(self) -> dict[str, int]:
        getter = getattr(self._session, "get_provider_graph_assignment_info", None)
        if not self.record_assignment or getter is None:
            return {}
        counts: dict[str, int] = {}
        try:
            for sub in getter():
                counts[sub.ep_name] = counts.get(sub.ep_name, 0) + len(sub.get_nodes())
        except Exception:  # older onnxruntime: the record simply has no per-node counts
            return {}
        return counts

    def _placement_warnings(self) -> list[dict[str, Any]]:
        assert self.target is not None and self.target.ep is not None  # load() resolves it; runtime winml names an EP
        ep = self.target.ep
        total = sum(self.node_assignment.values())
        elsewhere = {k: v for k, v in self.node_assignment.items() if k != ep}
        if ep == CPU_EP or not elsewhere:
            return []
        moved = sum(elsewhere.values())
        where = ", ".join(f"{n} on {k}" for k, n in sorted(elsewhere.items()))
        return [
            {
                "code": PARTIAL_FALLBACK,
                "message": f"{moved} of {total} nodes did not run on {ep} ({where})",
                "remedy": "the EP does not support those nodes; the latency includes the copies between devices "
                "(add --session-config session.disable_cpu_ep_fallback=1 to make this an error)",
                "data": {"ep": ep, "node_assignment": dict(self.node_assignment)},
            }
        ]

    # -- IO binding ---------------------------------------------------------------------------------
    def _device_values(self, device: str) -> dict[str, Any]:
        import onnxruntime as ort

        return {name: ort.OrtValue.ortvalue_from_numpy(arr, device, 0) for name, arr in self._feeds.items()}

    def _bind(self) -> None:
        assert self.target is not None and self.target.ep is not None  # load() resolves it; runtime winml names an EP
        session = self._session
        device = eps.io_device(self.target.ep)
        note = None
        if device == "cpu" and self.target.ep != CPU_EP:
            note = (
                f"{self.target.ep}: tensors stay on the host (onnxruntime's Python API cannot place them on its device)"
            )
        try:
            values = self._device_values(device)
        except Exception as exc:
            if device == "cpu":
                raise
            note = f"onnxruntime refused {device} tensors ({' '.join(str(exc).split())[:200]}); inputs and outputs on the host"
            device, values = "cpu", self._device_values("cpu")
        binding = session.io_binding()
        for name, value in values.items():
            binding.bind_ortvalue_input(name, value)
        for name in self._output_names:
            binding.bind_output(name, device, 0)
        self._values, self._binding, self._outputs_pinned = values, binding, False
        self.io_placement = {"enabled": True, "input_device": device, "output_device": device, "note": note}

    def _pin_outputs(self) -> None:
        """After the first bound run: bind the outputs onnxruntime allocated, so later runs reuse them."""
        for name, value in zip(self._output_names, self._binding.get_outputs()):
            self._binding.bind_ortvalue_output(name, value)
        self._outputs_pinned = True

    # -- running ------------------------------------------------------------------------------------
    def run_timed(self) -> float:
        """One inference with the fixed inputs; milliseconds of run (+ output sync with IO binding)."""
        session = self._require_loaded()
        clock = time.perf_counter
        if self._binding is not None:
            binding = self._binding
            t0 = clock()
            session.run_with_iobinding(binding)
            binding.synchronize_outputs()
            elapsed = clock() - t0
            if not self._outputs_pinned:
                self._pin_outputs()
            return elapsed * 1000.0
        names, feeds = self._output_names, self._feeds
        t0 = clock()
        session.run(names, feeds)
        return (clock() - t0) * 1000.0

    def end_profiling(self) -> str:
        """Stop onnxruntime's profiler (``profile_prefix``) and return the file it wrote."""
        return str(self._require_loaded().end_profiling())

    def run(self) -> list[np.ndarray]:
        """One untimed inference; the outputs as host numpy arrays, in model order."""
        session = self._require_loaded()
        if self._binding is not None:
            session.run_with_iobinding(self._binding)
            result = [np.array(v) for v in self._binding.copy_outputs_to_cpu()]
            if not self._outputs_pinned:
                self._pin_outputs()
            return result
        return list(session.run(self._output_names, self._feeds))

    @property
    def feeds(self) -> dict[str, np.ndarray]:
        self._require_loaded()
        return dict(self._feeds)

    # -- reporting ----------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """What ran and how, for the record (JSON-able)."""
        return {
            "model": str(self.model_path),
            "prepared": self.prepared,
            "source_model": self.source_model,
            "target": self.target.to_dict() if self.target else None,
            "ep_device": self.ep_device,
            "creation": self.creation,
            "providers": list(self.providers),
            "node_assignment": dict(self.node_assignment),
            "session_create_ms": self.session_create_ms,
            "unprepared_session_create_ms": self.unprepared_session_create_ms,
            "options": {
                "intra_op_threads": self.intra_op_threads,
                "inter_op_threads": self.inter_op_threads,
                "graph_optimization_level": self.effective_graph_optimization_level,
                "requested_graph_optimization_level": self.graph_optimization_level,
                "session_config": dict(self.session_config),
                "provider_options": dict(self.provider_options),
                "seed": self.seed,
            },
            "inputs": [p.to_dict() for p in self.planned],
            "outputs": [o.to_dict() for o in self.outputs],
            "io_binding": dict(self.io_placement),
            "warnings": [dict(w) for w in self.warnings],
        }

    def actual_route(self) -> dict[str, Any]:
        """For the runner's end_cell: the EP that ran the model (stage 'model') and the description."""
        ran = self.target.ep if self.target and self.target.ep in self.providers else next(iter(self.providers), None)
        holders = [ep for ep, n in self.node_assignment.items() if n > 0]
        if len(holders) == 1:  # the node assignment, not get_providers(), says what ran every node
            ran = holders[0]
        return {"model": ran, "session": self.describe()}


DISABLE_CPU_FALLBACK = "session.disable_cpu_ep_fallback"


def preflight(model_path: str | Path, options: Mapping[str, Any]) -> dict[str, Any]:
    """Check, in the parent before any measuring, everything that would be a usage error (exit 2):
    the file is an ONNX model, ``--input`` names and files, ``--shape`` fit. Loads the model once on
    the CPU EP with graph optimisation disabled (cheap, and independent of the target EP) and
    returns its inputs/outputs as planned. The target itself is checked by ``resolve_target``."""
    opts = {
        k: v
        for k, v in dict(options).items()
        if k not in ("ep", "device", "io_binding", "prepared", "source_model", "provider_options")
    }
    opts.update(ep="cpu", graph_optimization_level="disable", record_assignment=False)
    # The CPU session here is no EP's: a rule for the target EP's session would only make it fail
    # (disable_cpu_ep_fallback on a CPU-only session is "Conflicting session configuration").
    config = {k: v for k, v in dict(opts.get("session_config") or {}).items() if k != DISABLE_CPU_FALLBACK}
    opts["session_config"] = config
    with OnnxSession.from_options(model_path, **opts) as session:
        return {"inputs": [p.to_dict() for p in session.planned], "outputs": [o.to_dict() for o in session.outputs]}
