"""Is a plain ONNX model's route still the same model? (issue 24, `--runtime winml`)

Each route's session is opened once, outside every timed iteration, and runs one inference on the
inputs its options make (fixed: the run's seed and shapes, or the ``--input`` files); every output
is compared with the reference route's (the math and the thresholds in stats/outputs/equivalence.py).
The two sides must have been fed the same arrays: a route fed anything else is not judged.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from winml_perf.model.equivalence import NOT_EQUIVALENT
from winml_perf.model.output_equivalence import OutputEquivalence, OutputFigures
from winml_perf.support.errors import WinmlPerfError

#: Session options of a route that only time or profile it: left out of the one untimed inference.
TIMING_ONLY = {"source_model": None, "profile_prefix": None, "record_assignment": False}


@dataclass(frozen=True)
class OutputsTarget:
    """What to run: a route's label, its model file and its OnnxSession options."""

    label: str
    path: str
    options: Mapping[str, Any]


@dataclass(frozen=True)
class Inference:
    """One untimed inference: the outputs by name (model order) and the inputs it was fed."""

    outputs: dict[str, np.ndarray]
    feeds: dict[str, np.ndarray]


def infer_once(target: OutputsTarget) -> Inference:
    """Open the route's session, run it once on its fixed inputs, close it."""
    from winml_perf.session.onnx_session import OnnxSession

    with OnnxSession.from_options(target.path, **{**dict(target.options), **TIMING_ONLY}) as s:
        arrays = s.run()
        names = [o.name for o in s.outputs]
        return Inference(dict(zip(names, arrays)), s.feeds)


def same_feeds(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> bool:
    """Whether two inferences were fed the same arrays (names, types, shapes and values)."""
    return set(a) == set(b) and all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a)


def judge_inference(reference: Inference, route: Inference) -> list[OutputFigures]:
    """Every output of the reference against the route's (a missing one, or one the reference has
    not, is not equivalent)."""
    from winml_perf.stats.outputs.equivalence import compare_output

    figures = []
    for name, ref in reference.outputs.items():
        if name not in route.outputs:
            figures.append(
                OutputFigures(name, str(ref.dtype), ref.shape, None, None, None, False, NOT_EQUIVALENT, "missing")
            )
            continue
        figures.append(compare_output(name, ref, route.outputs[name]))
    for name, out in route.outputs.items():
        if name not in reference.outputs:
            figures.append(
                OutputFigures(name, str(out.dtype), out.shape, None, None, None, False, NOT_EQUIVALENT,
                              "an output the reference does not have")
            )  # fmt: skip
    return figures


@dataclass(frozen=True)
class OutputsRun:
    """What judging the routes found, and what it cost (outside every timed iteration)."""

    by_label: dict[str, OutputEquivalence]
    reference: str
    cost_ms: float
    errors: dict[str, str]  # routes that could not be judged: why


def judge_outputs(reference: OutputsTarget, routes: Sequence[OutputsTarget]) -> OutputsRun:
    """Every route but the reference itself against the reference's outputs on the same inputs.
    A reference that cannot run raises (WinmlPerfError): no route is judged then."""
    from winml_perf.stats.outputs.equivalence import route_verdict

    t0 = time.perf_counter()
    ref = infer_once(reference)
    seed = int(reference.options.get("seed") or 0)
    out: dict[str, OutputEquivalence] = {}
    errors: dict[str, str] = {}
    for target in routes:
        if target.label == reference.label:
            continue  # never judged against itself
        t1 = time.perf_counter()
        try:
            run = infer_once(target)
        except WinmlPerfError as exc:
            errors[target.label] = str(exc).splitlines()[0]
            continue
        if not same_feeds(ref.feeds, run.feeds):
            errors[target.label] = "its inputs differ from the reference's (shapes, --input files or seed)"
            continue
        figures = judge_inference(ref, run)
        out[target.label] = OutputEquivalence(
            reference.label, reference.path, target.path, seed, tuple(ref.feeds), tuple(figures),
            route_verdict(figures), round((time.perf_counter() - t1) * 1000.0, 3),
        )  # fmt: skip
    return OutputsRun(out, reference.label, round((time.perf_counter() - t0) * 1000.0, 3), errors)


#: The routes a plain model's reference is taken from, in order: the config route, else the CPU EP's.
REFERENCE_LABELS = ("config", "ep=cpu")


def reference_target(routes: Sequence[Any], source: str, base_options: Mapping[str, Any]) -> OutputsTarget:
    """The reference: the config route (or ep=cpu) of the run; without either, the CPU EP on the
    source model with the run's inputs (run for the check only, not measured)."""
    by_label = {r.label: r for r in routes}
    for label in REFERENCE_LABELS:
        if label in by_label:
            r = by_label[label]
            return OutputsTarget(label, str(r.session.path), dict(r.session.options))
    cpu = {**dict(base_options), "ep": "cpu", "device": None, "provider_options": {}, "prepared": False}
    return OutputsTarget("ep=cpu", str(source), cpu)
