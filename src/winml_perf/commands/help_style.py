"""One help style, and one numeric-flag check, for every command: options show their metavar (``N``, ``FILE``, ``NAME=PATH``) or
nothing (flags), never typer's ``<bool>`` / ``<str>`` / ``<path>`` / ``<list[str]>``.

Every app is a ``PlainTyper``: its groups and commands use the classes below. A value option states
its metavar where it is declared (``typer.Option(metavar="N", ...)``); tests/unit/test_help_style.py
walks every command's help and fails on a ``<type>`` placeholder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

F = TypeVar("F", bound=Callable[..., Any])


def _no_type(ctx: Any) -> None:
    return None


def reflowed(text: str | None) -> str | None:
    """Help text with each paragraph on one line, so the terminal wraps it (a docstring's line
    breaks would otherwise show mid-sentence: typer keeps them in rich mode); a paragraph that
    starts with \\b keeps its lines."""
    if not text:
        return text
    import inspect

    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split("\n")) for p in paragraphs)


def _reflow(command: Any) -> None:
    command.help = reflowed(command.help)
    command.short_help = reflowed(command.short_help)


def _plain_help_option(option: Any) -> Any:
    if option is not None:
        option.metavar = ""  # a flag: no value to describe
    return option


class PlainHelpCommand(TyperCommand):
    """A command whose arguments show their name only, and whose flags show no type."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _reflow(self)
        for param in self.params:
            if isinstance(param, TyperArgument):
                param.display_type_rich = _no_type  # type: ignore[method-assign]  # the name column says what it is
            elif isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
                param.metavar = ""  # a flag: no value to describe

    def get_help_option(self, ctx: Any) -> Any:
        return _plain_help_option(super().get_help_option(ctx))

    def invoke(self, ctx: Any) -> Any:
        from winml_perf.commands.numeric_flags import check_params

        check_params(ctx)  # every numeric flag within its bounds before the command runs
        return super().invoke(ctx)


class PlainHelpGroup(TyperGroup):
    """A group (``winml``, ``winml results``, ...) whose --help shows no type."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _reflow(self)

    def get_help_option(self, ctx: Any) -> Any:
        return _plain_help_option(super().get_help_option(ctx))


class PlainTyper(typer.Typer):
    """A Typer app whose groups and commands use the plain help style unless told otherwise."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", PlainHelpGroup)
        super().__init__(**kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Callable[[F], F]:
        kwargs.setdefault("cls", PlainHelpCommand)
        decorator: Callable[[F], F] = super().command(*args, **kwargs)
        return decorator
