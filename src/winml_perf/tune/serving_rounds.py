"""The race's measurement seam for ``--objective goodput``: one round is one serving invocation of
every route still racing, each in its own fresh child (measure/serving, as `winml serve` runs one
invocation: load the route once, warm it, serve the closed loop through og.Engine), in the race's
shuffled order; the round's cells go to the store as one run, as `winml serve` stores them.

What the race ranks is each route's goodput in that invocation: requests/s meeting the SLO over the
makespan. A route that met the SLO with none of its requests counts half a request (a continuity
correction), so its ratio to config is small and finite instead of 0, whose log the interval cannot
take; the stored cell keeps its goodput as measured (0)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from winml_perf.model.serving import Lengths, LoadSpec, Slo
from winml_perf.tune.goal import GOODPUT_METRIC, TTFT_METRIC
from winml_perf.tune.race import RoundResult

if TYPE_CHECKING:
    from winml_perf.measure.serving.child import ServingReply

#: A round with no request meeting the SLO counts this many good requests (see the module doc).
NO_GOOD_REQUESTS = 0.5


def closed_loop(concurrency: int, requests: int, prompt_tokens: int, max_new_tokens: int, seed: int) -> LoadSpec:
    """The load every route serves in every round: ``requests`` requests of fixed lengths, closed loop."""
    return LoadSpec(
        "closed",
        requests,
        Lengths(prompt_tokens, prompt_tokens),
        Lengths(max_new_tokens, max_new_tokens),
        concurrency=concurrency,
        seed=seed,
    )


def serving_tokens(load: LoadSpec) -> int:
    """Prompt + generated tokens one route's invocation processes, the child's warmup requests included."""
    from winml_perf.measure.serving.child import WARMUP_REQUESTS, WARMUP_TOKENS

    measured = load.requests * (load.prompt_tokens.high + load.max_new_tokens.high)
    return measured + WARMUP_REQUESTS * (load.prompt_tokens.low + WARMUP_TOKENS)


def ranked_goodput(figures: Mapping[str, float | None]) -> float | None:
    """The invocation's goodput as the race ranks it (module doc); None when no request finished."""
    span, goodput = figures.get("makespan_s"), figures.get("goodput_requests_per_s")
    if not span or goodput is None:
        return None
    return max(goodput * span, NO_GOOD_REQUESTS) / span


@dataclass
class ServingRounds:
    """Calls as ``measure(round_index, labels)``; ``store`` (results.store.Store or None) keeps each
    cell; ``store_errors`` collects the cells it could not keep; ``run_ids`` the runs it made."""

    specs: Mapping[str, Any]  # label -> model.spec.RouteSpec
    load: LoadSpec
    slo: Slo
    seed: int
    store: Any = None
    argv: Sequence[str] | None = None
    environment: dict[str, Any] | None = None
    timeout_s: float = 600.0
    store_errors: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    missed: dict[str, int] = field(default_factory=dict)  # label -> rounds in which no request met the SLO

    def notes(self) -> list[str]:
        """What the ranking stood on where routes met the SLO with none of their requests."""
        from winml_perf.tune.candidates import CONFIG_LABEL

        if not self.missed:
            return []
        who = ", ".join(f"{label} in {n}" for label, n in sorted(self.missed.items()))
        line = f"no request met --slo {self.slo.text} for {who} round(s): each such round counted half a request"
        if CONFIG_LABEL in self.missed:  # the reference's goodput was 0: the ratios there compare makespans
            line += (
                "; where config met it with none, a ratio to config compares makespans (the faster route wins),"
                " not goodput: loosen --slo to rank by goodput"
            )
        return [line]

    @property
    def tokens_per_invocation(self) -> int:
        return serving_tokens(self.load)

    def __call__(self, round_index: int, labels: Sequence[str]) -> RoundResult:
        from winml_perf.measure.cell_progress import utc_now
        from winml_perf.measure.serving.child import ServingJob
        from winml_perf.measure.serving.run import serve_invocation
        from winml_perf.record.environment import collect_environment
        from winml_perf.stats.serving import invocation_figures
        from winml_perf.support.errors import WinmlPerfError

        if self.environment is None:
            self.environment = collect_environment()
        started = utc_now()
        values: dict[str, dict[str, list[float]]] = {}
        failed: dict[str, str] = {}
        replies: dict[str, list[ServingReply]] = {}
        try:
            for label in labels:
                route = self.specs[label]
                job = ServingJob(route.session, (self.load,), round_index, False, self.seed)
                try:
                    reply = serve_invocation(route, job, self.timeout_s)
                except WinmlPerfError as exc:  # refused by the Engine at run time, died, timed out, failed
                    failed[label] = str(exc).splitlines()[0]
                    continue
                served = reply.served[0]
                figures = invocation_figures(served.requests, served.steps, self.slo)
                goodput = ranked_goodput(figures)
                if figures.get("goodput_requests_per_s") == 0:
                    self.missed[label] = self.missed.get(label, 0) + 1
                if goodput is None:
                    failed[label] = "no request finished"
                    continue
                replies[label] = [reply]
                ttft = [r.ttft_ms for r in served.requests if r.ttft_ms is not None]
                values[label] = {GOODPUT_METRIC: [goodput], TTFT_METRIC: ttft}
        finally:  # Ctrl-C mid-round still keeps the invocations that finished
            self._store(round_index, labels, replies, started)
        return RoundResult(values, self.tokens_per_invocation * len(labels), failed)

    def _store(
        self, round_index: int, order: Sequence[str], replies: Mapping[str, list[ServingReply]], started: str
    ) -> None:
        """The round's cells as one run (the `winml serve` record of one invocation), into the store."""
        from winml_perf.measure.serving.run import serving_cells
        from winml_perf.record.build import new_run_id
        from winml_perf.support.errors import StoreError

        if self.store is None or not replies:
            return
        assert self.environment is not None
        run_id = new_run_id()
        routes = [self.specs[label] for label in order if label in replies]
        sweep = {
            "command": "tune",
            "objective": "goodput",
            "routes": [r.label for r in routes],
            "prompt_tokens": [self.load.prompt_tokens.low],
            "max_new_tokens": [self.load.max_new_tokens.low],
            "cell_count": len(routes),
            "rounds": 1,
            "race_round": round_index,
            "seed": self.seed,
            "isolate": True,
            "order": [{"group": 0, "round": 0, "order": [r.label for r in routes]}],
            "loads": [self.load.to_dict()],
            "slo": self.slo.to_dict(),
            "invocations": 1,
        }
        cells = serving_cells(
            routes,
            (self.load,),
            dict(replies),
            self.slo,
            {},
            run_id=run_id,
            environment=self.environment,
            sweep=sweep,
            started=started,
        )
        for cell in cells:
            try:
                self.store.write_record(cell)
            except StoreError as exc:
                self.store_errors.append(f"{cell.cell_key}: {exc}")
        self.run_ids.append(run_id)
