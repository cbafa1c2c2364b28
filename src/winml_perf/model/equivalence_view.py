"""A route's equivalence verdict and key figures, flat: what the store's columns, the exports,
`winml compare routes` and the dashboard show beside the route's speed (issue 24).

Read from a cell record's ``route.equivalence`` (either shape: the teacher-forced logits of a
genai bundle, model/equivalence.py, or the per-output comparison of a plain ONNX model, kind
``outputs``, model/output_equivalence.py) or from the flat columns a store row holds. A record
without a check reads ``not checked``: never blank, never "equivalent". Keys a newer or older
writer left out read as None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from winml_perf.model.equivalence import EQUIVALENT, NOT_EQUIVALENT, VERDICTS, WITHIN_PRECISION, Equivalence
from winml_perf.support.finite_numbers import finite_number

#: The verdict of a record whose route was not checked.
NOT_CHECKED = "not checked"
#: Every verdict a view may hold.
VIEW_VERDICTS = (*VERDICTS, NOT_CHECKED)
#: ``kind`` of a plain ONNX model's per-output comparison (model/output_equivalence.py).
OUTPUTS_KIND = "outputs"
LOGITS_KIND = "logits"

#: The flat column of each field, as the store, the frame and the exports name it.
PREFIX = "equivalence_"


@dataclass(frozen=True)
class EquivalenceView:
    """The verdict and the figures shown beside a route's speed; None: not measured for this kind."""

    verdict: str = NOT_CHECKED
    reference: str | None = None  # what the route was judged against: a route label or 'bundle:PATH'
    kind: str | None = None  # LOGITS_KIND | OUTPUTS_KIND; None when not checked
    kl_mean: float | None = None  # logits: KL(reference || route), nats, mean over steps
    top1_agreement: float | None = None  # logits: share of steps whose argmax agrees
    first_divergence_step: int | None = None  # logits: first step whose argmax differs; None: never
    first_stage: str | None = None  # logits of a pipeline: the first stage whose output departs
    max_abs_error: float | None = None  # outputs: the largest |Δ| over every output
    max_rel_error: float | None = None  # outputs: the largest |Δ| over the reference's max |value|
    cosine_min: float | None = None  # outputs: the lowest cosine similarity over the outputs
    perplexity: float | None = None  # logits with --perplexity: the route's perplexity over the text
    perplexity_ratio: float | None = None  # ... its ratio to the reference's, paired over chunks
    perplexity_ratio_low: float | None = None  # ... the ratio's interval (None: too few chunks)
    perplexity_ratio_high: float | None = None
    perplexity_kl: float | None = None  # ... KL(reference || route) over the text's scored tokens, nats
    perplexity_kl_low: float | None = None  # ... its t interval over chunks (None: too few chunks)
    perplexity_kl_high: float | None = None
    perplexity_top1: float | None = None  # ... share of the text's scored tokens whose argmax agrees

    def __post_init__(self) -> None:
        if self.verdict not in VIEW_VERDICTS:
            raise ValueError(f"EquivalenceView.verdict must be one of {VIEW_VERDICTS}, not {self.verdict!r}")

    @property
    def checked(self) -> bool:
        return self.verdict != NOT_CHECKED

    @property
    def not_equivalent(self) -> bool:
        """A route computing something else: it must never be read as the faster same model."""
        return self.verdict == NOT_EQUIVALENT

    def label(self) -> str:
        """The verdict as a person reads it beside a ratio: a not-equivalent route in capitals."""
        return "NOT equivalent" if self.not_equivalent else self.verdict

    def figures_text(self) -> str:
        """'KL 0.014, top-1 81 %, diverges at step 2, first at stage context' or the outputs' errors."""
        parts = []
        if self.kl_mean is not None:
            parts.append(f"KL {self.kl_mean:.2g}")
        if self.top1_agreement is not None:
            parts.append(f"top-1 {self.top1_agreement:.0%}")
        if self.first_divergence_step is not None:
            parts.append(f"diverges at step {self.first_divergence_step}")
        if self.first_stage:
            parts.append(f"first at stage {self.first_stage}")
        if self.max_abs_error is not None:
            parts.append(f"max abs {self.max_abs_error:.2g}")
        if self.max_rel_error is not None:
            parts.append(f"max rel {self.max_rel_error:.2g}")
        if self.cosine_min is not None:
            parts.append(f"cosine {self.cosine_min:.6g}")
        if self.perplexity_ratio is not None:
            lo, hi = self.perplexity_ratio_low, self.perplexity_ratio_high
            interval = f" [{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else ""
            parts.append(f"perplexity ×{self.perplexity_ratio:.4f}{interval}")  # as perf prints it
        parts.extend(f"text {part}" for part in self._text_agreement())
        return ", ".join(parts)

    def _text_agreement(self) -> list[str]:
        """['KL 0.0045 [0.0031, 0.006]', 'top-1 96.2 %']: over the perplexity's text; [] when not measured."""
        parts = []
        if self.perplexity_kl is not None:
            lo, hi = self.perplexity_kl_low, self.perplexity_kl_high
            interval = f" [{lo:.4g}, {hi:.4g}]" if lo is not None and hi is not None else ""
            parts.append(f"KL {self.perplexity_kl:.4g}{interval}")  # as perf prints it
        if self.perplexity_top1 is not None:
            parts.append(f"top-1 {self.perplexity_top1 * 100:.1f} %")
        return parts

    def perplexity_text(self) -> str | None:
        """'perplexity 42.74 (×1.0014 [0.9967, 1.0062] of the reference; KL 0.0045 [0.0031, 0.006], top-1
        96.2 %)'; None when not measured."""
        if self.perplexity is None and self.perplexity_ratio is None:
            return None
        own = f"perplexity {self.perplexity:.4g}" if self.perplexity is not None else "perplexity"
        if self.perplexity_ratio is None:
            return own
        lo, hi = self.perplexity_ratio_low, self.perplexity_ratio_high
        interval = f" [{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else ""
        agreement = ", ".join(self._text_agreement())
        return f"{own} (×{self.perplexity_ratio:.4f}{interval} of the reference{'; ' + agreement if agreement else ''})"

    def text(self) -> str:
        """'within precision tolerance (KL 0.014, top-1 81 %) against config', 'not checked'."""
        if not self.checked:
            return NOT_CHECKED
        figures = self.figures_text()
        return self.label() + (f" ({figures})" if figures else "") + f" against {self.reference or '?'}"

    def columns(self) -> dict[str, Any]:
        """{'equivalence_verdict': ..., 'equivalence_reference': ..., ...}: the flat columns."""
        return {PREFIX + f.name: getattr(self, f.name) for f in fields(self)}


