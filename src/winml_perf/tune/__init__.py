"""`winml tune`: search per-stage EP assignments of a bundle, prune the ones that cannot win, race the
rest in paired fresh-process invocations against the leader, and name (and emit) the winner.

- goal.py: the objective, the --max-ttft-ms constraint and the --budget.
- candidates.py: per-stage assignments and the one --route each is measured as.
- prune.py: placement, compile, device crossings and equivalence, before anything is measured.
- race.py: successive elimination over paired invocations (a measurement seam decides how a round runs).
- rounds.py: the real seam, one invocation per route in a fresh process, each cell stored.
- serving_rounds.py: the seam of --objective goodput, one serving invocation (og.Engine, closed loop) per route.
- standings.py: the ranked table and the verdict.
- emit.py: the winner written as a bundle folder.
- session.py: the whole tune, wired.

May import: measure, compare and every room below them. Floors: docs/architecture.md.
"""
