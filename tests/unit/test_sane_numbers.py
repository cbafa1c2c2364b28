"""record/sane_numbers.py: a fine record is passed without naming any path; a bad one is named at
its first bad place, the same place as before the shortcut (issue 37)."""

from __future__ import annotations

import math
import random

import pytest

from winml_perf.record.sane_numbers import MAX_DEPTH, _first_problem, first_problem


def _deep(levels: int) -> dict:
    node: dict = {}
    for _ in range(levels):
        node = {"x": node}
    return node


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ({"samples": [{"decode_step_ms": [1.0, math.nan]}]}, "samples/0/decode_step_ms/1: nan"),
        ({"a": 1, "b": {"c": [1, 2**64]}}, "b/c/1: 18446744073709551616"),
        ({"a": [math.inf, -math.inf]}, "a/0: inf"),
        ({"ok": [1.0, 2.0], "n": -math.inf}, "n: -inf"),
        (math.nan, "(top level): nan"),
    ],
)
def test_a_bad_number_is_named_at_its_first_place(doc, where):
    assert first_problem(doc).startswith(where)


def test_nesting_past_the_limit_is_named():
    assert "nested deeper than" in first_problem(_deep(MAX_DEPTH + 2))
    assert first_problem(_deep(MAX_DEPTH - 1)) is None


def test_the_shortcut_agrees_with_the_walk_that_names_paths():
    rng = random.Random(37)
    atoms = [1, 2.5, -0.0, True, None, "s", math.nan, math.inf, 2**63, -(2**63), 2**70, 1e308]

    def doc(depth: int):
        kind = rng.random()
        if depth > 3 or kind < 0.4:
            return rng.choice(atoms[:6]) if rng.random() < 0.9 else rng.choice(atoms)
        if kind < 0.7:
            return [doc(depth + 1) for _ in range(rng.randint(0, 4))]
        return {f"k{i}": doc(depth + 1) for i in range(rng.randint(0, 4))}

    seen = set()
    for _ in range(2000):
        d = doc(0)
        expected = _first_problem(d, "", 0)
        assert first_problem(d) == expected
        seen.add(expected is None)
    assert seen == {True, False}