#: The flat columns, in order.
COLUMNS = tuple(PREFIX + f.name for f in fields(EquivalenceView))
VERDICT_COLUMN = PREFIX + "verdict"


def _int(value: Any) -> int | None:
    x = finite_number(value)
    return None if x is None else int(x)


def _str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _verdict(value: Any) -> str:
    return value if value in VIEW_VERDICTS else NOT_CHECKED


def _outputs_view(d: Mapping[str, Any]) -> EquivalenceView:
    outs = [o for o in d.get("outputs") or () if isinstance(o, Mapping)]

    def most(key: str, pick: Any) -> float | None:
        values = [v for v in (finite_number(o.get(key)) for o in outs) if v is not None]
        return pick(values) if values else None

    return EquivalenceView(
        verdict=_verdict(d.get("verdict")),
        reference=_str(d.get("reference")),
        kind=OUTPUTS_KIND,
        max_abs_error=most("max_abs", max),
        max_rel_error=most("max_rel", max),
        cosine_min=most("cosine", min),
    )


def _perplexity_fields(d: Mapping[str, Any]) -> dict[str, float | None]:
    """The route's perplexity, its ratio to the reference's, and KL and top-1 over the same text
    (``route.equivalence.perplexity``)."""
    raw = d.get("perplexity")
    p: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return {
        "perplexity": finite_number(p.get("perplexity")),
        "perplexity_ratio": finite_number(p.get("ratio")),
        "perplexity_ratio_low": finite_number(p.get("low")),
        "perplexity_ratio_high": finite_number(p.get("high")),
        "perplexity_kl": finite_number(p.get("kl_mean")),
        "perplexity_kl_low": finite_number(p.get("kl_low")),
        "perplexity_kl_high": finite_number(p.get("kl_high")),
        "perplexity_top1": finite_number(p.get("top1_agreement")),
    }


