"""Typed sections of a cell record (model/record.py): the shape, the policies, the raw samples, the
summary of each metric, the headline scalars and the warnings.

The route (model/route.py Route), the load phases and the failure (model/result.py LoadPhases,
CellFailure) are the types the measuring side already builds. Each section's ``to_dict`` writes
exactly its part of a record's JSON (schemas/record.schema.json), key order included, and
``from_dict`` reads it back; nothing else in the package turns a section into a dict.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import IterationPolicy, SessionSpec, WarmupPolicy, finite_or_none

#: A headline value: a number, a metric's name, a coverage label, or None when not measured.
Scalar = float | int | str | None


@dataclass(frozen=True)
class Shape:
    """The cell's shape as it ran (prompt_tokens: what the prompt came to; None for plain models)."""

    prompt_tokens: int | None
    max_new_tokens: int | None
    requested_prompt_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "max_new_tokens": self.max_new_tokens,
            "requested_prompt_tokens": self.requested_prompt_tokens,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Shape:
        return cls(d.get("prompt_tokens"), d.get("max_new_tokens"), d.get("requested_prompt_tokens"))


@dataclass(frozen=True)
class Policy:
    """How the cell was measured, as recorded: the warmup and iteration policies
    (model/spec.py WarmupPolicy/IterationPolicy.to_dict()), the cell timeout, the session spec, and
    the sweep's settings (``sweep``: rounds, seed, isolate, invocations). Kept as written, so a
    record from another version is read and written again without a key lost or added."""

    warmup: Mapping[str, Any]
    iterations: Mapping[str, Any]
    rest: Mapping[str, Any] = field(default_factory=dict)  # cell_timeout_s, session, the sweep's settings

    @classmethod
    def of(
        cls,
        warmup: WarmupPolicy,
        iterations: IterationPolicy,
        cell_timeout_s: float | None,
        session: SessionSpec,
        sweep: Mapping[str, Any],
    ) -> Policy:
        """The policy section of a cell measured here."""
        rest = {"cell_timeout_s": cell_timeout_s, "session": session.to_dict(), **sweep}
        return cls(warmup.to_dict(), iterations.to_dict(), rest)

    @property
    def adaptive(self) -> bool:
        """Whether the iterations ran until a target CI (else a fixed count)."""
        return self.iterations.get("mode") == "adaptive"

    @property
    def session_options(self) -> Mapping[str, Any] | None:
        """The session's options as recorded (a plain ONNX model's EP, shapes, IO binding...)."""
        session = self.rest.get("session")
        options = session.get("options") if isinstance(session, Mapping) else None
        return options if isinstance(options, Mapping) else None

    @property
    def target_ci_pct(self) -> float | None:
        value = self.iterations.get("target_ci_pct")
        return None if value is None else float(value)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy({"warmup": dict(self.warmup), "iterations": dict(self.iterations), **self.rest})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Policy:
        rest = {k: v for k, v in d.items() if k not in ("warmup", "iterations")}
        return cls(dict(d["warmup"]), dict(d["iterations"]), copy.deepcopy(rest))


@dataclass(frozen=True)
class RecordSamples:
    """The raw samples of a cell: warmup iterations, then measured ones. ``keep_token_ids``: the
    generated token ids are written with each sample (--keep-token-ids)."""

    warmup: tuple[IterationSample, ...] = ()
    iterations: tuple[IterationSample, ...] = ()
    keep_token_ids: bool = False

    def to_dict(self) -> dict[str, list[dict[str, Any]]]:
        keep = self.keep_token_ids
        return {
            "warmup": [s.to_dict(keep) for s in self.warmup],
            "iterations": [s.to_dict(keep) for s in self.iterations],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Sequence[Mapping[str, Any]]]) -> RecordSamples:
        warmup, iterations = d.get("warmup") or (), d.get("iterations") or ()
        return cls(
            tuple(IterationSample.from_dict(s) for s in warmup),
            tuple(IterationSample.from_dict(s) for s in iterations),
            any("token_ids" in s for s in (*warmup, *iterations)),
        )


@dataclass(frozen=True)
class MetricSummary:
    """Statistics of one metric over a cell's iterations (itl_ms: over every decode step), None
    where a value is not finite. The CI is the median's (stats/cell_intervals.py says over what)."""

    n: int
    mean: float | None
    median: float | None
    stdev: float | None
    cv_pct: float | None
    min: float | None
    max: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    ci95_low: float | None
    ci95_high: float | None
    ci95_half_width_pct: float | None
    outlier_indices: tuple[int, ...] = ()

    @classmethod
    def of(cls, summary: Any) -> MetricSummary:
        """From an object with these attributes (stats.sample_stats.Summary), NaN as None."""
        values = {f.name: getattr(summary, f.name) for f in fields(cls)}
        floats = {k: finite_or_none(v) for k, v in values.items() if k not in ("n", "outlier_indices")}
        return cls(n=int(values["n"]), outlier_indices=tuple(values["outlier_indices"]), **floats)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        d["outlier_indices"] = list(self.outlier_indices)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MetricSummary:
        values: dict[str, Any] = {f.name: d.get(f.name) for f in fields(cls)}
        values["outlier_indices"] = tuple(d.get("outlier_indices") or ())
        return cls(**values)


@dataclass(frozen=True, eq=False)  # Mapping's equality: equal to a dict of the same scalars
class Headline(Mapping[str, Scalar]):
    """The headline scalars of a cell, by name (a metric's median, ``<metric>_p90`` of pooled ones,
    the primary metric's CI, counts): a read-only mapping in the order the record writes them, with
    the values every reader needs as attributes."""

    scalars: Mapping[str, Scalar] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Scalar:
        return self.scalars[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.scalars)

    def __len__(self) -> int:
        return len(self.scalars)

    def number(self, name: str) -> float | None:
        value = self.scalars.get(name)
        return None if value is None or isinstance(value, str) else float(value)

    def count(self, name: str) -> int | None:
        value = self.scalars.get(name)
        return value if isinstance(value, int) else None

    @property
    def primary_metric(self) -> str | None:
        value = self.scalars.get("primary_metric")
        return value if isinstance(value, str) else None

    @property
    def iterations(self) -> int | None:
        return self.count("iterations")

    @property
    def invocations(self) -> int | None:
        return self.count("invocations")

    @property
    def primary_ci95_half_width_pct(self) -> float | None:
        return self.number("primary_ci95_half_width_pct")

    @property
    def primary_ci95_covers(self) -> str | None:
        """What the primary metric's interval covers ('5 proc'), None when no interval over invocations."""
        value = self.scalars.get("primary_ci95_covers")
        return value if isinstance(value, str) else None

    def to_dict(self) -> dict[str, Scalar]:
        return dict(self.scalars)

    @classmethod
    def from_dict(cls, d: Mapping[str, Scalar]) -> Headline:
        return cls(dict(d))


@dataclass(frozen=True)
class RecordWarning:
    """A warning about a cell: what (``code``), the detail, what to do, and its figures."""

    code: str
    message: str
    remedy: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "remedy": self.remedy, "data": dict(self.data)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RecordWarning:
        return cls(d["code"], d["message"], d["remedy"], dict(d.get("data") or {}))
