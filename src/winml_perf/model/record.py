"""Records: what a measurement leaves behind, as frozen dataclasses with to_dict/from_dict.

A ``CellRecord`` is one JSON document per cell (one route at one shape), self-contained: route,
shape, policies, load phases, raw per-iteration samples, summary metrics (units in the names),
memory, roofline, environment, warnings, status. A ``RunRecord`` groups the cells of one
invocation under a ``run_id`` with the sweep's description (routes, shapes, seed, round orders).

Both carry ``schema_version``; ``schemas/record.schema.json`` is the JSON Schema of the dicts
(results/validation.py checks a dict against it).
This module is plain data: it imports nothing from the measuring side (bench/) nor onnxruntime.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache
from importlib import resources
from typing import Any

from winml_perf.support.errors import StoreError

#: Version of the record layout. Bump on any change a reader must know about, and describe it here:
#: 1 — first layout.
SCHEMA_VERSION = 1
SCHEMA_RESOURCE = "record.schema.json"


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


def _check_version(d: Mapping, what: str) -> None:
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
    status: str  # "ok" | "failed"
    runtime: str
    bundle: str
    route: Mapping[str, Any]  # label, asked/resolved/per-stage (as prepared), actual (as the session reported)
    shape: Mapping[str, Any]  # prompt_tokens, max_new_tokens
    prompt: Mapping[str, Any]
    policy: Mapping[str, Any]  # warmup, iterations, rounds, isolate, seed
    load: Mapping[str, Any]  # plugin_registration_ms, prepare_ms, compile_ms, model_load_ms, first_generation_ms
    samples: Mapping[str, Any]  # {"warmup": [...], "iterations": [...]}
    metrics: Mapping[str, Any]  # metric name -> summary statistics
    summary: Mapping[str, Any]  # headline scalars (medians etc.), units in names
    memory: Mapping[str, Any]
    environment: Mapping[str, Any]
    warnings: tuple[Mapping[str, Any], ...] = ()
    failure: Mapping[str, Any] | None = None
    stop_reason: str | None = None
    output: Mapping[str, Any] = field(default_factory=dict)
    roofline: Mapping[str, Any] | None = None
    started_utc: str = ""
    finished_utc: str = ""
    wall_s: float = 0.0
    measure_s: float = 0.0
    explain: Mapping[str, Any] | None = None  # with --explain: per-phase stage/operator breakdown (explain/)
    invocations: tuple[Mapping[str, Any], ...] = ()  # per invocation: index, load, iterations, medians
    uncertainty: Mapping[str, Any] = field(default_factory=dict)  # intervals and what they cover
    schema_version: int = SCHEMA_VERSION
    kind: str = "cell"

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        d = {f.name: copied(getattr(self, f.name)) for f in fields(self)}
        d["warnings"] = [dict(w) for w in self.warnings]
        d["invocations"] = [dict(i) for i in self.invocations]
        d["uncertainty"] = dict(d["uncertainty"])
        for key in (
            "route",
            "shape",
            "prompt",
            "policy",
            "load",
            "samples",
            "metrics",
            "summary",
            "memory",
            "environment",
            "output",
        ):
            d[key] = dict(d[key])
        return d

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping) -> CellRecord:
        _check_version(d, f"cell record {d.get('cell_id', '?')}")
        if d.get("kind", "cell") != "cell":
            raise StoreError(f"record kind {d.get('kind')!r} is not a cell record", "pass a cell record (kind 'cell')")
        names = {f.name for f in fields(cls)}
        values = {k: copied(v) for k, v in d.items() if k in names}
        values["warnings"] = tuple(values.get("warnings") or ())
        values["invocations"] = tuple(values.get("invocations") or ())
        values["uncertainty"] = dict(values.get("uncertainty") or {})
        values["schema_version"] = SCHEMA_VERSION  # read older layouts into the current one
        return cls(**values)


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    started_utc: str
    finished_utc: str
    status: str  # "ok" when every cell is ok, else "failed"
    sweep: Mapping[str, Any]  # routes, prompt_tokens, max_new_tokens, rounds, seed, isolate, order
    environment: Mapping[str, Any]
    cells: tuple[CellRecord, ...] = ()
    argv: tuple[str, ...] | None = None
    schema_version: int = SCHEMA_VERSION
    kind: str = "run"

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        return {
            "schema_version": self.schema_version,
            "kind": self.kind,
            "run_id": self.run_id,
            "started_utc": self.started_utc,
            "finished_utc": self.finished_utc,
            "status": self.status,
            "argv": None if self.argv is None else list(self.argv),
            "sweep": copy.deepcopy(dict(self.sweep)),
            "environment": copy.deepcopy(dict(self.environment)),
            "cells": [c.to_dict() for c in self.cells],
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping) -> RunRecord:
        _check_version(d, f"run record {d.get('run_id', '?')}")
        if d.get("kind") != "run":
            raise StoreError(f"record kind {d.get('kind')!r} is not a run record", "pass a run record (kind 'run')")
        return cls(
            run_id=d["run_id"],
            started_utc=d["started_utc"],
            finished_utc=d["finished_utc"],
            status=d["status"],
            sweep=copy.deepcopy(d.get("sweep") or {}),
            environment=copy.deepcopy(d.get("environment") or {}),
            cells=tuple(CellRecord.from_dict(c) for c in d.get("cells") or ()),
            argv=None if d.get("argv") is None else tuple(d["argv"]),
        )


def record_from_dict(d: Mapping) -> CellRecord | RunRecord:
    """A cell or run record from its dict, by ``kind``."""
    return RunRecord.from_dict(d) if d.get("kind") == "run" else CellRecord.from_dict(d)


@lru_cache(maxsize=1)
def load_schema() -> dict:
    """The JSON Schema of records (package data winml_perf/schemas/record.schema.json)."""
    text = resources.files("winml_perf").joinpath("schemas", SCHEMA_RESOURCE).read_text(encoding="utf-8")
    return json.loads(text)