def _logits_view(d: Mapping[str, Any]) -> EquivalenceView:
    try:  # the record's own reader first (model/equivalence.py)
        e = Equivalence.from_dict(d)
        return EquivalenceView(
            e.verdict, e.reference, LOGITS_KIND, e.figures.kl_mean, e.figures.top1_agreement,
            e.figures.first_divergence, e.first_stage, **_perplexity_fields(d),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError):  # keys left out: read what is there
        raw = d.get("figures")
        f: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        return EquivalenceView(
            verdict=_verdict(d.get("verdict")),
            reference=_str(d.get("reference")),
            kind=LOGITS_KIND,
            kl_mean=finite_number(f.get("kl_mean")),
            top1_agreement=finite_number(f.get("top1_agreement")),
            first_divergence_step=_int(f.get("first_divergence")),
            first_stage=_str(d.get("first_stage")),
            **_perplexity_fields(d),
        )


def view_of(equivalence: Mapping[str, Any] | None) -> EquivalenceView:
    """The view of a record's ``route.equivalence`` (None or {}: not checked)."""
    if not isinstance(equivalence, Mapping) or not equivalence:
        return EquivalenceView()
    if equivalence.get("kind") == OUTPUTS_KIND:
        return _outputs_view(equivalence)
    return _logits_view(equivalence)


def view_of_record(record: Mapping[str, Any]) -> EquivalenceView:
    """The view of a cell record (CellRecord.to_dict())."""
    route = record.get("route")
    return view_of(route.get("equivalence") if isinstance(route, Mapping) else None)


def view_of_row(row: Mapping[str, Any]) -> EquivalenceView:
    """The view of a flat row (a store row, a frame row): its ``equivalence_*`` columns; a row
    without them (read before the columns existed) is not checked."""
    return EquivalenceView(
        verdict=_verdict(row.get(VERDICT_COLUMN)),
        reference=_str(row.get(PREFIX + "reference")),
        kind=_str(row.get(PREFIX + "kind")),
        kl_mean=finite_number(row.get(PREFIX + "kl_mean")),
        top1_agreement=finite_number(row.get(PREFIX + "top1_agreement")),
        first_divergence_step=_int(row.get(PREFIX + "first_divergence_step")),
        first_stage=_str(row.get(PREFIX + "first_stage")),
        max_abs_error=finite_number(row.get(PREFIX + "max_abs_error")),
        max_rel_error=finite_number(row.get(PREFIX + "max_rel_error")),
        cosine_min=finite_number(row.get(PREFIX + "cosine_min")),
        perplexity=finite_number(row.get(PREFIX + "perplexity")),
        perplexity_ratio=finite_number(row.get(PREFIX + "perplexity_ratio")),
        perplexity_ratio_low=finite_number(row.get(PREFIX + "perplexity_ratio_low")),
        perplexity_ratio_high=finite_number(row.get(PREFIX + "perplexity_ratio_high")),
        perplexity_kl=finite_number(row.get(PREFIX + "perplexity_kl")),
        perplexity_kl_low=finite_number(row.get(PREFIX + "perplexity_kl_low")),
        perplexity_kl_high=finite_number(row.get(PREFIX + "perplexity_kl_high")),
        perplexity_top1=finite_number(row.get(PREFIX + "perplexity_top1")),
    )


#: How --verdict may name a verdict on the command line (the verdict itself, or a word without spaces).
VERDICT_WORDS = {
    EQUIVALENT: EQUIVALENT,
    "within-precision": WITHIN_PRECISION,
    WITHIN_PRECISION: WITHIN_PRECISION,
    "not-equivalent": NOT_EQUIVALENT,
    NOT_EQUIVALENT: NOT_EQUIVALENT,
    "not-checked": NOT_CHECKED,
    NOT_CHECKED: NOT_CHECKED,
}
