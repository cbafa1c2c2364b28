"""A route's numerical equivalence to a reference: the teacher-forced figures, the reference's own
bands, and the verdict (issue 24). ``to_dict``/``from_dict`` are the record's JSON edge (the
``equivalence`` key of a cell record's route section, schemas/record.schema.json).

The figures compare the logits of every step when both sides are fed the same tokens (the prompt,
then the reference's greedy continuation), so one early argmax flip does not hide what follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from winml_perf.model.perplexity import PerplexityDifference


class EquivalenceVerdict(StrEnum):
    """Equivalence.verdict (and an output check's): equal to its text, which records hold."""

    EQUIVALENT = "equivalent"
    WITHIN_PRECISION = "within precision tolerance"
    NOT_EQUIVALENT = "not equivalent"


EQUIVALENT, WITHIN_PRECISION, NOT_EQUIVALENT = EquivalenceVerdict
VERDICTS = tuple(EquivalenceVerdict)
#: Layers.pattern values: the error grew through the layers, or jumped at the departing one.
GROWTH = "growth"
JUMP = "jump"


@dataclass(frozen=True)
class LogitFigures:
    """One route's logits against the reference's over ``steps`` teacher-forced steps."""

    steps: int
    kl_mean: float  # KL(reference || route), nats, mean over steps
    kl_max: float
    max_abs_delta: float  # max |Δlogit| over steps and vocabulary, over the reference's logit spread at that step
    top1_agreement: float  # share of steps whose argmax agrees, 0..1
    top5_overlap: float  # mean share of the reference's top 5 that the route's top 5 holds, 0..1
    first_divergence: int | None  # first step whose argmax differs (where greedy would part); None: never
    identical: bool  # every logit bit-equal

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "kl_mean": self.kl_mean,
            "kl_max": self.kl_max,
            "max_abs_delta": self.max_abs_delta,
            "top1_agreement": self.top1_agreement,
            "top5_overlap": self.top5_overlap,
            "first_divergence": self.first_divergence,
            "identical": self.identical,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LogitFigures:
        fd = d.get("first_divergence")
        return cls(
            int(d["steps"]),
            float(d["kl_mean"]),
            float(d["kl_max"]),
            float(d["max_abs_delta"]),
            float(d["top1_agreement"]),
            float(d["top5_overlap"]),
            None if fd is None else int(fd),
            bool(d["identical"]),
        )


@dataclass(frozen=True)
class StageFigures:
    """One pipeline stage's output (a tensor the generator exposes) against the reference's."""

    stage: str
    output: str
    steps: int
    max_abs: float
    max_rel: float  # max |Δ| over the reference's max |value|
    cosine_min: float  # lowest cosine similarity over steps

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "output": self.output,
            "steps": self.steps,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "cosine_min": self.cosine_min,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StageFigures:
        return cls(
            str(d["stage"]),
            str(d["output"]),
            int(d["steps"]),
            float(d["max_abs"]),
            float(d["max_rel"]),
            float(d["cosine_min"]),
        )


@dataclass(frozen=True)
class Band:
    """A band measured on the reference itself: what changing ``change`` alone does to its logits."""

    name: str  # "noise floor" | "precision"
    change: str  # e.g. "graph_optimization_level ORT_DISABLE_ALL", "MatMulNBits accuracy_level 0"
    figures: LogitFigures
    kl_limit: float  # the KL (mean) up to which a route sits inside this band

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "change": self.change, "figures": self.figures.to_dict(), "kl_limit": self.kl_limit}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Band:
        return cls(str(d["name"]), str(d["change"]), LogitFigures.from_dict(d["figures"]), float(d["kl_limit"]))


@dataclass(frozen=True)
class LayerFigures:
    """One decoder layer's output (over every position of a full-sequence pass) against the reference's."""

    stage: str  # the stage holding the layer ("decoder" for a flat bundle)
    layer: int
    tensor: str
    positions: int
    max_abs: float
    max_rel: float  # max |Δ| over the reference's max |value|, per position
    cosine_min: float
    limit: float  # the relative error up to which this layer sits inside the reference's band
    # the layer's own error: fed the reference's output of the layer before (None: not measured)
    local_rel: float | None = None
    local_cosine_min: float | None = None
    local_limit: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "layer": self.layer,
            "tensor": self.tensor,
            "positions": self.positions,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "cosine_min": self.cosine_min,
            "limit": self.limit,
            "local_rel": self.local_rel,
            "local_cosine_min": self.local_cosine_min,
            "local_limit": self.local_limit,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LayerFigures:
        return cls(
            str(d["stage"]),
            int(d["layer"]),
            str(d["tensor"]),
            int(d["positions"]),
            float(d["max_abs"]),
            float(d["max_rel"]),
            float(d["cosine_min"]),
            float(d["limit"]),
            _opt_float(d.get("local_rel")),
            _opt_float(d.get("local_cosine_min")),
            _opt_float(d.get("local_limit")),
        )


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


