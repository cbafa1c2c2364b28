"""Issue 39: a perf run resolves each route once. A one-route and a two-route run of `winml perf` on
the tiny bundles (in this process, through cli.main, with --no-isolate so the cell runs here too: the
counts cover the whole run, the orchestration and the measuring) count three things:

* ``target_for`` (ep/devices.py: what ``resolve_target`` runs, given the runtime's value): once per route;
* ``normalize_ep_name``: once per route that spells an EP (``--ep cpu``, ``ep=cpu``), at the edge
  (ep/resolved.py); never for a name that is canonical already, so ``--device cpu`` normalises nothing;
* ``load_config``: once per bundle folder a run reads (the source bundle, each route's derived one):
  the rooms that read a config after that are handed it (prepare, the roofline) or find it in the run's
  bundle/config.ConfigBook (equivalence and its variant folders); and each genai_config.json is parsed
  (``load_config_dict``) once.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import shutil
import sys
import traceback
from collections import Counter
from pathlib import Path

import pytest

import winml_perf
from tests.conftest import TINY_FLAT, TINY_PIPELINE
from winml_perf.bundle import config as bundle_config
from winml_perf.ep import devices, table

needs_qnn = pytest.mark.skipif(importlib.util.find_spec("onnxruntime_qnn") is None, reason="needs onnxruntime-qnn")


def _count(monkeypatch, module, name: str, counts: Counter, key=lambda *a: a[0] if a else None) -> None:
    """Wrap ``module.name`` and every project module's own binding of it, counting calls by ``key(args)``."""
    original = getattr(module, name)

    def counted(*args, **kwargs):
        counts[(name, key(*args))] += 1
        return original(*args, **kwargs)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("winml_perf") and getattr(mod, name, None) is original:
            monkeypatch.setattr(mod, name, counted)


def _perf(monkeypatch, tmp_path: Path, source: Path, *routes: str) -> Counter:
    for found in pkgutil.walk_packages(winml_perf.__path__, "winml_perf."):  # every binding exists before counting
        importlib.import_module(found.name)
    bundle = tmp_path / "tiny"
    shutil.copytree(source, bundle, ignore=shutil.ignore_patterns("_compiled"))
    monkeypatch.setattr(bundle_config, "_PARSED", {}, raising=False)  # nothing parsed before this run
    counts: Counter = Counter()
    _count(monkeypatch, devices, "target_for", counts)
    _count(monkeypatch, table, "normalize_ep_name", counts)
    _count(monkeypatch, bundle_config, "load_config_dict", counts, key=lambda b, *_: Path(b).resolve())
    _count(monkeypatch, bundle_config, "load_config", counts, key=lambda b: Path(b).resolve())
    from winml_perf.cli import main

    argv = [
        "perf",
        str(bundle),
        *routes,
        "--no-store",
        "--no-isolate",
        "--invocations",
        "1",
        "--iterations",
        "1",
        "--max-new-tokens",
        "2",
    ]
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code in (0, None)
    return counts


def _by(counts: Counter, name: str) -> dict:
    return {k[1]: v for k, v in counts.items() if k[0] == name}


def _read_once_each(counts: Counter, source: Path) -> None:
    """Every bundle folder the run read: its config loaded once and parsed once, the source among them."""
    loaded, parsed = _by(counts, "load_config"), _by(counts, "load_config_dict")
    assert loaded and set(loaded.values()) == {1}, loaded
    assert parsed and set(parsed.values()) == {1}, parsed
    assert source.resolve() in loaded


@pytest.mark.parametrize("bundle", [TINY_FLAT, TINY_PIPELINE], ids=["flat", "pipeline"])
@pytest.mark.parametrize(
    ("flags", "spelled"),
    [(("--ep", "cpu"), ["cpu"]), (("--device", "cpu"), [])],
    ids=["ep", "device"],
)
def test_one_route_is_resolved_once_and_its_config_read_once(monkeypatch, tmp_path, capsys, bundle, flags, spelled):
    counts = _perf(monkeypatch, tmp_path, bundle, *flags)
    assert sum(_by(counts, "target_for").values()) == 1
    assert _by(counts, "normalize_ep_name") == dict.fromkeys(spelled, 1)  # the route's EP as spelled; nothing else
    _read_once_each(counts, tmp_path / "tiny")
    assert len(_by(counts, "load_config")) == 2  # the source bundle and the route's derived one


@pytest.mark.parametrize(
    ("bundle", "route", "ep"),
    [
        (TINY_FLAT, "ep=cpu;stages=decoder", "cpu"),  # runs as the config route: measured once
        (TINY_PIPELINE, "ep=cpu;stages=context", "cpu"),
        pytest.param(TINY_FLAT, "ep=qnn", "qnn", marks=needs_qnn),  # a second route measured and judged against config
    ],
    ids=["flat", "pipeline", "qnn"],
)
def test_two_routes_are_resolved_once_each_and_each_config_read_once(monkeypatch, tmp_path, capsys, bundle, route, ep):
    counts = _perf(monkeypatch, tmp_path, bundle, "--route", "config", "--route", route)
    assert _by(counts, "target_for") == {None: 1, ep: 1}  # the config route, and the forced one
    assert _by(counts, "normalize_ep_name") == {ep: 1}
    _read_once_each(counts, tmp_path / "tiny")  # equivalence, its variant folders and the record read them too


@needs_qnn
def test_a_judged_runs_checks_are_told_each_config_and_read_none_themselves(monkeypatch, tmp_path, capsys):
    """Output checks (--check-outputs) and equivalence open sessions of the source bundle and of the
    route's derived one: the sessions are told the config the run read (equivalence/check.session_of),
    so no genai_config.json is read from under equivalence/ but by load_config, the first time a folder
    is read (a variant folder the check writes); and load_config reads each file's bytes once."""
    reads: Counter = Counter()
    read_bytes = Path.read_bytes

    def counted(self: Path) -> bytes:
        if self.name == "genai_config.json":
            stack = [f"{f.filename}:{f.name}" for f in traceback.extract_stack()]
            by = "load_config" if any(s.endswith("bundle/config.py:load_config") for s in stack) else "other"
            checks = any("/winml_perf/equivalence/" in s for s in stack)
            reads[(self.resolve(), by, checks)] += 1
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    _perf(monkeypatch, tmp_path, TINY_FLAT, "--route", "config", "--route", "ep=qnn", "--check-outputs")
    assert "outputs of ep=qnn match config" in capsys.readouterr().out
    assert not [k for k in reads if k[2] and k[1] != "load_config"], reads  # no session read one itself
    loaded = Counter(k[0] for k, n in reads.items() for _ in range(n) if k[1] == "load_config")
    assert (tmp_path / "tiny" / "genai_config.json").resolve() in loaded and set(loaded.values()) == {1}, loaded
