"""Sections of a cell record (model/record.py) that hold figures beside the samples: memory, each
invocation's figures, the intervals and what they cover (uncertainty), energy, the roofline and a
sustained run's series.

Each is a JsonSection (model/json_section.py): typed fields for the keys this version names, read
and written back key for key. Inner objects stay mappings where they are lists of figures the
measuring side computes and the renderers print as they are (intervals, windows, phases, devices);
their keys are in schemas/record.schema.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from winml_perf.model.json_section import JsonSection, tuple_of

#: An interval or other figure group as the measuring side writes it (keys: the schema's).
Figures = Mapping[str, Any]


@dataclass(frozen=True)
class Memory(JsonSection):
    """RSS and device memory of the cell's session(s) (measure/memory.py, the cell driver)."""

    NESTED: ClassVar[Mapping[str, Any]] = {"peak_rss_bytes_per_invocation": tuple_of()}

    peak_rss_bytes: int | None = None
    baseline_rss_bytes: int | None = None  # before the session's libraries and model loaded
    model_rss_bytes: int | None = None  # peak above the baseline
    ru_maxrss_bytes: int | None = None
    rss_sample_count: int | None = None
    rss_sample_interval_s: float | None = None
    pid: int | None = None
    device_memory_peak_used_bytes: int | None = None
    device_memory_peak_process_bytes: int | None = None
    device_memory_note: str | None = None
    scope: str | None = None  # what the figures cover, as the schedule ran the cell
    peak_rss_bytes_per_invocation: tuple[int | None, ...] | None = None  # `winml serve`


@dataclass(frozen=True)
class Invocation(JsonSection):
    """One invocation (a fresh process and model load, or one session) that served the cell."""

    index: int | None = None
    round: int | None = None
    pid: int | None = None
    model_load_ms: float | None = None
    warmup_iterations: int | None = None
    warmup_s: float | None = None
    measure_s: float | None = None
    next: str | None = None  # why it ended, when an adaptive policy's decision ended it
    iterations: int | None = None
    medians: Mapping[str, float | None] | None = None  # metric -> this invocation's median


@dataclass(frozen=True)
class Uncertainty(JsonSection):
    """The cell's intervals and what they cover (record/build.py cell_statistics)."""

    NESTED: ClassVar[Mapping[str, Any]] = {"itl_percentiles": tuple_of()}

    invocation_kind: str | None = None  # "process" | "session"
    itl_percentiles: tuple[Figures, ...] | None = None
    primary: Figures | None = None  # the primary metric's interval
    coverage: Figures | None = None  # what it covers: levels and counts
    label: str | None = None  # '5 proc', 'in-proc'
    within_process: Figures | None = None
    metrics: Mapping[str, Figures] | None = None  # metric -> its interval
    within_process_metrics: Mapping[str, Figures] | None = None


@dataclass(frozen=True)
class Energy(JsonSection):
    """J/token per phase or why not, idle power and the power state (power/accounting.py cell_energy)."""

    status: str | None = None  # "measured" | "not measured"
    reason: str | None = None
    meter: Figures | None = None  # what it covers, resolution, update period
    idle: Figures | None = None
    idle_w: float | None = None
    rule: Figures | None = None
    prefill: Figures | None = None
    decode: Figures | None = None
    prefill_j_per_token: float | None = None
    decode_j_per_token: float | None = None
    power_state: Figures | None = None  # governor, clocks, power limit, EP modes, AC/battery
    power_state_differs: Mapping[str, Figures] | None = None  # other route -> what differs


@dataclass(frozen=True)
class Roofline(JsonSection):
    """The decode bound from bytes per step and bandwidth (record/decode_roofline.py)."""

    NESTED: ClassVar[Mapping[str, Any]] = {"weights_files": tuple_of(), "devices": tuple_of()}

    bandwidth_bytes_per_s: float | None = None
    bandwidth_source: str | None = None
    weights_bytes_per_token: int | None = None
    weights_files: tuple[str, ...] | None = None  # older records
    bound_tokens_per_s: float | None = None
    fraction_of_bound: float | None = None
    exceeds_bound_fraction: float | None = None
    bytes_per_step: Figures | None = None
    devices: tuple[Figures, ...] | None = None  # one per memory the stages read
    bound: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Sustained(JsonSection):
    """--duration: tokens/s, energy and RSS over time in windows and what they show
    (stats/series/sustained.py analyse)."""

    NESTED: ClassVar[Mapping[str, Any]] = {"windows": tuple_of(), "change_points": tuple_of()}

    duration_s: float | None = None
    window_s: float | None = None
    windows: tuple[Figures, ...] | None = None
    change_points: tuple[Figures, ...] | None = None  # None: too few windows to look
    change_points_note: str | None = None
    tokens_per_s_slope_per_min: Figures | None = None
    rss_slope_bytes_per_min: Figures | None = None
    power_slope_w_per_min: Figures | None = None
