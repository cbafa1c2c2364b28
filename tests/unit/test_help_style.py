"""One help style for every command (commands/help_style.py): each value option states its metavar,
flags show none, and no help screen shows typer's `<str>` / `<list[str]>` / `<bool>` placeholders."""

from __future__ import annotations

import re

import pytest
import typer
from typer.core import TyperOption
from typer.testing import CliRunner

from winml_perf.cli import app

PLACEHOLDER = re.compile(r"<[a-z][a-z_ \[\]|,]*>")


def _walk(command, path: tuple[str, ...] = ()) -> list:
    """(path, command) for the command and every command under it (typer vendors click: no click import)."""
    found = [(path, command)]
    if hasattr(command, "commands"):
        for name, sub in sorted(command.commands.items()):
            found += _walk(sub, (*path, name))
    return found


COMMANDS = _walk(typer.main.get_command(app))


def test_the_walk_reaches_every_command():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"", "perf", "devices", "bundle show", "bundle prepare", "results export", "compare runs"} <= names
    assert "dashboard" in names and "bundle synth" in names


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: " ".join(p) or "winml")
def test_help_shows_no_type_placeholder(path):
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert not PLACEHOLDER.findall(result.output), result.output


@pytest.mark.parametrize("path", [p for p, c in COMMANDS if not hasattr(c, "commands")], ids=" ".join)
def test_every_value_option_declares_its_metavar(path):
    command = dict(COMMANDS)[path]
    missing = [
        p.opts[0]
        for p in command.params
        if isinstance(p, TyperOption) and not p.is_flag and not p.count and p.metavar is None
    ]
    assert not missing, f"winml {' '.join(path)}: give these a metavar: {missing}"


@pytest.mark.parametrize("path", [p for p, c in COMMANDS if c.help], ids=lambda p: " ".join(p) or "winml")
def test_help_paragraphs_are_not_hard_wrapped(path):
    """A paragraph of help is one line of text, so the terminal wraps it at its own width (issue 28)."""
    command = dict(COMMANDS)[path]
    for paragraph in command.help.split("\n\n"):
        assert paragraph.startswith("\b") or "\n" not in paragraph, paragraph
    wide = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "400", "NO_COLOR": "1"})
    first = command.help.split("\n\n")[0]
    assert first.split(". ")[0] in wide.output  # the first sentence on one screen line


def test_the_command_list_shows_each_summary_unbroken():
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "400", "NO_COLOR": "1"}).output
    assert "sparkline, latest value with its interval, newest change point" in out
