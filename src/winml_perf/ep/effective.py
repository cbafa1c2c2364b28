"""What a forced route hands its EP: one decision, read by `bundle show`, `bundle prepare`, `perf`, the
record and the derived bundle's cache key. No I/O beyond asking which plugin version is installed.

``effective_options(ep, device, asked)`` decides, once per route:

* which of the EP's names the route takes, and why, when its library registers several
  (OpenVINO: ``OpenVINOExecutionProvider`` and ``OpenVINOExecutionProvider.AUTO``);
* ``device_type`` for an EP whose options carry it (OpenVINO, VitisAI): the user's
  ``--ep-option device_type=...`` when given, else the resolved device class; and where it came from;
* the user's keys, checked against what the installed EP version parses (``table.EPInfo.option_keys``):
  an unknown key is a UsageError (exit 2) naming the accepted keys and the version they were read from;
* the EP's defaults for keys still missing.

``EffectiveOptions.for_stage(base)`` applies that decision to a stage's own (or borrowed) options: the
stage's options, the user's on top, defaults under both, ``device_type`` last. Compile jobs read the
stage's options from the plan, so a compile uses exactly what a run uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from winml_perf.ep.options import with_defaults
from winml_perf.ep.table import BOOL01, EPS, INTEGER, OptionKeys, ep_alias, is_known_ep, normalize_ep_name
from winml_perf.support.errors import UsageError

if TYPE_CHECKING:
    from winml_perf.ep.devices import Target

DEVICE_TYPE = "device_type"
CONCRETE_DEVICE_TYPES = ("CPU", "GPU", "NPU")


@dataclass(frozen=True)
class EffectiveOptions:
    ep: str  # canonical
    ep_name: str  # the registered EP name the route takes
    ep_name_reason: str | None  # why, when the EP's library registers more than one name
    asked: tuple[tuple[str, str], ...]  # --ep-option / --route options, as given (device_type included)
    device_type: str | None  # what the EP gets as device_type (None: the EP takes none)
    device_type_source: str | None  # '--ep-option', or 'device npu[: why that device]' (the target's class)
    keys_checked_against: str | None  # 'onnxruntime-qnn 2.7.0', or None when no key list applies

    def for_stage(self, base: Mapping[str, str] | None) -> dict[str, str]:
        """A forced stage's provider options: ``base`` (its own or borrowed), the asked ones on top,
        the EP's defaults under both, ``device_type`` as decided."""
        out = with_defaults(self.ep, dict(base or {}), dict(self.asked))
        if self.device_type is not None:
            out[DEVICE_TYPE] = self.device_type
        return out

    def key_dict(self) -> dict[str, Any]:
        """What of this decision a derived bundle's cache key holds."""
        return {"ep_name": self.ep_name, "asked": dict(self.asked), "device_type": self.device_type}

    def to_dict(self) -> dict[str, Any]:
        return {
            "ep": self.ep,
            "ep_name": self.ep_name,
            "ep_name_reason": self.ep_name_reason,
            "asked": dict(self.asked),
            "device_type": self.device_type,
            "device_type_source": self.device_type_source,
            "keys_checked_against": self.keys_checked_against,
        }


def installed_version(ep: str) -> str | None:
    """The version of the plugin package serving ``ep`` here, or None (not installed as a plugin)."""
    from winml_perf.ep.plugins import plugin_identity

    ident = plugin_identity(ep)
    return str(ident["version"]) if ident and ident.get("version") else None


def registered_names(ep: str) -> tuple[str, ...]:
    """Every EP name onnxruntime lists a device under that belongs to ``ep`` (``ep`` itself and
    ``ep.<variant>`` names such as ``OpenVINOExecutionProvider.AUTO``), in listing order."""
    from winml_perf.ep.devices import list_ep_devices

    names: dict[str, None] = {}
    for device in list_ep_devices():
        if device.ep_name == ep or device.ep_name.startswith(ep + "."):
            names.setdefault(device.ep_name, None)
    return tuple(names)


def effective_options(
    ep: str,
    device: str | None,
    asked: Mapping[str, str] | None = None,
    device_source: str | None = None,
    *,
    version: Callable[[str], str | None] = installed_version,
    names: Callable[[str], tuple[str, ...]] = registered_names,
    where: str = "--ep-option ",
) -> EffectiveOptions:
    """The route's decision for ``ep`` (canonical) on ``device`` (the resolved class) with ``asked``.
    ``version`` and ``names`` ask this machine; they are asked only when the answer matters. ``where``:
    the text before an option's key in its messages, as the user wrote it (``--ep-option qnn:``)."""
    asked = dict(asked or {})
    info = EPS.get(ep)
    checked = _check_keys(ep, asked, version, where) if asked else None
    device_type, source = None, None
    if info is not None and info.device_type_option:
        if DEVICE_TYPE in asked:
            device_type, source = asked[DEVICE_TYPE], where.strip()
        elif device:
            device_type, source = device.upper(), f"device {device}" + (f": {device_source}" if device_source else "")
    ep_name, reason = _choose_name(ep, names(ep) if info is not None and info.name_variants else ())
    return EffectiveOptions(ep, ep_name, reason, tuple(sorted(asked.items())), device_type, source, checked)


def plain_provider_options(target: Target, asked: Mapping[str, str] | None) -> tuple[EffectiveOptions, dict[str, str]]:
    """The route's one decision for a plain .onnx model on ``target``, and the options it hands the EP:
    ``asked`` checked against the EP's keys (unknown: exit 2), the EP's defaults added (QNN:
    backend_type=htp). `perf`, `bundle prepare` and `bundle import-prepared` all read it, so their
    prepared models share one cache key."""
    assert target.ep is not None  # a plain model has no config route: its target names the EP
    decided = effective_options(target.ep, target.device, dict(asked or {}))
    return decided, decided.for_stage({})


