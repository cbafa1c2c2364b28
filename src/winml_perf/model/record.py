"""Records: what a measurement leaves behind, as frozen dataclasses with to_dict/from_dict.

A ``CellRecord`` is one JSON document per cell (one route at one shape), self-contained: route,
shape, policies, load phases, raw per-iteration samples, summary metrics (units in the names),
memory, roofline, environment, warnings, status. Its sections are typed (model/record_sections.py,
model/record_context.py, model/record_measures.py, model/route.py, model/result.py);
``to_dict``/``from_dict`` are only for the JSON edges (-o
files, the store, imports). A ``RunRecord`` groups the cells of one
invocation under a ``run_id`` with the sweep's description (routes, shapes, seed, round orders).

Both carry ``schema_version``; ``schemas/record.schema.json`` is the JSON Schema of the dicts
(record/validation.py checks a dict against it).
This module is plain data: it imports nothing from the measuring side (measure/) nor onnxruntime.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from importlib import resources
from typing import Any, TypeVar

from winml_perf.model.cell_status import CellStatus
from winml_perf.model.json_section import JsonSection
from winml_perf.model.record_context import Environment, Explain, Output, Prompt
from winml_perf.model.record_measures import Energy, Invocation, Memory, Roofline, Sustained, Uncertainty
from winml_perf.model.record_sections import Headline, MetricSummary, Policy, RecordSamples, RecordWarning, Shape
from winml_perf.model.result import CellFailure, LoadPhases
from winml_perf.model.route import Route
from winml_perf.model.serving import ServingSection
from winml_perf.support import secrets
from winml_perf.support.errors import StoreError

#: Version of the record layout. Bump on any change a reader must know about, and describe it here:
#: 1 — first layout.
SCHEMA_VERSION = 1
SCHEMA_RESOURCE = "record.schema.json"

J = TypeVar("J", bound=JsonSection)


#: Values a record copy shares rather than copies (immutable).
_ATOMS = (str, int, float, bool, type(None))


def copied(value: Any) -> Any:
    """A deep copy of a record's JSON-like value (dicts, lists, tuples, scalars): what
    copy.deepcopy gives, at a fraction of its cost on 10^5 samples; anything else is deep-copied."""
    t = type(value)
    if t in _ATOMS:
        return value
    if t is dict:
        return {k: v if type(v) in _ATOMS else copied(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _ATOMS else copied(v) for v in value]
    if t is tuple:
        return tuple(v if type(v) in _ATOMS else copied(v) for v in value)
    return copy.deepcopy(value)


def _check_version(d: Mapping[str, Any], what: str) -> None:
    version = d.get("schema_version")
    if not isinstance(version, int):
        raise StoreError(
            f"{what}: schema_version is missing or not an integer ({version!r})", "this is not a winml-perf record"
        )
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{what}: record schema_version {version} is newer than this winml-perf understands ({SCHEMA_VERSION})",
            "upgrade winml-perf to read it",
        )


@dataclass(frozen=True)
class CellRecord:
    run_id: str
    cell_id: str
    cell_key: str
    cell_index: int
    status: CellStatus
    runtime: str
    bundle: str
    route: Route  # label, asked/resolved/per-stage (as prepared), actual (as the session reported)
    shape: Shape
    prompt: Prompt
    policy: Policy
    load: LoadPhases
    samples: RecordSamples
    metrics: Mapping[str, MetricSummary]  # metric name -> summary statistics
    summary: Headline  # headline scalars (medians etc.), units in names
    memory: Memory
    environment: Environment
    warnings: tuple[RecordWarning, ...] = ()
    failure: CellFailure | None = None
    stop_reason: str | None = None
    output: Output = field(default_factory=Output)
    roofline: Roofline | None = None
    started_utc: str = ""
    finished_utc: str = ""
    wall_s: float = 0.0
    measure_s: float = 0.0
    explain: Explain | None = None  # with --explain: per-phase stage/operator breakdown (explain/)
    invocations: tuple[Invocation, ...] = ()  # per invocation: index, load, iterations, medians
    uncertainty: Uncertainty = field(default_factory=Uncertainty)  # intervals and what they cover
    energy: Energy = field(default_factory=Energy)  # J/token per phase or why not, idle, power state
    sustained: Sustained | None = None  # --duration: the series over time and what it found
    bundle_id: str | None = None  # the bundle's content digest (record/bundle_identity.py); None before it
    series_label: str | None = None  # winml perf --series NAME: the series the user tracks (issue 35)
    serving: ServingSection | None = None  # `winml serve`: the load point and its figures (model/serving.py)
    schema_version: int = SCHEMA_VERSION
    kind: str = "cell"

    @property
    def ok(self) -> bool:
        return self.status == CellStatus.OK

    def to_dict(self) -> dict[str, Any]:
        """The record's JSON document (the keys in this order)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(
            route=self.route.to_dict(),
            shape=self.shape.to_dict(),
            policy=self.policy.to_dict(),
            load=self.load.to_dict(),
            samples=self.samples.to_dict(),
            metrics={name: s.to_dict() for name, s in self.metrics.items()},
            summary=self.summary.to_dict(),
            warnings=[w.to_dict() for w in self.warnings],
            failure=None if self.failure is None else self.failure.to_dict(),
            invocations=[i.to_dict() for i in self.invocations],
            prompt=self.prompt.to_dict(),
            memory=self.memory.to_dict(),
            environment=self.environment.to_dict(),
            output=self.output.to_dict(),
            roofline=None if self.roofline is None else self.roofline.to_dict(),
            explain=None if self.explain is None else self.explain.to_dict(),
            uncertainty=self.uncertainty.to_dict(),
            energy=self.energy.to_dict(),
            sustained=None if self.sustained is None else self.sustained.to_dict(),
        )
        for key in ("bundle_id", "series_label"):
            if d[key] is None:  # unknown or not given: left out, as records made before it
                del d[key]
        if self.serving is None:  # a single-stream cell: no serving section, as records made before it
            del d["serving"]
        else:
            d["serving"] = self.serving.to_dict()
        return d

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, owned: bool = False) -> CellRecord:
        """The record of ``d``; ``owned``: ``d`` is the caller's to give away (just parsed from
        JSON), so its values are taken as they are rather than copied."""
        _check_version(d, f"cell record {d.get('cell_id', '?')}")
        if d.get("kind", "cell") != "cell":
            raise StoreError(f"record kind {d.get('kind')!r} is not a cell record", "pass a cell record (kind 'cell')")
        values = {k: v if owned else copied(v) for k, v in d.items() if k in _CELL_FIELDS}
        failure = values.get("failure")
        serving = values.get("serving")
        values.update(
            status=parse_status(values["status"]),
            serving=None if serving is None else ServingSection.from_dict(serving),
            route=Route.from_dict(values["route"]),
            shape=Shape.from_dict(values["shape"]),
            policy=Policy.from_dict(values["policy"]),
            load=LoadPhases.from_dict(values["load"]),
            samples=RecordSamples.from_dict(values["samples"]),
            metrics={name: MetricSummary.from_dict(s) for name, s in (values.get("metrics") or {}).items()},
            summary=Headline.from_dict(values["summary"]),
            warnings=tuple(RecordWarning.from_dict(w) for w in values.get("warnings") or ()),
            failure=None if failure is None else CellFailure.from_dict(failure),
            prompt=Prompt.from_dict(values["prompt"]),
            memory=Memory.from_dict(values["memory"]),
            environment=Environment.from_dict(values["environment"]),
            output=Output.from_dict(values.get("output") or {}),
            roofline=_optional(Roofline, values.get("roofline")),
            explain=_optional(Explain, values.get("explain")),
            invocations=tuple(Invocation.from_dict(i) for i in values.get("invocations") or ()),
            uncertainty=Uncertainty.from_dict(values.get("uncertainty") or {}),
            energy=Energy.from_dict(values.get("energy") or {}),
            sustained=_optional(Sustained, values.get("sustained")),
            schema_version=SCHEMA_VERSION,  # read older layouts into the current one
        )
        return cls(**values)


