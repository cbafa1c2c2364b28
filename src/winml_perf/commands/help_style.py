"""Help screens without type placeholders: options show their metavar (``N``, ``FILE``) or
nothing (flags), never typer's ``<bool>`` / ``<str>`` / ``<path>``."""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand


def _no_type(ctx: Any) -> None:
    return None


class PlainHelpCommand(TyperCommand):
    """A command whose arguments show their name only, and whose --help shows no type."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument):
                param.display_type_rich = _no_type  # the name column already says what it is

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""  # a flag: no value to describe
        return option
