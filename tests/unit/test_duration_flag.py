"""`winml perf --duration`: its units, its refusals (exit 2 naming the flag) and the policy it becomes."""

from __future__ import annotations

import pytest

from winml_perf.commands.duration_flag import parse_duration, sustained_policy
from winml_perf.measure import stopping
from winml_perf.support.errors import UsageError


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("10m", 600.0), ("1.5m", 90.0), (" 2m ", 120.0)]
)
def test_seconds_and_minutes(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10x", "m", "-5s", "0", "0m", "ten minutes", "5 h"])
def test_bad_values_are_usage_errors_naming_the_flag(text):
    with pytest.raises(UsageError) as info:
        parse_duration(text)
    assert "--duration" in info.value.message and info.value.exit_code == 2


def test_the_policy_runs_one_invocation_until_the_duration_and_refuses_a_target_or_invocations():
    policy = sustained_policy("2m", None, None)
    assert policy.duration_s == 120.0 and not policy.multi_invocation
    assert stopping.decide(policy, [[1.0] * 5000], 119.0, 0.01, 0.0).action == "iteration"  # never a count
    assert stopping.decide(policy, [[1.0]], 120.0, 0.01, 0.0).reason == stopping.STOP_DURATION
    assert stopping.next_batch(policy, 10_000, 1) == 1
    with pytest.raises(UsageError, match="--target-ci"):
        sustained_policy("2m", "1%", None)
    with pytest.raises(UsageError, match="--invocations"):
        sustained_policy("2m", None, 5)