def parse_status(text: str) -> CellStatus:
    """A record's status read from its JSON (a StoreError, exit 2, when it is none of them)."""
    try:
        return CellStatus(text)
    except ValueError:
        raise StoreError(
            f"record status {text!r} is not one of {', '.join(CellStatus)}", "pass a record this harness wrote"
        ) from None


def _optional(section: type[J], d: Mapping[str, Any] | None) -> J | None:
    return None if d is None else section.from_dict(d)


#: CellRecord's field names: the keys from_dict takes.
_CELL_FIELDS = frozenset(f.name for f in fields(CellRecord))


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    started_utc: str
    finished_utc: str
    status: CellStatus  # OK when every cell is ok, else FAILED
    sweep: Mapping[str, Any]  # routes, prompt_tokens, max_new_tokens, rounds, seed, isolate, order
    environment: Mapping[str, Any]
    cells: Sequence[CellRecord] = ()  # a tuple, or a sweep's cells on disk (record/cell_spool.py)
    argv: tuple[str, ...] | None = None
    schema_version: int = SCHEMA_VERSION
    kind: str = "run"

    def __post_init__(self) -> None:
        # The one place a record gets its command line: passwords (a store URL's) never enter it.
        if self.argv is not None:
            object.__setattr__(self, "argv", secrets.mask_argv(self.argv))

    @property
    def ok(self) -> bool:
        return self.status == CellStatus.OK

    def to_dict(self) -> dict[str, Any]:
        return {**self.head_dict(), "cells": [c.to_dict() for c in self.cells]}

    def head_dict(self) -> dict[str, Any]:
        """``to_dict()`` without its last key, ``cells`` (a long run's JSON is written cell by cell)."""
        return {
            "schema_version": self.schema_version,
            "kind": self.kind,
            "run_id": self.run_id,
            "started_utc": self.started_utc,
            "finished_utc": self.finished_utc,
            "status": self.status,
            "argv": None if self.argv is None else list(self.argv),
            "sweep": copied(dict(self.sweep)),
            "environment": copied(dict(self.environment)),
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunRecord:
        _check_version(d, f"run record {d.get('run_id', '?')}")
        if d.get("kind") != "run":
            raise StoreError(f"record kind {d.get('kind')!r} is not a run record", "pass a run record (kind 'run')")
        return cls(
            run_id=d["run_id"],
            started_utc=d["started_utc"],
            finished_utc=d["finished_utc"],
            status=parse_status(d["status"]),
            sweep=copy.deepcopy(d.get("sweep") or {}),
            environment=copy.deepcopy(d.get("environment") or {}),
            cells=tuple(CellRecord.from_dict(c) for c in d.get("cells") or ()),
            argv=None if d.get("argv") is None else tuple(d["argv"]),
        )


def record_from_dict(d: Mapping[str, Any]) -> CellRecord | RunRecord:
    """A cell or run record from its dict, by ``kind``."""
    return RunRecord.from_dict(d) if d.get("kind") == "run" else CellRecord.from_dict(d)


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The JSON Schema of records (package data winml_perf/schemas/record.schema.json)."""
    text = resources.files("winml_perf").joinpath("schemas", SCHEMA_RESOURCE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
