"""Every command's --help fits an 80-column terminal with nothing cut (issue 38: every table
inside the terminal). Commands are found from the app itself, so a new one is held to it too."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from tests.conftest import run_winml
from winml_perf.cli import app


def _command_paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, sub in sorted(getattr(command, "commands", {}).items()):  # a group's subcommands
        paths += _command_paths(sub, (*prefix, name))
    return paths


COMMANDS = _command_paths(typer.main.get_command(app))


def test_the_walk_finds_every_command():
    assert {("perf",), ("tune",), ("serve",), ("bundle", "prepare"), ("results", "list")} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "winml")
def test_help_fits_80_columns_uncut(path):
    r = run_winml(*path, "--help", env={"COLUMNS": "80", "TERMINAL_WIDTH": "80", "NO_COLOR": "1"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert not [line for line in lines if "…" in line], "a help row was cut at 80 columns"
