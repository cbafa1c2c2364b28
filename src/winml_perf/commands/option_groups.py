"""Option groups: a command takes a few frozen dataclasses of flags, not one parameter a flag.

Each field of a group declares one flag as typer reads it (``Annotated[T, typer.Option(...)] =
default``). ``@option_groups`` hands typer a signature with every group's fields laid out in their
place, in the order written (so ``--help`` lists them as before), and calls the command with each
group built from its fields. A field name is a flag's name: two groups of one command cannot share
one.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

_KEYWORD = inspect.Parameter.KEYWORD_ONLY


def _is_group(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def _fields(group: type) -> list[inspect.Parameter]:
    """The group's fields as keyword parameters, with their typer annotations resolved."""
    hints = typing.get_type_hints(group, include_extras=True)
    out = []
    for f in dataclasses.fields(group):
        default = f.default if f.default is not dataclasses.MISSING else inspect.Parameter.empty
        out.append(inspect.Parameter(f.name, _KEYWORD, default=default, annotation=hints[f.name]))
    return out


def option_groups(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` as typer sees it: each parameter annotated with a dataclass spread into that
    dataclass's fields; the call builds the dataclass back from them."""
    hints = typing.get_type_hints(command, include_extras=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, type] = {}
    for param in inspect.signature(command).parameters.values():
        kind = hints.get(param.name, param.annotation)
        if _is_group(kind):
            groups[param.name] = kind
            params += _fields(kind)
        else:
            params.append(param.replace(annotation=kind, kind=_KEYWORD))  # typer passes every one by name
    names = [p.name for p in params]
    clash = sorted({n for n in names if names.count(n) > 1})
    assert not clash, f"{command.__name__}: option groups share {clash}"

    @functools.wraps(command)
    def wired(**flags: Any) -> Any:
        built = {
            name: group(**{f.name: flags.pop(f.name) for f in dataclasses.fields(group)})
            for name, group in groups.items()
        }
        return command(**flags, **built)

    wired.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    wired.__annotations__ = {p.name: p.annotation for p in params}
    return wired