@dataclass(frozen=True)
class Layers:
    """Layer-by-layer localisation: where a route parts from the reference inside the model."""

    tokens: int  # the full-sequence pass's length (prompt and the fed continuation)
    band: str  # the reference's band whose per-layer errors set the limits ("precision" | "noise floor" | "none")
    figures: tuple[LayerFigures, ...]
    first_departing: int | None  # first layer beyond its limit
    first_departing_stage: str | None
    first_differing: int | None  # first layer not bit-equal
    pattern: str | None  # JUMP (a layer's own error beyond its band) | GROWTH (only the accumulated) | None
    unobserved: tuple[str, ...] = ()  # "stage: why" for stages whose layers could not be read
    cost_ms: float = 0.0
    first_wrong: int | None = None  # first layer whose own error (fed the reference's input) is beyond its band
    first_wrong_stage: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "figures", tuple(self.figures))
        object.__setattr__(self, "unobserved", tuple(self.unobserved))

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "band": self.band,
            "figures": [f.to_dict() for f in self.figures],
            "first_departing": self.first_departing,
            "first_departing_stage": self.first_departing_stage,
            "first_differing": self.first_differing,
            "pattern": self.pattern,
            "unobserved": list(self.unobserved),
            "cost_ms": self.cost_ms,
            "first_wrong": self.first_wrong,
            "first_wrong_stage": self.first_wrong_stage,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Layers:
        def opt_int(v: Any) -> int | None:
            return None if v is None else int(v)

        return cls(
            int(d["tokens"]),
            str(d["band"]),
            tuple(LayerFigures.from_dict(f) for f in d.get("figures") or ()),
            opt_int(d.get("first_departing")),
            d.get("first_departing_stage"),
            opt_int(d.get("first_differing")),
            d.get("pattern"),
            tuple(str(u) for u in d.get("unobserved") or ()),
            float(d.get("cost_ms") or 0.0),
            opt_int(d.get("first_wrong")),
            d.get("first_wrong_stage"),
        )


@dataclass(frozen=True)
class StagePrecision:
    """What precision one stage of a route really computes in, read from what is run."""

    stage: str
    ep: str  # canonical EP name
    matmulnbits_accuracy_levels: tuple[int, ...]  # from the stage .onnx actually loaded; () without MatMulNBits
    options: tuple[tuple[str, str], ...]  # the EP's provider options that set precision, as given
    compute: str  # e.g. "fp32", "fp16 (enable_htp_fp16_precision 1)", "int8 activations (accuracy_level 4)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "ep": self.ep,
            "matmulnbits_accuracy_levels": list(self.matmulnbits_accuracy_levels),
            "options": dict(self.options),
            "compute": self.compute,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StagePrecision:
        return cls(
            str(d["stage"]),
            str(d["ep"]),
            tuple(int(x) for x in d.get("matmulnbits_accuracy_levels") or ()),
            tuple(sorted((str(k), str(v)) for k, v in (d.get("options") or {}).items())),
            str(d["compute"]),
        )


def precision_class(stages: tuple[StagePrecision, ...]) -> str:
    """One line naming what a route computes in, stages grouped by it:
    'embeddings/lm_head: CPU fp32 model; context/iterator: CPU fp32 model, MatMulNBits accuracy_level 4 (int8 A)'."""
    groups: dict[str, list[str]] = {}
    for s in stages:
        groups.setdefault(f"{s.ep.removesuffix('ExecutionProvider')} {s.compute}", []).append(s.stage)
    return "; ".join(f"{'/'.join(names)}: {what}" for what, names in groups.items()) or "unknown"


#: The two questions a comparison asks (docs/equivalence.md). Same EP, options and precision as the
#: reference: "is this the same model?", decided by the noise floor and layer bit-equality. Another EP
#: or precision: "is the difference what a precision change does?", decided by the precision band.
SAME_MODEL_QUESTION = "same model"
PRECISION_QUESTION = "precision"
QUESTIONS = (SAME_MODEL_QUESTION, PRECISION_QUESTION)


