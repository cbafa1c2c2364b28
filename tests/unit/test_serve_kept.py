"""What an interrupted `winml serve` says it kept: where the store refused the cells it says so,
naming the store, rather than 'not kept (--no-store, no -o)' beside a --store the user gave."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from winml_perf.commands.serve import _kept


def _outcome(store: str | None, errors: list[str]) -> SimpleNamespace:
    run = SimpleNamespace(sweep={"invocations": 20}, cells=[object()] * 2, run_id="r1")
    return SimpleNamespace(run=run, store=store, store_errors=errors, served={"config": 1})


def test_a_store_that_refused_the_cells_is_named_not_no_store():
    said = _kept(_outcome("s.db", ["config|c1: disk full"]), SimpleNamespace(output=None))
    assert "not stored in s.db (config|c1: disk full)" in said and "--no-store" not in said


def test_cells_kept_nowhere_say_so_and_where_they_went_otherwise():
    assert "not kept (--no-store, no -o)" in _kept(_outcome(None, []), SimpleNamespace(output=None))
    said = _kept(_outcome("s.db", []), SimpleNamespace(output=Path("run.json")))
    assert "stored in s.db and written to run.json" in said
