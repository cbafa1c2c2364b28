"""No function in src/ over 100 lines (issue 39); ruff bounds parameters, statements and branches
(pyproject.toml: PLR0913, PLR0915, C901). The functions over 100 lines today are listed with their
length: a ratchet. A listed one may shrink (then lower or drop its entry), never grow, and no other
function may cross the line."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
MAX_LINES = 100

#: The size rules, and how many functions of src/ carry an exception to them today (a per-function
#: noqa each: the two of the perf branch and the six the parallel branches of issue 39 and 40 left,
#: moved from pyproject.toml's per-file ignores when they landed). Lower it as they are split; never raise it.
SIZE_RULES = ("C901", "PLR0913", "PLR0915")
SIZE_NOQA = 1

#: "path/from/src.py:function" -> its lines today. Split one and take it off; add none.
OVER = {}


def _lengths() -> dict[str, int]:
    out: dict[str, int] = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                name = f"{path.relative_to(SRC).as_posix()}:{node.name}"
                out[name] = max(out.get(name, 0), node.end_lineno - node.lineno + 1)
    return out


def test_no_function_over_100_lines_but_the_listed_ones():
    lengths = _lengths()
    over = {name: n for name, n in lengths.items() if n > MAX_LINES and name not in OVER}
    assert not over, f"functions over {MAX_LINES} lines (split them): {over}"


def test_the_listed_ones_only_shrink():
    lengths = _lengths()
    grown = {name: (lengths.get(name), n) for name, n in OVER.items() if lengths.get(name, 0) > n}
    assert not grown, f"listed functions grew (now, then): {grown}"
    done = [name for name in OVER if lengths.get(name, 0) <= MAX_LINES]
    assert not done, f"now {MAX_LINES} lines or fewer (or gone): take them off OVER: {done}"


def test_the_perf_command_only_wires():
    lengths = _lengths()
    assert lengths["winml_perf/commands/perf.py:perf"] <= 40


def _size_noqa() -> list[str]:
    pattern = re.compile(r"#\s*noqa:[^#]*\b(" + "|".join(SIZE_RULES) + r")\b")
    return [
        f"{path.relative_to(SRC)}:{i}"
        for path in sorted(SRC.rglob("*.py"))
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]


def test_the_size_exceptions_only_shrink():
    found = _size_noqa()
    assert len(found) <= SIZE_NOQA, f"a new size exception: split the function instead: {found}"


def test_every_size_exception_is_still_needed():
    pytest.importorskip("ruff")
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", str(SRC), "--no-cache", "--extend-select", "RUF100"]
        + ["--output-format", "concise"],
        capture_output=True,
        text=True,
        check=False,
    )
    stale = [line for line in done.stdout.splitlines() if "RUF100" in line and any(rule in line for rule in SIZE_RULES)]
    assert not stale, f"these functions are within bounds now: drop their noqa and lower SIZE_NOQA: {stale}"
