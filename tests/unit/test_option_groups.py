"""A command of option groups: typer sees every field as a flag in the order written, and the
command gets each group built back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from winml_perf.commands.option_groups import option_groups


@dataclass(frozen=True)
class Sizes:
    width: Annotated[int, typer.Option(metavar="N", help="Width.")] = 1
    height: Annotated[int, typer.Option(metavar="N", help="Height.")] = 2


@dataclass(frozen=True)
class Look:
    colour: Annotated[str | None, typer.Option(metavar="NAME", help="Colour.")] = None


def _app(command) -> typer.Typer:
    app = typer.Typer()
    app.command()(command)
    app.command("other")(lambda: None)  # two commands: the first is called by name
    return app


def test_groups_are_built_from_their_flags_and_plain_parameters_pass_through():
    seen = []

    @option_groups
    def draw(name: Annotated[str, typer.Argument()], sizes: Sizes, look: Look, force: bool = False) -> None:
        seen.append((name, sizes, look, force))

    result = CliRunner().invoke(_app(draw), ["draw", "box", "--height", "5", "--colour", "red", "--force"])
    assert result.exit_code == 0, result.output
    assert seen == [("box", Sizes(width=1, height=5), Look(colour="red"), True)]


def test_help_lists_the_fields_in_the_order_written():
    @option_groups
    def draw(sizes: Sizes, look: Look) -> None:
        """Draw."""

    text = CliRunner().invoke(_app(draw), ["draw", "--help"], env={"COLUMNS": "100"}).output
    assert text.index("--width") < text.index("--height") < text.index("--colour")


def test_two_groups_cannot_declare_one_flag():
    with pytest.raises(AssertionError, match="share"):

        @option_groups
        def draw(sizes: Sizes, again: Sizes) -> None:
            pass
