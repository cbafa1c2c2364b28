"""Exporters: records -> text in one format each, for `winml results export` (a frame of stored
records, ``winml_perf.results.load``). A run just measured (`winml perf --export-FORMAT`) is written
by the format's renderer (publish/formats.py, publish/render.py).

Each format is a module of this package that calls ``register`` when imported; every module here
is imported when the package is (``pkgutil``), so a new format is one new module: its exporter and,
for a format publish/formats.py does not declare, its ``Format`` (which joins the one registry).
Modules whose name starts with ``_`` hold shared pieces and register nothing.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from winml_perf.publish import formats
from winml_perf.publish.formats import Format, Offer
from winml_perf.support.errors import UsageError

if TYPE_CHECKING:  # pandas is imported lazily: the command line lists formats without it
    import pandas as pd


def _blank(text: str) -> bool:
    return not text.strip()


@dataclass(frozen=True)
class Exporter:
    """One export format."""

    name: str  # its --format name, a format of the registry (publish/formats.py) offered for export
    write: Callable[..., str]  # (frame with text timestamps, **options) -> text
    empty: Callable[[str], bool] = _blank  # whether its text holds no benchmark
    options: tuple[str, ...] = ()  # the options of `results export` its writer takes (direction)
    check: Callable[..., None] | None = None  # (**options) -> None, or exit 2: before the store is read


_REGISTRY: dict[str, Exporter] = {}


def register(exporter: Exporter, fmt: Format | None = None) -> Exporter:
    """Add ``exporter`` to the family (an error when its name is taken), and ``fmt``, its format,
    to the registry where publish/formats.py does not declare it."""
    if exporter.name in _REGISTRY:
        raise ValueError(f"two exporters are named {exporter.name!r}")
    if fmt is not None:
        formats.register(fmt)
    if exporter.name not in formats.offered(Offer.EXPORT):
        raise ValueError(f"exporter {exporter.name!r} has no format offered for export (publish/formats.py)")
    _REGISTRY[exporter.name] = exporter
    return exporter


def _discover() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


def exporters() -> dict[str, Exporter]:
    """Every exporter by name, in the registry's order (the order --help lists them)."""
    return {name: _REGISTRY[name] for name in formats.offered(Offer.EXPORT)}


def get(fmt: str) -> Exporter:
    """The exporter of ``fmt``; a UsageError (exit 2) naming them all when there is none."""
    return _REGISTRY[formats.check_format(Offer.EXPORT, fmt)]


def check_options(fmt: str, **options: Any) -> Exporter:
    """The exporter of ``fmt`` once the ``options`` given (not None) are ones it takes and its own
    check passes; else a UsageError (exit 2)."""
    exporter = get(fmt)
    for name, value in options.items():
        if value is not None and name not in exporter.options:
            takers = " / ".join(n for n, e in exporters().items() if name in e.options)
            raise UsageError(f"--{name} applies to --format {takers} only", f"drop --{name}, or pass --format {takers}")
    if exporter.check is not None:
        exporter.check(**options)
    return exporter


def format_help() -> str:
    """'json, jsonl, ... or gab-smaller (...).': the listed export formats, for --format's help."""
    return formats.format_help(Offer.EXPORT)


def export(df: pd.DataFrame, fmt: str, **options: Any) -> str:
    """The frame ``df`` (results.load) as ``fmt`` text."""
    from winml_perf.results.frame import with_text_times

    exporter = get(fmt)
    return exporter.write(with_text_times(df), **options)


def selects_nothing(fmt: str, text: str) -> bool:
    """Whether an export's text holds no benchmark (an empty array / object / table)."""
    return get(fmt).empty(text)


_discover()
