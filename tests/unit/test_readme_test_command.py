"""The README's test command is the one .ci/run runs, and it runs the suite on every core (pytest-xdist)."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO


def _command(text: str) -> str:
    (line,) = [x for x in text.splitlines() if re.search(r"pip install -q -e '\.\[test\]' && python -m pytest", x)]
    return line.strip()


def test_readme_and_ci_run_the_same_test_command_across_workers():
    readme = _command((REPO / "README.md").read_text())
    assert readme == _command((REPO / ".ci/run").read_text())
    assert readme.endswith("python -m pytest -n auto --dist loadfile")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(e.startswith("pytest-xdist") for e in extras)  # -n comes from pytest-xdist