def question_for(route: tuple[StagePrecision, ...], reference: tuple[StagePrecision, ...]) -> str:
    """SAME_MODEL_QUESTION when the route computes exactly as the reference does (every stage's EP, options,
    accuracy levels and float type), else PRECISION_QUESTION. Unknown precision on either side: PRECISION."""
    if route and reference and precision_class(route) == precision_class(reference):
        return SAME_MODEL_QUESTION
    return PRECISION_QUESTION


@dataclass(frozen=True)
class Equivalence:
    """A route judged against ``reference`` (a route label, or ``bundle:PATH``)."""

    reference: str
    reference_path: str
    route_path: str
    prompt_tokens: int
    seed: int
    figures: LogitFigures
    verdict: EquivalenceVerdict
    bands: tuple[Band, ...] = ()
    stages: tuple[StageFigures, ...] = ()
    first_stage: str | None = None  # the first stage (in pipeline order) whose output departs beyond tolerance
    unobserved_stages: tuple[
        str, ...
    ] = ()  # stages none of whose outputs the generator exposes (judged through later ones)
    cost_ms: float = 0.0  # this route's share: its load and teacher-forced pass
    layers: Layers | None = None  # layer-by-layer localisation; None when not measured
    precision: tuple[StagePrecision, ...] = ()  # what each stage of the route computes in
    reference_precision: tuple[StagePrecision, ...] = ()  # likewise for the reference
    #: the question the verdict answers: SAME_MODEL (the route computes in the reference's precision, on its
    #: EP and options, so only the noise floor separates them) or PRECISION (another EP or precision)
    question: str = "precision"
    #: --perplexity: the route's perplexity over the text against the reference's, paired on the same chunks
    perplexity: PerplexityDifference | None = None

    def __post_init__(self) -> None:
        if self.question not in QUESTIONS:
            raise ValueError(f"Equivalence.question must be one of {QUESTIONS}, not {self.question!r}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"Equivalence.verdict must be one of {VERDICTS}, not {self.verdict!r}")
        object.__setattr__(self, "verdict", EquivalenceVerdict(self.verdict))  # read from JSON: the member
        object.__setattr__(self, "bands", tuple(self.bands))
        object.__setattr__(self, "stages", tuple(self.stages))
        object.__setattr__(self, "unobserved_stages", tuple(self.unobserved_stages))
        object.__setattr__(self, "precision", tuple(self.precision))
        object.__setattr__(self, "reference_precision", tuple(self.reference_precision))

    @property
    def precision_class(self) -> str:
        return precision_class(self.precision)

    @property
    def equivalent(self) -> bool:
        return self.verdict != NOT_EQUIVALENT

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "reference_path": self.reference_path,
            "route_path": self.route_path,
            "prompt_tokens": self.prompt_tokens,
            "seed": self.seed,
            "figures": self.figures.to_dict(),
            "verdict": self.verdict,
            "bands": [b.to_dict() for b in self.bands],
            "stages": [s.to_dict() for s in self.stages],
            "first_stage": self.first_stage,
            "unobserved_stages": list(self.unobserved_stages),
            "cost_ms": self.cost_ms,
            "layers": None if self.layers is None else self.layers.to_dict(),
            "precision": [p.to_dict() for p in self.precision],
            "precision_class": self.precision_class,
            "reference_precision": [p.to_dict() for p in self.reference_precision],
            "reference_precision_class": precision_class(self.reference_precision),
            "question": self.question,
            **({"perplexity": self.perplexity.to_dict()} if self.perplexity is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Equivalence:
        return cls(
            str(d["reference"]),
            str(d["reference_path"]),
            str(d["route_path"]),
            int(d["prompt_tokens"]),
            int(d["seed"]),
            LogitFigures.from_dict(d["figures"]),
            EquivalenceVerdict(str(d["verdict"])),
            tuple(Band.from_dict(b) for b in d.get("bands") or ()),
            tuple(StageFigures.from_dict(s) for s in d.get("stages") or ()),
            d.get("first_stage"),
            tuple(str(s) for s in d.get("unobserved_stages") or ()),
            float(d.get("cost_ms") or 0.0),
            None if d.get("layers") is None else Layers.from_dict(d["layers"]),
            tuple(StagePrecision.from_dict(p) for p in d.get("precision") or ()),
            tuple(StagePrecision.from_dict(p) for p in d.get("reference_precision") or ()),
            str(d.get("question") or PRECISION_QUESTION),  # records before the question was asked: the band one
            PerplexityDifference.from_dict(d["perplexity"]) if d.get("perplexity") else None,
        )
