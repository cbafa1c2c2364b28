"""An adaptive run across processes never stops at its target on two invocations."""

from winml_perf.measure import stopping
from winml_perf.model.policy_flags import iteration_policy as _iterations


def _policy(target="5%", invocations=None):
    return _iterations(5, target, 2, 1000, 600.0, invocations)


def test_two_alike_invocations_do_not_end_an_adaptive_run():
    policy = _policy()
    alike = [[100.0, 100.2, 99.9], [100.1, 100.0, 100.1]]  # their interval is far inside ±5 %
    assert stopping.half_width_pct(alike) < 5.0
    decision = stopping.decide(policy, alike, 0.0, 0.01, 1.0)
    assert decision.action == "invocation"
    third = stopping.decide(policy, alike + [[100.0, 100.1, 99.9]], 0.0, 0.01, 1.0)
    assert (third.action, third.reason) == ("stop", stopping.STOP_CI_TARGET)


def test_invocations_flag_sets_the_minimum_and_one_keeps_the_within_process_rule():
    assert _policy(invocations=4).invocations == 4
    one = _policy(invocations=1)
    assert (one.invocations, one.max_invocations) == (1, 1)
