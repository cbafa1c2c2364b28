"""`winml devices`: list every EP device onnxruntime offers here, built-in and plugin."""

from __future__ import annotations

import sys

import typer

from winml_perf.ep.devices import EPDevice, describe_available, list_ep_devices
from winml_perf.ep.plugins import ENV_VAR, PluginRegistration, register_plugin_eps, skipped_plugins
from winml_perf.ep.table import EPS, install_sentence
from winml_perf.publish.formats import Offer, check_format, format_help, format_named, result_text
from winml_perf.support.text_table import fill

_HEADERS = ("EP", "EP vendor", "device type", "serves", "hardware vendor", "vendor id", "device id", "source")
#: The columns that leave a narrow terminal, in this order (EP, device type and source stay).
_DROP_ORDER = ("device id", "vendor id", "EP vendor", "hardware vendor", "serves")


def _notes(devices: list[EPDevice], registrations: list[PluginRegistration]) -> list[str]:
    notes = []
    listed = {d.ep_name for d in devices}
    for reg in registrations:
        if reg.ep_name not in listed:
            why = EPS[reg.ep_name].no_device_hint if reg.ep_name in EPS else ""
            hint = f" ({why})" if why else ""
            notes.append(f"{reg.ep_name} registered from {reg.library_path} but offers no device here{hint}")
    if any(d.inferred for d in devices):
        notes.append("entries marked inferred come from get_available_providers(); their device type is assumed")
    notes.append(f"device classes: {describe_available(devices)}")
    return notes


def _missing(devices: list[EPDevice]) -> list[dict[str, str]]:
    """The EPs of the table not here, each with the one sentence that says how to get it (ep/table.py)."""
    here = {d.ep_name for d in devices}
    return [
        {"ep": name, "install": install_sentence(name)} for name in EPS if name not in here and install_sentence(name)
    ]


def hex_id(value: int | None) -> str:
    return "" if value is None else f"0x{value:04x}"


def _row(d: EPDevice) -> list[str]:
    source = d.source if d.library_path is None else f"{d.source}: {d.library_path}"
    if d.inferred:
        source += " (inferred)"
    return [
        d.ep_name,
        d.ep_vendor,
        d.device_type,
        ",".join(d.serves) or "-",
        d.hw_vendor,
        hex_id(d.vendor_id),
        hex_id(d.device_id),
        source,
    ]


def devices_command(
    format: str = typer.Option("table", "--format", metavar="FORMAT", help=format_help(Offer.ROWS)),
    ep_library: list[str] | None = typer.Option(
        None, "--ep-library", metavar="NAME=PATH", help=f"NAME=PATH of a plugin EP library (repeatable; also {ENV_VAR})"
    ),
) -> None:
    """List the execution-provider devices onnxruntime offers on this machine (plugins included)."""
    check_format(Offer.ROWS, format)
    registrations = register_plugin_eps(ep_library or ())
    devices = list_ep_devices()
    notes, missing = _notes(devices, registrations), _missing(devices)
    listed = [d.to_dict() for d in devices]
    skipped = [{"ep_name": ep, "error": str(why)} for ep, why in sorted(skipped_plugins().items())]
    payload = {
        "devices": listed,
        "plugins": [r.to_dict() for r in registrations],
        "plugins_skipped": skipped,  # each also a warning on stderr when it was skipped
        "notes": notes,
        "not_here": missing,
    }
    sys.stdout.write(result_text(format, payload, listed, _HEADERS, [_row(d) for d in devices], drop=_DROP_ORDER))
    if format_named(format).holds_document:
        return  # the document holds the notes and what is not here
    for note in notes:
        print(fill(f"note: {note}"), file=sys.stderr)
    if format_named(format).terminal and missing:
        print("not here, and how to get each (README: Getting WebGPU, QNN, OpenVINO):", file=sys.stderr)
        for m in missing:
            print(fill(f"  {m['install']}"), file=sys.stderr)
