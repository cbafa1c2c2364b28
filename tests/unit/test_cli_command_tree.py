"""typer builds the click command tree from every command's signature, ~0.2 CPU s: a process that
runs `main` many times (the fuzz test, a fork of the test server) builds it once."""

from __future__ import annotations

import pytest
import typer

from winml_perf import cli


def test_the_command_tree_is_built_once_per_process(monkeypatch, capsys):
    built = []
    real = typer.main.get_command
    monkeypatch.setattr(typer.main, "get_command", lambda app: built.append(app) or real(app))
    cli._command.cache_clear()
    try:
        for _ in range(3):
            with pytest.raises(SystemExit) as ended:
                cli.main(["--version"])
            assert ended.value.code == 0
    finally:
        cli._command.cache_clear()
    assert built == [cli.app]
    assert capsys.readouterr().out.count("winml-perf ") == 3  # each call still ran the command
