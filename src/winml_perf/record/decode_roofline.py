"""The physical roofline of decode: the least time a decode step can take, given the bytes it reads
and the bandwidth of the memory each stage reads them from, against the measured step time.

Stages on different devices are bounded separately and add up: ``bound_s = sum(bytes_d / bw_d)``;
``fraction = bound_s / measured step time = bound_s x decode tokens/s``. A fraction above 1 means a
wrong byte count or bandwidth (a bug): ``bound_fraction`` raises it and the record keeps no fraction,
only the figure that exceeded and why. Where a device's bandwidth is unknown there is no fraction,
and the record says which stage and why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from winml_perf.bundle.decode_bytes import DecodeBytes, decode_bytes
from winml_perf.model.route import Route
from winml_perf.record.device_bandwidth import HOST, NVIDIA_GPU, UNKNOWN, stage_device
from winml_perf.support.errors import BenchmarkFailure, WinmlPerfError
from winml_perf.support.human_numbers import human

if TYPE_CHECKING:
    from winml_perf.bundle.config import GenaiConfig

WORKING_SET_NOTE = (
    "host bytes per step under 1 GiB (they may sit in the CPU caches): bounded by the faster of the DRAM probe "
    "and a probe re-reading a working set of that size"
)


class RooflineExceeded(BenchmarkFailure):
    """A decode faster than its physical bound: the byte count or the bandwidth is wrong."""


def bound_fraction(bound_s: float, decode_tokens_per_s: float) -> float:
    """Fraction of the memory-bound step time the measured step reaches; RooflineExceeded above 1."""
    fraction = bound_s * decode_tokens_per_s
    if not 0 < fraction <= 1:
        raise RooflineExceeded(
            f"decode at {human(decode_tokens_per_s)} tok/s is {human(fraction)}x its memory bound ({human(bound_s * 1e6)} us/step)",
            "the bytes per step or the bandwidth is wrong: report the bundle and the device",
        )
    return fraction


def _empty(note: str, db: DecodeBytes | None = None) -> dict[str, Any]:
    return {
        "bandwidth_bytes_per_s": None,
        "bandwidth_source": None,
        "weights_bytes_per_token": None if db is None else round(db.total_bytes),
        "bound_tokens_per_s": None,
        "fraction_of_bound": None,
        "bytes_per_step": None if db is None else db.to_dict(),
        "devices": [],
        "bound": None,
        "note": note,
    }


def _bandwidth_for(device: str, bandwidths: Mapping[str, Mapping[str, Any] | None]) -> tuple[float | None, str | None]:
    figure = bandwidths.get(device) or {}
    bw = figure.get("bandwidth_bytes_per_s")
    return (bw if bw and bw > 0 else None), figure.get("method") or figure.get("error")


def _host_bandwidth(
    dram: Mapping[str, Any] | None, step_bytes: float, working_set: Callable[[float], Mapping[str, Any] | None] | None
) -> tuple[Mapping[str, Any] | None, bool]:
    """The host figure that bounds a step: the DRAM probe, or a working-set probe of the step's size where that is faster."""
    small = working_set(step_bytes) if working_set else None
    dram_bw = (dram or {}).get("bandwidth_bytes_per_s") or 0
    if small and (small.get("bandwidth_bytes_per_s") or 0) > dram_bw:
        return small, True
    return dram, small is not None


def decode_roofline(
    decode_tokens_per_s: float | None,
    bundle: str,
    route: Route,
    prompt_tokens: int,
    max_new_tokens: int,
    environment: Mapping[str, Any],
    bandwidths: Mapping[str, Mapping[str, Any] | None],
    working_set: Callable[[float], Mapping[str, Any] | None] | None = None,
    config: GenaiConfig | None = None,
) -> dict[str, Any]:
    """The record's roofline section. ``bandwidths``: {HOST: cached_bandwidth(), NVIDIA_GPU: nvidia_bandwidth()};
    ``working_set(bytes)``: a host probe for working sets that fit in the caches (working_set_bandwidth);
    ``config``: the bundle's genai config when the run has it (else read from ``bundle``)."""
    try:
        db = decode_bytes(bundle, prompt_tokens, max_new_tokens, config=config)
    except WinmlPerfError as exc:
        return _empty(f"not computed: {exc}")
    stages = {s.stage: s for s in route.stages}
    per_device: dict[str, dict[str, Any]] = {}
    for s in db.stages:
        # what ran the stage: the session's report, else the placement proof, else what the route asked
        dev = stage_device(stages[s.stage].ran_on(route.actual) if s.stage in stages else None, environment)
        entry = per_device.setdefault(
            dev.device, {"device": dev.device, "labels": [], "stages": [], "bytes": 0.0, "emulated": False}
        )
        entry["labels"].append(dev.label)
        entry["stages"].append(s.stage)
        entry["bytes"] += s.total_bytes
        entry["emulated"] = entry["emulated"] or dev.emulated
    if UNKNOWN in per_device:
        return _empty(
            f"no fraction: stage(s) {', '.join(per_device[UNKNOWN]['stages'])} run on {per_device[UNKNOWN]['labels'][0]}",
            db,
        )
    bandwidths = dict(bandwidths)
    cache_resident = False
    if HOST in per_device:
        bandwidths[HOST], cache_resident = _host_bandwidth(bandwidths.get(HOST), per_device[HOST]["bytes"], working_set)
    bound_s = 0.0
    for device, entry in per_device.items():
        bw, source = _bandwidth_for(device, bandwidths)
        if bw is None:
            return _empty(f"no fraction: the {device} bandwidth is not known ({source or 'not measured'})", db)
        entry.update(
            labels=sorted(set(entry["labels"])),
            bandwidth_bytes_per_s=bw,
            bandwidth_source=source,
            bound_s=entry["bytes"] / bw,
        )
        bound_s += entry["bound_s"]
    devices = list(per_device.values())
    out = _empty("", db)
    out.update(
        devices=devices,
        bound_tokens_per_s=1 / bound_s,
        bound=" + ".join(
            f"{e['bytes']:.0f} B / {human(e['bandwidth_bytes_per_s'] / 1e9)} GB/s ({e['device']})" for e in devices
        ),
    )
    if len(devices) == 1:  # one device: its figure is the bandwidth of the bound
        out.update(
            bandwidth_bytes_per_s=devices[0]["bandwidth_bytes_per_s"], bandwidth_source=devices[0]["bandwidth_source"]
        )
    notes = [WORKING_SET_NOTE] if cache_resident else []
    notes += (
        ["stages on an emulator: the bound is the host's, not the emulated device's"]
        if any(e["emulated"] for e in devices)
        else []
    )
    if decode_tokens_per_s and math.isfinite(decode_tokens_per_s):
        try:
            out["fraction_of_bound"] = bound_fraction(bound_s, decode_tokens_per_s)
        except RooflineExceeded as exc:
            out["exceeds_bound_fraction"] = bound_s * decode_tokens_per_s
            notes.insert(0, f"bug: {exc}")
    out["note"] = "; ".join(notes) or "bytes per step from the graphs; bandwidth of each stage's device"
    return out


__all__ = ["decode_roofline", "bound_fraction", "RooflineExceeded", "HOST", "NVIDIA_GPU"]
