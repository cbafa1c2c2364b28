"""The race's real measurement seam: one round is one `run_sweep` over the routes still racing, each
route's cell in its own fresh child process (one invocation), as `winml perf` measures; every cell
record goes to the store as soon as it exists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from winml_perf.tune.race import RoundResult

if TYPE_CHECKING:
    from winml_perf.model.record import CellRecord

#: Measured iterations in one invocation of a screening round (its warmup as the full rounds').
SCREEN_ITERATIONS = 1


@dataclass(frozen=True)
class Shape:
    prompt_tokens: int
    max_new_tokens: int
    iterations: int
    warmup: int

    @property
    def tokens_per_invocation(self) -> int:
        return (self.warmup + self.iterations) * (self.prompt_tokens + self.max_new_tokens)


@dataclass
class RealRounds:
    """Calls as ``measure(round_index, labels)``; ``store`` (results.store.Store or None) keeps each
    cell; ``store_errors`` collects the cells it could not keep; ``run_ids`` the runs it made."""

    specs: Mapping[str, Any]  # label -> model.spec.RouteSpec
    shape: Shape
    metrics: tuple[str, ...]
    seed: int
    store: Any = None
    argv: Sequence[str] | None = None
    environment: Mapping[str, Any] | None = None
    store_errors: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)

    def short(self) -> RealRounds:
        """The screen's seam: the same routes, prompt, warmup and store, one measured iteration per
        invocation (the run ids and store errors go to this object's lists)."""
        if self.environment is None:
            from winml_perf.record.environment import collect_environment

            self.environment = collect_environment()
        shape = replace(self.shape, iterations=SCREEN_ITERATIONS)
        return replace(self, shape=shape, store_errors=self.store_errors, run_ids=self.run_ids)

    def __call__(self, round_index: int, labels: Sequence[str]) -> RoundResult:
        from winml_perf.compare.cells import cell_of
        from winml_perf.measure.progress import NullProgress
        from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
        from winml_perf.model.spec import IterationPolicy, PromptSpec, WarmupPolicy, expand_sweep
        from winml_perf.record.environment import collect_environment
        from winml_perf.support.errors import StoreError

        if self.environment is None:
            self.environment = collect_environment()
        cells = expand_sweep(
            [self.specs[label] for label in labels],
            (self.shape.prompt_tokens,),
            (self.shape.max_new_tokens,),
            prompt=PromptSpec(None, False, self.seed),
            warmup=WarmupPolicy(count=self.shape.warmup),
            iterations=IterationPolicy(iterations=self.shape.iterations),
        )
        values: dict[str, dict[str, list[float]]] = {}
        failed: dict[str, str] = {}

        def on_cell_done(record: CellRecord) -> None:
            if self.store is not None:
                try:
                    self.store.write_record(record)
                except StoreError as exc:
                    self.store_errors.append(f"{record.cell_key}: {exc}")
            label = record.route.label
            if not record.ok:
                failed[label] = record.failure.message if record.failure else "failed"
                return
            cell = cell_of(record)
            values[label] = {m: [s.values[m] for s in cell.samples if m in s.values] for m in self.metrics}

        run = run_sweep(
            cells,
            seed=self.seed * 10_007 + round_index,  # another interleaving each round, the same for a seed
            isolate=True,
            on_cell_done=on_cell_done,
            progress=NullProgress(),
            facts=RunFacts(environment=self.environment, argv=self.argv),
            extras=CellExtras(roofline=False),
        )
        self.run_ids.append(run.run_id)
        return RoundResult(values, self.shape.tokens_per_invocation * len(cells), failed)
