"""A sustained run's series over time: windows of tokens/s, power and RSS, the change points of
tokens/s (drift or throttling inside the run, by the nightly's E-Divisive test in changepoint.py),
and Theil-Sen slopes with their 95 % intervals (scipy.stats.theilslopes) of RSS (memory growth)
and of tokens/s (slow drift). Pure functions of the batch points the driver kept."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from winml_perf.stats.series.changepoint import detect_change_points

#: Windows a run is cut into at most; the shortest window (s).
MAX_WINDOWS = 120
MIN_WINDOW_S = 0.5
#: Change points need this many windows a side (changepoint.DEFAULT_MIN_SIZE).
MIN_SIZE = 5
SLOPE_CONFIDENCE = 0.95


def window_s(duration_s: float) -> float:
    """The window length: the run in at most MAX_WINDOWS windows, none under MIN_WINDOW_S."""
    return max(MIN_WINDOW_S, duration_s / MAX_WINDOWS)


def windows(points: Sequence[Mapping[str, Any]], width_s: float) -> list[dict[str, Any]]:
    """Batch points (t_s, wall_s, tokens, rss_bytes, energy_j) grouped into windows by start time."""
    groups: dict[int, list[Mapping[str, Any]]] = {}
    for p in points:
        groups.setdefault(int(p["t_s"] // width_s), []).append(p)
    out = []
    for k in sorted(groups):
        g = groups[k]
        wall = math.fsum(p["wall_s"] for p in g)
        tokens = sum(int(p["tokens"]) for p in g)
        rss = [p["rss_bytes"] for p in g if p.get("rss_bytes") is not None]
        energies = [p["energy_j"] for p in g if p.get("energy_j") is not None]
        out.append(
            {
                "t_s": k * width_s,
                "wall_s": wall,
                "tokens": tokens,
                "tokens_per_s": tokens / wall if wall > 0 else None,
                "rss_bytes": rss[-1] if rss else None,
                "power_w": math.fsum(energies) / wall if energies and len(energies) == len(g) and wall > 0 else None,
            }
        )
    return out


def slope(t: Sequence[float], y: Sequence[float], per_s: float = 60.0) -> dict[str, Any] | None:
    """Theil-Sen slope of y over t per ``per_s`` seconds with its 95 % interval (None below 3 points)."""
    if len(y) < 3 or len(set(t)) < 2:
        return None
    from scipy.stats import theilslopes  # only a sustained run pays scipy.stats's import

    s, intercept, low, high = theilslopes(np.asarray(y, float), np.asarray(t, float), alpha=SLOPE_CONFIDENCE)
    return {
        "per_s": per_s,
        "slope": float(s) * per_s,
        "low": float(low) * per_s,
        "high": float(high) * per_s,
        "intercept": float(intercept),
        "confidence": SLOPE_CONFIDENCE,
        "method": "theil_sen",
        "points": len(y),
    }


def analyse(points: Sequence[Mapping[str, Any]], duration_s: float) -> dict[str, Any]:
    """The record's ``sustained`` section: the windows and what they show."""
    width = window_s(duration_s)
    ws = windows(points, width)
    rates = [(w["t_s"], w["tokens_per_s"]) for w in ws if w["tokens_per_s"] is not None]
    out: dict[str, Any] = {"duration_s": duration_s, "window_s": width, "windows": ws}
    if len(rates) >= 2 * MIN_SIZE:
        found = detect_change_points([r for _, r in rates], higher_is_better=True, min_size=MIN_SIZE)
        out["change_points"] = [{**cp.to_dict(), "t_s": rates[cp.index][0], "run_id": None} for cp in found]
    else:
        out["change_points"] = None
        out["change_points_note"] = f"{len(rates)} windows: change points need at least {2 * MIN_SIZE}"
    out["tokens_per_s_slope_per_min"] = slope([t for t, _ in rates], [r for _, r in rates])
    mem = [(w["t_s"], w["rss_bytes"]) for w in ws if w["rss_bytes"] is not None]
    out["rss_slope_bytes_per_min"] = slope([t for t, _ in mem], [m for _, m in mem])
    power = [(w["t_s"], w["power_w"]) for w in ws if w["power_w"] is not None]
    out["power_slope_w_per_min"] = slope([t for t, _ in power], [p for _, p in power])
    safe: dict[str, Any] = _json_safe(out)
    return safe


def _json_safe(value: Any) -> Any:
    """NaN and infinities as None (a record is JSON without NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value
