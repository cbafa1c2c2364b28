"""The metric table: every metric the harness records, stores, exports, compares and draws.

Each ``Metric`` says what it is (name with its unit, which direction is better, labels), where its
values come from, and which consumers use it. Consumers iterate ``METRICS`` (in this order) or
ask ``get(name)``; no other module spells a metric's name. Adding a metric is one entry here, plus
a migration when it is ``stored`` (a column of the samples table, results/migrations.py); its test
beside its line in tests/unit/test_metrics.py's ``TABLE``.

Where the values come from (``source``):

- ``ITERATION``: one value per iteration, derived from that iteration's raw timings (volume /
  latency, never measured apart). ``derive`` is a function of one IterationSample.
- ``POOLED``: every value of every iteration pooled (``pool`` returns an iteration's values);
  summarised by percentiles (``percentiles``) rather than by a median over iterations.
- ``CELL``: one value per cell, read from the cell record at ``record_path``.

Which sessions produce it: ``token`` (generation sessions: runtime 'winml-genai') and ``plain``
(plain ONNX inference: runtime 'winml').
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from operator import attrgetter, itemgetter
from typing import Any

Sample = Any  # a model.sample.IterationSample (not imported: sample.py builds on this table)


class Source(StrEnum):
    """Where a metric's values come from (the module's docstring says each)."""

    ITERATION = "iteration"
    POOLED = "pooled"
    CELL = "cell"


class Better(StrEnum):
    """Which direction of a metric is better."""

    HIGHER = "higher"
    LOWER = "lower"


ITERATION, POOLED, CELL = Source.ITERATION, Source.POOLED, Source.CELL
HIGHER, LOWER = Better.HIGHER, Better.LOWER


# -- derivations (volume / latency of one generation) ---------------------------------------------
def tokens_per_s(tokens: int, ms: float | None) -> float:
    """Throughput of ``tokens`` in ``ms`` milliseconds; NaN without tokens or time."""
    return tokens / (ms / 1000.0) if tokens > 0 and ms and ms > 0 else math.nan


def decode_tokens_per_s(decode_step_ms: Sequence[float]) -> float:
    """Decode throughput of one generation: decode steps / their summed time."""
    return tokens_per_s(len(decode_step_ms), math.fsum(decode_step_ms))


def tpot_ms(decode_step_ms: Sequence[float]) -> float:
    """Time per output token after the first: the mean decode step of one generation."""
    return math.fsum(decode_step_ms) / len(decode_step_ms) if decode_step_ms else math.nan


def _raw(value: float | None) -> float:
    return math.nan if value is None else float(value)


def request_ttft_ms(generator_ms: float | None, ttft_ms: float | None) -> float:
    """What a request waits for its first token: generator creation, prompt and first token (NaN
    when the generator's creation was not measured)."""
    return math.nan if generator_ms is None or ttft_ms is None else float(generator_ms) + float(ttft_ms)


def _per_second(ms: float | None) -> float:
    return 1000.0 / ms if ms is not None and ms > 0 else math.nan


# -- the table ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Metric:
    name: str  # unit in the name (_ms, _bytes, _per_s)
    unit: str  # as exporters write it ("ms", "tokens/s", "bytes")
    better: Better
    label: str  # column header ("decode tok/s")
    word: str  # in sentences ("decode ran 1.8x faster")
    source: Source
    token: bool = False  # summarised for generation sessions
    plain: bool = False  # summarised for plain ONNX sessions
    derive: Callable[[Sample], float] | None = None  # ITERATION
    pool: Callable[[Sample], Sequence[float]] | None = None  # POOLED
    record_path: str | None = None  # CELL: dotted path in the cell record
    percentiles: tuple[str, ...] = ()  # POOLED: the summary percentiles reported beside the median
    needs_decode_steps: bool = False  # left out when no iteration had a decode step (one new token)
    optional: bool = False  # left out when no iteration measured it (every value NaN: older sessions, fakes)
    stored: bool = False  # a per-iteration column of the samples table (what compare tests)
    compared: bool = False  # compared by default (compare routes / runs, dashboard flags)
    exported: bool = False  # sent to benchmark dashboards (Bencher BMF, github-action-benchmark)
    drawn: bool = False  # offered in the static dashboard's history
    short_unit: str = ""  # beside a running value in the progress bar
    inverse_of: str | None = None  # the metric this one is the reciprocal of (a gate counts the pair once)

    @property
    def bigger_is_better(self) -> bool:
        return self.better == Better.HIGHER


def _steps(s: Sample) -> Sequence[float]:
    steps: Sequence[float] = s.decode_step_ms
    return steps


_HEADLINE: dict[str, Any] = dict(stored=True, compared=True, exported=True, drawn=True)

METRICS: tuple[Metric, ...] = (
    Metric(
        "decode_tokens_per_s",
        "tokens/s",
        HIGHER,
        "decode tok/s",
        "decode",
        ITERATION,
        token=True,
        derive=lambda s: decode_tokens_per_s(s.decode_step_ms),
        needs_decode_steps=True,
        short_unit="tok/s",
        **_HEADLINE,
    ),
    Metric(
        "prompt_tokens_per_s",
        "tokens/s",
        HIGHER,
        "prompt tok/s",
        "prompt",
        ITERATION,
        token=True,
        derive=lambda s: tokens_per_s(s.prompt_tokens or 0, s.prompt_ms),
        short_unit="tok/s",
        **_HEADLINE,
    ),
    Metric(
        "ttft_ms",
        "ms",
        LOWER,
        "TTFT ms",
        "TTFT",
        ITERATION,
        token=True,
        derive=lambda s: _raw(s.ttft_ms),
        short_unit="ms",
        **_HEADLINE,
    ),
    Metric(
        "request_ttft_ms",
        "ms",
        LOWER,
        "request TTFT ms",
        "request TTFT",
        ITERATION,
        token=True,
        derive=lambda s: request_ttft_ms(s.generator_ms, s.ttft_ms),
        optional=True,
        short_unit="ms",
    ),
    Metric(
        "generator_ms",
        "ms",
        LOWER,
        "generator ms",
        "generator creation",
        ITERATION,
        token=True,
        derive=lambda s: _raw(s.generator_ms),
        optional=True,
        short_unit="ms",
    ),
    Metric(
        "tpot_ms",
        "ms",
        LOWER,
        "TPOT ms",
        "TPOT",
        ITERATION,
        token=True,
        derive=lambda s: tpot_ms(s.decode_step_ms),
        needs_decode_steps=True,
        short_unit="ms",
        inverse_of="decode_tokens_per_s",
        **_HEADLINE,
    ),
    Metric(
        "e2e_ms",
        "ms",
        LOWER,
        "e2e ms",
        "end-to-end",
        ITERATION,
        token=True,
        derive=lambda s: _raw(s.e2e_ms),
        short_unit="ms",
        **_HEADLINE,
    ),
    Metric(
        "prompt_ms",
        "ms",
        LOWER,
        "prompt ms",
        "prompt time",
        ITERATION,
        token=True,
        derive=lambda s: _raw(s.prompt_ms),
        stored=True,
        short_unit="ms",
    ),
    Metric(
        "itl_ms",
        "ms",
        LOWER,
        "ITL ms",
        "inter-token latency",
        POOLED,
        token=True,
        pool=_steps,
        percentiles=("p50", "p90", "p95", "p99"),
        needs_decode_steps=True,
        exported=True,
        short_unit="ms",
    ),
    Metric(
        "latency_ms",
        "ms",
        LOWER,
        "latency ms",
        "latency",
        ITERATION,
        plain=True,
        derive=lambda s: _raw(s.latency_ms),
        short_unit="ms",
        **_HEADLINE,
    ),
    Metric(
        "inferences_per_s",
        "inferences/s",
        HIGHER,
        "inferences/s",
        "inference rate",
        ITERATION,
        plain=True,
        derive=lambda s: _per_second(s.latency_ms),
        exported=True,
        short_unit="inf/s",
    ),
    Metric(
        "peak_rss_bytes",
        "bytes",
        LOWER,
        "peak RSS bytes",
        "peak RSS",
        CELL,
        record_path="memory.peak_rss_bytes",
        exported=True,
        drawn=True,
    ),
    Metric(
        "device_memory_peak_used_bytes",
        "bytes",
        LOWER,
        "device memory bytes",
        "device memory",
        CELL,
        record_path="memory.device_memory_peak_used_bytes",
    ),
    Metric(
        "model_load_ms", "ms", LOWER, "load ms", "model load", CELL, record_path="load.model_load_ms", exported=True
    ),
    Metric(
        "first_generation_ms",
        "ms",
        LOWER,
        "first generation ms",
        "first generation",
        CELL,
        record_path="load.first_generation_ms",
    ),
    Metric("prepare_ms", "ms", LOWER, "prepare ms", "prepare", CELL, record_path="load.prepare_ms"),
    Metric("compile_ms", "ms", LOWER, "compile ms", "compile", CELL, record_path="load.compile_ms"),
    Metric(
        "prefill_j_per_token",
        "J/token",
        LOWER,
        "prefill J/token",
        "prefill energy",
        CELL,
        record_path="energy.prefill_j_per_token",
        exported=True,
    ),
    Metric(
        "decode_j_per_token",
        "J/token",
        LOWER,
        "decode J/token",
        "decode energy",
        CELL,
        record_path="energy.decode_j_per_token",
        exported=True,
    ),
    Metric("idle_w", "W", LOWER, "idle W", "idle power", CELL, record_path="energy.idle_w"),
    Metric(
        "roofline_fraction",
        "fraction",
        HIGHER,
        "roofline fraction",
        "roofline fraction",
        CELL,
        record_path="roofline.fraction_of_bound",
    ),
)

BY_NAME: Mapping[str, Metric] = {m.name: m for m in METRICS}

# Metrics some consumer needs by role, not by iterating the table.
DECODE_THROUGHPUT = BY_NAME["decode_tokens_per_s"]  # the roofline's measured side; primary of generation
PROMPT_THROUGHPUT = BY_NAME["prompt_tokens_per_s"]
TTFT = BY_NAME["ttft_ms"]
E2E = BY_NAME["e2e_ms"]  # primary of a one-token generation
ITL = BY_NAME["itl_ms"]
LATENCY = BY_NAME["latency_ms"]  # primary of a plain ONNX session
INFERENCE_RATE = BY_NAME["inferences_per_s"]
PEAK_RSS = BY_NAME["peak_rss_bytes"]
MODEL_LOAD = BY_NAME["model_load_ms"]
#: Every metric the adaptive stopping rule may watch (the schema's primary_metric enum).
PRIMARY_METRICS = (DECODE_THROUGHPUT, E2E, LATENCY)

_SUFFIX_UNITS = (
    ("tokens_per_s", "tokens/s"),
    ("_ms", "ms"),
    ("_bytes", "bytes"),
    ("_per_s", "1/s"),
    ("_fraction", "fraction"),
    ("_j_per_token", "J/token"),
    ("_w", "W"),
    ("_s", "s"),
)


def get(name: str) -> Metric | None:
    return BY_NAME.get(name)


def bigger_is_better(name: str) -> bool:
    """Direction of a metric; a name outside the table (a record from another version) follows the
    naming convention of the record schema: rates (``_per_s``) up, times and bytes down."""
    m = BY_NAME.get(name)
    return m.bigger_is_better if m else name.endswith("_per_s")


def unit(name: str) -> str:
    """Unit of a metric; outside the table, read from the unit suffix of its name."""
    m = BY_NAME.get(name)
    if m:
        return m.unit
    return next((u for suffix, u in _SUFFIX_UNITS if name.endswith(suffix)), "")


def sort_key(name: str) -> tuple[int, str]:
    """Table order; names outside the table after it, alphabetically."""
    m = BY_NAME.get(name)
    return (METRICS.index(m), "") if m else (len(METRICS), name)


def session_metrics(token_based: bool) -> tuple[Metric, ...]:
    """The metrics summarised over the iterations of one kind of session, in table order."""
    return tuple(m for m in METRICS if m.source != CELL and (m.token if token_based else m.plain))


def primary_metric(token_based: bool, max_new_tokens: int | None) -> str:
    """The metric the adaptive stopping rule and the variation warning watch."""
    if not token_based:
        return LATENCY.name
    return (DECODE_THROUGHPUT if (max_new_tokens or 0) > 1 else E2E).name


#: Each per-iteration metric's name and derivation, in table order.
_DERIVED: tuple[tuple[str, Callable[[Sample], float]], ...] = tuple(
    (m.name, m.derive) for m in METRICS if m.source == ITERATION and m.derive is not None
)


def iteration_values(sample: Sample) -> dict[str, float]:
    """Every per-iteration metric of one sample (NaN where the sample cannot give it)."""
    return {name: derive(sample) for name, derive in _DERIVED}


def metric_values(samples: Sequence[Sample], name: str) -> list[float]:
    """One per-iteration metric over samples, or a pooled metric's every value."""
    m = BY_NAME[name]
    if m.source == POOLED:
        pool = m.pool
        assert pool is not None, f"pooled metric {name} has no pool"
        return [float(x) for s in samples for x in pool(s)]
    return list(map(itemgetter(name), map(attrgetter("values"), samples)))
