"""Which EP devices this machine has, and what `--ep` / `--device` resolve to on it.

The only seam to onnxruntime is ``_ort_ep_devices()`` (and ``_ort_available_providers()`` for the
fallback); tests replace those two functions and nothing else.

Rules:

* An EP device *serves* a device class when its hardware type is that class and the EP lists that
  class in ``eps.EPS[...].devices`` (an EP this tool does not know is trusted on its hardware type).
  So a WebGPU device on a software adapter (hardware type CPU) serves no class: ``--device gpu``
  on such a machine fails with "no gpu device here; available: ..." and ``--device cpu`` picks the
  CPU EP, never WebGPU. WebGPU stays reachable with ``--ep webgpu``. (Measured: on a CPU-only box
  the WebGPU plugin lists no device at all unless ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER=1, then one
  of type CPU; on an H200 host it lists a GPU device, vendor 0x10de, and ``--device gpu``/``auto``
  resolve to it. Listing needs no Vulkan driver; running a session does.)
* ``auto`` takes the best class present, npu > gpu > cpu.
* A concrete class takes the EP that serves it best: EPs whose home device it is first (in
  ``eps.EPS`` order), then plugin EPs this tool does not know, then EPs that serve it as a
  secondary device. The CPU EP only serves cpu, where it is the home EP, so ``--device cpu`` is
  the plain CPU EP baseline; OpenVINO/QNN on a CPU are reached with ``--ep X --device cpu``.
* If ``get_ep_devices()`` is missing or fails, ``get_available_providers()`` is used (Azure ignored),
  each EP assumed on its home device; those entries are marked ``inferred``. Providers listed only
  by ``get_available_providers()`` and unknown to ``eps.EPS`` are not listed (their device is unknown).
* Plugin EPs come from the process's registry (``plugins.registered_plugins``), which registers the
  default sources on first ask; this module never registers by itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from winml_perf.ep.plugins import refuse_if_skipped, registered_plugins
from winml_perf.ep.route_flags import FLAGS, RouteFlags
from winml_perf.ep.table import (
    CPU_EP,
    DEVICE_CLASSES,
    EPS,
    IGNORED_PROVIDERS,
    canonical_ep,
    canonical_or_own,
    emulator_of,
    ep_alias,
    install_sentence,
    is_known_ep,
    normalize_ep_name,
)
from winml_perf.model.runtime import Runtime, runtime_named
from winml_perf.support.errors import EPUnavailableError, UsageError

DEVICE_CHOICES = ("cpu", "gpu", "npu", "auto", "config")


@dataclass(frozen=True)
class EPDevice:
    ep_name: str
    ep_vendor: str
    device_type: str  # 'cpu' | 'gpu' | 'npu' (hardware type as onnxruntime reports it)
    hw_vendor: str
    vendor_id: int | None
    device_id: int | None
    source: str  # 'builtin' | 'plugin'
    library_path: str | None = None
    inferred: bool = False  # listed by get_available_providers() only; device_type assumed

    @property
    def emulated(self) -> bool:
        """An emulator of the EP's accelerator running on the CPU (QNN's HTP emulator on x86): never an NPU."""
        return emulator_of(self.ep_name) is not None and self.device_type == "cpu"

    @property
    def serves(self) -> tuple[str, ...]:
        """Device classes this EP device can be picked for by ``--device`` (an emulator serves none)."""
        if self.emulated:
            return ()
        if is_known_ep(self.ep_name) and self.device_type not in EPS[canonical_or_own(self.ep_name)].devices:
            return ()
        return (self.device_type,) if self.device_type in DEVICE_CLASSES else ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "ep_name": self.ep_name,
            "ep_vendor": self.ep_vendor,
            "device_type": self.device_type,
            "hw_vendor": self.hw_vendor,
            "vendor_id": self.vendor_id,
            "device_id": self.device_id,
            "source": self.source,
            "library_path": self.library_path,
            "inferred": self.inferred,
            "emulated": self.emulated,
            "serves": list(self.serves),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EPDevice:
        return cls(
            ep_name=data["ep_name"],
            ep_vendor=data["ep_vendor"],
            device_type=data["device_type"],
            hw_vendor=data["hw_vendor"],
            vendor_id=data.get("vendor_id"),
            device_id=data.get("device_id"),
            source=data["source"],
            library_path=data.get("library_path"),
            inferred=bool(data.get("inferred", False)),
        )


# --- the onnxruntime seam ---------------------------------------------------------------------


def _ort_ep_devices() -> list[Any]:
    import onnxruntime as ort

    return list(ort.get_ep_devices())


def _ort_available_providers() -> list[str]:
    import onnxruntime as ort

    return list(ort.get_available_providers())


# --- listing ----------------------------------------------------------------------------------


def _hw_type(raw: Any) -> str:
    name = getattr(raw, "name", None) or str(raw).rsplit(".", 1)[-1]
    return str(name).lower()


def _convert(raw: Any, plugin_paths: Mapping[str, str]) -> EPDevice:
    hw = raw.device
    metadata = dict(getattr(raw, "ep_metadata", None) or {})
    library = metadata.get("library_path") or plugin_paths.get(raw.ep_name)
    return EPDevice(
        ep_name=raw.ep_name,
        ep_vendor=str(raw.ep_vendor or ""),
        device_type=_hw_type(hw.type),
        hw_vendor=str(getattr(hw, "vendor", "") or ""),
        vendor_id=getattr(hw, "vendor_id", None),
        device_id=getattr(hw, "device_id", None),
        source="plugin" if library else "builtin",
        library_path=library,
    )


def _inferred(provider: str) -> EPDevice:
    return EPDevice(provider, "", EPS[provider].home_device, "", None, None, "builtin", None, True)


def list_ep_devices() -> list[EPDevice]:
    """Every EP device onnxruntime offers in this process, plugin EPs included."""
    plugin_paths = {name: reg.library_path for name, reg in registered_plugins().items()}
    try:
        raw_devices = _ort_ep_devices()
    except Exception:  # onnxruntime < 1.23 or a broken device API: fall back, marked as inferred
        raw_devices = None
    devices = [_convert(raw, plugin_paths) for raw in raw_devices or ()]
    listed = {d.ep_name for d in devices}
    for provider in _ort_available_providers():
        if provider in IGNORED_PROVIDERS or provider in listed or provider not in EPS:
            continue
        devices.append(_inferred(provider))
        listed.add(provider)
    return devices


def _devices_or_list(devices: Sequence[EPDevice] | None) -> list[EPDevice]:
    return list_ep_devices() if devices is None else list(devices)


def available_eps(devices: Sequence[EPDevice] | None = None) -> list[str]:
    seen: dict[str, None] = {}
    for d in _devices_or_list(devices):
        seen.setdefault(d.ep_name, None)
    return list(seen)


def describe_available(devices: Sequence[EPDevice], flags: RouteFlags = FLAGS) -> str:
    """'cpu (CPUExecutionProvider), gpu (CUDAExecutionProvider)' plus EPs that serve no class (each with
    how to ask for it, in ``flags``' words)."""
    parts = []
    for cls in DEVICE_CLASSES[::-1]:
        eps = _eps_serving(cls, devices)
        if eps:
            parts.append(f"{cls} ({', '.join(eps)})")
    text = ", ".join(parts) or "none"
    for name in available_eps(devices):
        if not any(d.serves for d in devices if d.ep_name == name):
            types = sorted({d.device_type for d in devices if d.ep_name == name})
            emulator = emulator_of(name)
            what = (
                f"an emulated {emulator} device of type cpu"
                if emulator and types == ["cpu"]
                else f"a {'/'.join(types)}-type device"
            )
            ask = flags.part(f"--ep {ep_alias(name)}", f"ep={ep_alias(name)}")
            text += f"; {name} runs on {what} and serves no --device class (use {ask})"
    return text


# --- resolution -------------------------------------------------------------------------------


def _eps_serving(cls: str, devices: Sequence[EPDevice]) -> list[str]:
    names = {d.ep_name for d in devices if cls in d.serves}
    return sorted(names, key=lambda name: _rank(name, cls))


def _rank(name: str, cls: str) -> tuple[int, int, int]:
    table = list(EPS)
    if not is_known_ep(name):
        return (1, 0, len(table))
    info = EPS[canonical_ep(name)]
    position = info.devices.index(cls)
    return (0 if position == 0 else 2, position, table.index(info.name))


def check_device_word(device: str | None, allowed: Sequence[str], flag: str = "--device") -> str:
    """``device`` lower-cased when it is one of ``allowed``; else exit 2 naming ``flag``, where it came from."""
    word = (device or "").strip().lower()
    if word not in allowed:
        raise UsageError(f"unknown device {device!r} ({flag})", remedy=f"use one of: {'|'.join(allowed)}")
    return word


def resolve_device(
    device: str | None,
    ep: str | None = None,
    devices: Sequence[EPDevice] | None = None,
    *,
    flags: RouteFlags = FLAGS,
) -> str:
    """'auto'/None or a concrete class -> the concrete device class to use on this machine.

    With ``ep``, only that EP's devices count; if the EP serves no class (WebGPU on a software
    adapter) ``auto`` answers the hardware type it runs on.
    """
    word = check_device_word(device or "auto", ("cpu", "gpu", "npu", "auto"))
    devs = _devices_or_list(devices)
    if ep is not None:
        return _resolve_device_for_ep(word, canonical_or_own(ep), devs)
    if word == "auto":
        for cls in DEVICE_CLASSES:
            if _eps_serving(cls, devs):
                return cls
        raise EPUnavailableError(
            "no usable device here (onnxruntime lists no EP device)", remedy="check the onnxruntime installation"
        )
    if not _eps_serving(word, devs):
        emulators = emulated_eps(devs)
        if emulators and word == "npu":
            first = emulators[0]
            raise EPUnavailableError(
                f"no npu device here: {EPS[first].genai_name or ep_alias(first)} is installed but offers only an emulated "
                f"{emulator_of(first)} device of type CPU; use {flags.part(f'--ep {ep_alias(first)}', f'ep={ep_alias(first)}')}"
                " (its timings are the emulator's, not an NPU's)",
                remedy=f"available: {describe_available(devs, flags)}",
            )
        raise EPUnavailableError(
            f"no {word} device here; available: {describe_available(devs, flags)}",
            remedy=f"pick an available device class with {flags.part('--device', 'device=')}; see `winml devices`",
        )
    return word


def emulated_eps(devices: Sequence[EPDevice] | None = None) -> list[str]:
    """EPs whose every device here is an emulator (QNN on x86), in listing order."""
    devs = _devices_or_list(devices)
    names = available_eps(devs)
    return [n for n in names if all(d.emulated for d in devs if d.ep_name == n)]


def emulated_among(route_eps: Iterable[str | None]) -> tuple[str, ...]:
    """The route's EPs that offer only an emulator here (QNN's HTP emulator on x86); a route on the
    CPU EP alone asks no device."""
    wanted = {e for e in route_eps if e}
    if not wanted - {CPU_EP}:
        return ()
    return tuple(e for e in emulated_eps() if e in wanted)


def _resolve_device_for_ep(word: str, ep: str, devs: list[EPDevice]) -> str:
    own = [d for d in devs if d.ep_name == ep]
    if not own:
        refuse_if_skipped(ep)
        raise EPUnavailableError(
            f"execution provider {ep} is not available here; available: {', '.join(available_eps(devs)) or 'none'}",
            remedy=(f"to get it: {install_sentence(ep)}; " if install_sentence(ep) else "")
            + "a plugin library is registered with --ep-library NAME=PATH; `winml devices` lists what is here",
        )
    served = [cls for cls in DEVICE_CLASSES if any(cls in d.serves for d in own)]
    if word == "auto":
        if served:
            return served[0]
        types = {d.device_type for d in own}
        return next((cls for cls in DEVICE_CLASSES if cls in types), sorted(types)[0])
    if word not in served:
        raise EPUnavailableError(
            f"{ep} has no {word} device here; it offers: "
            + ", ".join(f"{d.device_type} ({d.hw_vendor or 'unknown vendor'})" for d in own),
            remedy=f"drop --device, or pick one of: {', '.join(served) or 'none (use --ep alone)'}",
        )
    return word


def resolve_eps(device: str, devices: Sequence[EPDevice] | None = None) -> list[str]:
    """EPs available here for a device class ('auto' resolved first), best first. Never empty."""
    devs = _devices_or_list(devices)
    cls = resolve_device(device, devices=devs)
    return _eps_serving(cls, devs)


# --- target: what was asked, and what it resolved to -------------------------------------------


@dataclass(frozen=True)
class Target:
    """What `--ep` / `--device` asked for and what it resolved to on this machine.

    kind 'config': respect the bundle's genai_config.json (ep and device are None).
    kind 'ep':     an explicit --ep; ``device`` is the class it runs on here.
    kind 'device': a --device class (auto already resolved); ``ep`` is the EP picked for it.
    """

    kind: str
    requested_ep: str | None
    requested_device: str | None
    ep: str | None
    device: str | None
    device_source: str | None = None  # why this device, when not resolved against this machine's devices

    @property
    def label(self) -> str:
        if self.kind == "config":
            return "config"
        if self.kind == "ep":
            assert self.ep is not None  # an --ep target names its EP
            return f"ep={ep_alias(self.ep)}"
        return f"device={self.device}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "requested_ep": self.requested_ep,
            "requested_device": self.requested_device,
            "ep": self.ep,
            "device": self.device,
            **({"device_source": self.device_source} if self.device_source else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Target:
        return cls(
            data["kind"],
            data.get("requested_ep"),
            data.get("requested_device"),
            data.get("ep"),
            data.get("device"),
            data.get("device_source"),
        )


def resolve_target(
    ep: str | None,
    device: str | None,
    runtime: str | Runtime,
    devices: Sequence[EPDevice] | None = None,
    *,
    canonical: str | None = None,
) -> Target:
    """``target_for`` with the runtime given by name (``--runtime``) or as its value."""
    return target_for(ep, device, runtime_named(runtime), devices, canonical=canonical)


def target_for(
    ep: str | None,
    device: str | None,
    runtime: Runtime,
    devices: Sequence[EPDevice] | None = None,
    *,
    canonical: str | None = None,
    flags: RouteFlags = FLAGS,
) -> Target:
    """`--ep` > concrete `--device` > config.

    * ``--ep X``: X must be available here (EPUnavailableError naming what is). A concrete
      ``--device`` alongside it must be one X serves here (``--ep openvino --device gpu``);
      ``auto``/``config``/none take X's best device.
    * ``--device cpu|gpu|npu|auto``: the class (auto: npu > gpu > cpu) and the best EP for it.
    * ``--device config`` (the default for runtime winml-genai): the bundle's own routing.
      With runtime winml (plain ONNX models, no genai_config.json) it is a UsageError; that
      runtime defaults to ``auto``.

    ``canonical``: ``ep`` already normalised by the caller (ep/resolved.py), so it is not normalised twice.
    ``flags``: which flags asked (a ``--route`` spec's parts are named in the remedy only for one).
    """
    word = check_device_word(device, DEVICE_CHOICES) if device is not None else runtime.default_device
    if word == "config" and not runtime.token_based:
        raise UsageError(
            "--device config needs a genai_config.json, which runtime winml (plain ONNX models) does not have",
            remedy="use --device cpu|gpu|npu|auto or --ep NAME with --runtime winml, or --runtime winml-genai",
        )
    if ep is not None:
        canonical = canonical or normalize_ep_name(ep)
        devs = _devices_or_list(devices)
        concrete = word if word in ("cpu", "gpu", "npu") else "auto"
        cls = resolve_device(concrete, ep=canonical, devices=devs, flags=flags)
        return Target("ep", ep, device, canonical, cls)
    if word == "config":
        return Target("config", None, device, None, None)
    devs = _devices_or_list(devices)
    cls = resolve_device(word, devices=devs, flags=flags)
    return Target("device", None, device, resolve_eps(cls, devices=devs)[0], cls)


def planned_target(
    ep: str,
    device: str | None,
    runtime: str | Runtime,
    devices: Sequence[EPDevice] | None = None,
    *,
    canonical: str | None = None,
) -> Target:
    """The target ``--ep X`` plans for without requiring X here (`winml bundle show|prepare`): where X is
    available, exactly what ``resolve_target`` (what `winml perf` runs) gives; elsewhere a concrete
    ``--device`` as asked, else X's home device, with ``device_source`` saying so. ``canonical``: ``ep``
    already normalised by the caller (it is not normalised again)."""
    canonical = canonical or normalize_ep_name(ep)
    devs = _devices_or_list(devices)
    if any(d.ep_name == canonical for d in devs):
        return resolve_target(ep, device, runtime, devs, canonical=canonical)
    if device in ("cpu", "gpu", "npu"):
        return Target("ep", ep, device, canonical, device, f"--device {device} ({canonical} is not available here)")
    home = EPS[canonical].home_device
    return Target("ep", ep, device, canonical, home, f"the home device of {ep_alias(canonical)} (not available here)")
