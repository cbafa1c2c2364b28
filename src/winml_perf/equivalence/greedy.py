"""--check-outputs: does a forced route generate the same greedy tokens as the bundle's config route?

Runs once per route before measuring (so the check's time never enters a measurement), with a
fixed synthetic prompt: one short greedy generation on the source bundle, one on each forced route.
A route that is faster but changes outputs must not pass silently: a difference becomes a warning
in every record of that route, with the first differing position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from winml_perf.equivalence.check import session_of
from winml_perf.model.route import OutputCheck

if TYPE_CHECKING:
    from winml_perf.equivalence.check import CheckSource
    from winml_perf.session.genai_session import GenaiSession

CHECK_NEW_TOKENS = 16


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first position where the sequences differ (length counts); None when equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _greedy(session: GenaiSession, prompt_ids: list[int], n_new: int) -> list[int]:
    with session as s:
        return list(s.generate_timed(prompt_ids, n_new).token_ids)


def check_routes(source: CheckSource, routes: Sequence[Any], n_new: int = CHECK_NEW_TOKENS) -> dict[str, OutputCheck]:
    """{route label: OutputCheck} for every route whose session path differs from the source bundle, over
    ``source``'s check prompt (the CheckSource a run made of the source bundle for all its checks: its
    session, prompt and seed). {} without generating anything when every route runs the source's own files."""
    checked = [r for r in routes if r.session.path != source.path]
    if not checked:
        return {}
    reference = _greedy(source.session, source.prompt_ids, n_new)
    out = {}
    for r in checked:
        tokens = _greedy(session_of(r.session.path), source.prompt_ids, n_new)
        out[r.label] = OutputCheck(
            len(source.prompt_ids), n_new, source.seed, tuple(reference), tuple(tokens),
            first_difference(reference, tokens),
        )  # fmt: skip
    return out