def device_from_options(ep: str, device: str | None, asked: Mapping[str, str] | None) -> str | None:
    """The ``--device`` word to resolve when ``asked`` pins ``device_type`` to one class (``CPU``,
    ``GPU``, ``NPU``) for an EP (any spelling) that takes it; UsageError when ``--device`` names another."""
    info = EPS.get(ep) or (EPS.get(normalize_ep_name(ep)) if is_known_ep(ep) else None)
    pinned = str((asked or {}).get(DEVICE_TYPE, "")).upper()
    if info is None or not info.device_type_option or pinned not in CONCRETE_DEVICE_TYPES:
        return device
    if device in ("cpu", "gpu", "npu") and device != pinned.lower():
        raise UsageError(
            f"--device {device} and --ep-option device_type={pinned} ask {ep_alias(info.name)} for two devices",
            f"drop one of them, or make them agree (--device {pinned.lower()})",
        )
    return pinned.lower()


def _check_keys(ep: str, asked: Mapping[str, str], version: Callable[[str], str | None], where: str) -> str | None:
    """Which key list ``asked`` was checked against ('onnxruntime-qnn 2.7.0'), or None when the EP has
    none; UsageError (exit 2) naming the accepted keys for a key the EP does not parse."""
    info = EPS.get(ep)
    if info is None or not info.option_keys:
        return None
    installed = version(ep)
    table = _table_for(info.option_keys, installed)
    accepted = table.keys | {DEVICE_TYPE} if info.device_type_option else table.keys
    unknown = sorted(set(asked) - accepted)
    against = f"{table.package} {table.version}"
    if unknown:
        if installed is None:
            whose = f"{against}'s key list ({info.install_package or table.package} is not installed here)"
        elif installed != table.version:
            whose = f"{against}'s key list (the table's newest; {installed} is installed and not in ep/table.py)"
        else:
            whose = f"the keys {against} parses"
        raise UsageError(
            f"{where}{unknown[0]}: {ep} has no provider option {unknown[0]!r} in {whose}; "
            "the EP would ignore it silently, so the run would not be what was asked",
            "use one of: " + ", ".join(sorted(accepted)),
        )
    _check_values(ep, asked, dict(table.values), against, where)
    return against


def _check_values(ep: str, asked: Mapping[str, str], rules: Mapping[str, Any], against: str, where: str) -> None:
    """UsageError (exit 2) for a value the EP does not take, where its facts say which it takes; any
    value with a control character or one of '|<>' (they break the derived config and its label)."""
    for key, value in sorted(asked.items()):
        text = str(value)
        if re.search(r"[\x00-\x1f\x7f|<>]", text):
            raise UsageError(
                f"{where}{key}={text!r}: a provider option value cannot hold a control character or any of '|<>'",
                f"pass {where}{key}=VALUE with a plain value",
            )
        rule = rules.get(key)
        if rule is None:
            continue
        if rule == INTEGER:
            ok = text.isascii() and text.isdigit() and len(text) <= 9
        elif rule == BOOL01:
            ok = text in ("0", "1")
        else:
            ok = text in rule
        if not ok:
            takes = rule if isinstance(rule, str) else "one of " + ", ".join(sorted(rule))
            raise UsageError(
                f"{where}{key}={text}: {ep} takes {takes} for {key!r} ({against}); "
                "another value would run as something else, or be ignored silently",
                f"pass {where}{key}="
                + (
                    "N"
                    if rule == INTEGER
                    else "0|1"
                    if rule == BOOL01
                    else ("htp" if "htp" in rule else sorted(rule)[0])
                ),
            )


def _table_for(tables: tuple[OptionKeys, ...], installed: str | None) -> OptionKeys:
    """The key list of the installed version, else the newest one listed."""
    exact = [t for t in tables if t.version == installed]
    return exact[0] if exact else max(tables, key=lambda t: tuple(int(p) for p in t.version.split(".") if p.isdigit()))


def _choose_name(ep: str, names: tuple[str, ...]) -> tuple[str, str | None]:
    """The name a forced route takes: always ``ep`` itself, with the reason when others are listed."""
    others = [n for n in names if n != ep]
    if not others:
        return ep, None
    info = EPS[ep]
    variants = dict(info.name_variants)
    why = "; ".join(f"{n}: {variants.get(n.rsplit('.', 1)[-1], 'another name of the same library')}" for n in others)
    return ep, (
        f"{ep} registers {len(names)} names ({', '.join(names)}); the route takes {ep}, the name onnxruntime-genai's "
        f"{info.genai_name} provider binds, with device_type pinned, so the device is the one reported ({why})"
    )


def options_lines(options: Mapping[str, Any] | None) -> list[str]:
    """What a decision (``EffectiveOptions.to_dict()``, as a record holds it) says on screen."""
    if not options:
        return []
    lines = []
    if options.get("device_type"):
        lines.append(f"device_type={options['device_type']} (from {options.get('device_type_source')})")
    if options.get("keys_checked_against"):
        lines.append(f"options checked against {options['keys_checked_against']}")
    elif set(options.get("asked") or {}) - {DEVICE_TYPE}:
        lines.append(
            f"options not checked: ep/table.py lists no keys {ep_alias(str(options.get('ep')))} parses, "
            "so a key it does not parse may be ignored silently"
        )
    if options.get("ep_name_reason"):
        lines.append(f"EP name {options.get('ep_name')}: {options['ep_name_reason']}")
    return lines
