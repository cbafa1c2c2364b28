"""The route summary says why its ratio can differ from the table's medians, and its remedy names
the flag that adds what it lacks (issue 28)."""

from __future__ import annotations

from winml_perf.compare.routes import INVOCATIONS, RouteComparison, RoutesReport
from winml_perf.compare.run_summary import summary_lines
from winml_perf.stats import significance as sig


def _row(speedup, lo, hi, verdict, pooled, pairs=5):
    return RouteComparison(
        "b", "tb", 16, 8, "ep=cpu", "config", "decode_tokens_per_s", speedup, lo, hi, verdict, pairs, 20, 20, 2.0,
        pairing=INVOCATIONS, pooled_speedup=pooled,
    )  # fmt: skip


def test_a_paired_ratio_far_from_the_pooled_medians_says_why():
    row = _row(1 / 1.29, 1 / 1.35, 1 / 1.22, sig.SLOWER, pooled=1 / 1.03)  # 1.29x slower, medians 3 % apart
    lines = summary_lines(RoutesReport("r", "config", (row,)))
    text = "\n".join(lines)
    assert "ran 1.29" in text and "slower than config" in text
    assert "why not the table's medians (1.03 times slower)" in text and "pairs each ep=cpu invocation" in text
    assert "raise --invocations" in text


def test_no_note_when_the_medians_agree_and_the_invocation_remedy_names_its_flag():
    agree = _row(0.98, 0.96, 1.01, sig.INCONCLUSIVE, pooled=0.985)
    assert agree.pooled_note() is None
    assert agree.speed_sentence().endswith("spans both sides; raise --invocations)")
    one = _row(0.9, float("nan"), float("nan"), sig.INCONCLUSIVE, pooled=0.9, pairs=1)
    assert "raise --invocations" in one.sentence() and "--iterations" not in one.sentence()
