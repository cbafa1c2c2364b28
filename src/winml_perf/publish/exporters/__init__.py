"""Exporters: records -> text in one format each, for `winml results export` (a frame of stored
records, ``winml_perf.results.load``) and, where a format has one, `winml perf --export-FORMAT`
(the run record just measured).

Each format is a module of this package that calls ``register`` when imported; every module here
is imported when the package is (``pkgutil``), so a new format is one new module. Modules whose
name starts with ``_`` hold shared pieces and register nothing.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from winml_perf.support.errors import UsageError

if TYPE_CHECKING:  # pandas is imported lazily: the command line lists formats without it
    import pandas as pd

    from winml_perf.model.record import RunRecord


def _blank(text: str) -> bool:
    return not text.strip()


@dataclass(frozen=True)
class Exporter:
    """One export format."""

    name: str  # its --format name
    write: Callable[..., str]  # (frame with text timestamps, **options) -> text
    help: str | None = None  # how `results export --help` lists it; None: not listed
    rank: int = 100  # where --help and errors list it, lowest first (then by name)
    run_text: Callable[[RunRecord], str] | None = None  # a run -> text, for `winml perf --export-NAME`
    empty: Callable[[str], bool] = _blank  # whether its text holds no benchmark


_REGISTRY: dict[str, Exporter] = {}


def register(exporter: Exporter) -> Exporter:
    """Add ``exporter`` to the family (an error when its name is taken)."""
    if exporter.name in _REGISTRY:
        raise ValueError(f"two exporters are named {exporter.name!r}")
    _REGISTRY[exporter.name] = exporter
    return exporter


def _discover() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


def exporters() -> dict[str, Exporter]:
    """Every exporter by name, in the order --help lists them."""
    return {e.name: e for e in sorted(_REGISTRY.values(), key=lambda e: (e.rank, e.name))}


def get(fmt: str) -> Exporter:
    """The exporter of ``fmt``; a UsageError (exit 2) naming them all when there is none."""
    if fmt not in _REGISTRY:
        names = list(exporters())
        raise UsageError(f"--format {fmt!r} is not one of {', '.join(names)}", f"pass --format {' / '.join(names)}")
    return _REGISTRY[fmt]


def run_formats() -> tuple[str, ...]:
    """The formats a run record can be exported in (`winml perf --export-FORMAT`)."""
    return tuple(name for name, e in exporters().items() if e.run_text is not None)


def format_help() -> str:
    """'csv, json, ... or gab-smaller (...).': the listed formats, for --format's help."""
    shown = [e.help for e in exporters().values() if e.help]
    return (", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else "".join(shown)) + "."


def export(df: pd.DataFrame, fmt: str, **options: Any) -> str:
    """The frame ``df`` (results.load) as ``fmt`` text."""
    from winml_perf.results.frame import with_text_times

    exporter = get(fmt)
    return exporter.write(with_text_times(df), **options)


def selects_nothing(fmt: str, text: str) -> bool:
    """Whether an export's text holds no benchmark (an empty array / object / table)."""
    return get(fmt).empty(text)


_discover()
