"""A plain ONNX model's route judged by its outputs (issue 24): every output of one untimed
inference on fixed seeded inputs against the reference route's, with a verdict per output and per
route. ``to_dict``/``from_dict`` are the record's JSON edge (``route.equivalence`` with ``kind:
"outputs"``, schemas/record.schema.json); ``route_equivalence_from_dict`` reads either shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from winml_perf.model.equivalence import NOT_EQUIVALENT, VERDICTS, Equivalence
from winml_perf.model.equivalence_view import OUTPUTS_KIND


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class OutputFigures:
    """One output of the route against the reference's (the same inputs fed to both)."""

    name: str
    dtype: str  # the reference's element type
    shape: tuple[int, ...]  # the reference's shape
    max_abs: float | None  # max |Δ|; None when the shapes or types differ (nothing to subtract)
    max_rel: float | None  # max |Δ| over the reference's max |value|
    cosine: float | None  # cosine similarity of the flattened outputs (1 for two all-zero outputs)
    identical: bool  # every element bit-equal
    verdict: str
    note: str | None = None  # why there are no figures (shape or type differs, NaN where the reference has none)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"OutputFigures.verdict must be one of {VERDICTS}, not {self.verdict!r}")
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "cosine": self.cosine,
            "identical": self.identical,
            "verdict": self.verdict,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OutputFigures:
        return cls(
            str(d["name"]),
            str(d.get("dtype") or ""),
            tuple(d.get("shape") or ()),
            _opt_float(d.get("max_abs")),
            _opt_float(d.get("max_rel")),
            _opt_float(d.get("cosine")),
            bool(d.get("identical")),
            str(d["verdict"]),
            d.get("note"),
        )


@dataclass(frozen=True)
class OutputEquivalence:
    """A plain ONNX route judged against ``reference`` (a route label) by every output."""

    reference: str
    reference_path: str
    route_path: str
    seed: int  # the inputs' seed (both sides fed the same arrays)
    inputs: tuple[str, ...]  # the inputs fed, by name
    outputs: tuple[OutputFigures, ...]  # every output of the model, in model order
    verdict: str  # the worst of the outputs' verdicts
    cost_ms: float = 0.0  # this route's share: its load and one inference

    kind = OUTPUTS_KIND

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"OutputEquivalence.verdict must be one of {VERDICTS}, not {self.verdict!r}")
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))

    @property
    def equivalent(self) -> bool:
        return self.verdict != NOT_EQUIVALENT

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": OUTPUTS_KIND,
            "reference": self.reference,
            "reference_path": self.reference_path,
            "route_path": self.route_path,
            "seed": self.seed,
            "inputs": list(self.inputs),
            "outputs": [o.to_dict() for o in self.outputs],
            "verdict": self.verdict,
            "cost_ms": self.cost_ms,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OutputEquivalence:
        return cls(
            str(d["reference"]),
            str(d.get("reference_path") or ""),
            str(d.get("route_path") or ""),
            int(d.get("seed") or 0),
            tuple(str(x) for x in d.get("inputs") or ()),
            tuple(OutputFigures.from_dict(o) for o in d.get("outputs") or ()),
            str(d["verdict"]),
            float(d.get("cost_ms") or 0.0),
        )


def route_equivalence_from_dict(d: Mapping[str, Any]) -> Equivalence | OutputEquivalence:
    """A record's ``route.equivalence`` of either kind: outputs (plain ONNX) or logits (genai)."""
    if d.get("kind") == OUTPUTS_KIND:
        return OutputEquivalence.from_dict(d)
    return Equivalence.from_dict(d)
