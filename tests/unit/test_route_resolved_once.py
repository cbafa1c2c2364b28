"""Issue 39: a perf run resolves each route once. For a one-route and a two-route run of `winml perf`
(in this process, through cli.main), `resolve_target` runs once per route, the EP name a route was
given is normalised once, and each bundle's genai_config.json is parsed once, however many rooms
read the config."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

import winml_perf
from tests.conftest import TINY_FLAT
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


def _perf(monkeypatch, tmp_path: Path, *routes: str) -> Counter:
    for found in pkgutil.walk_packages(winml_perf.__path__, "winml_perf."):  # every binding exists before counting
        importlib.import_module(found.name)
    bundle = tmp_path / "tiny"
    shutil.copytree(TINY_FLAT, bundle, ignore=shutil.ignore_patterns("_compiled"))
    monkeypatch.setattr(bundle_config, "_PARSED", {}, raising=False)  # nothing parsed before this run
    counts: Counter = Counter()
    _count(monkeypatch, devices, "resolve_target", counts)
    _count(monkeypatch, table, "normalize_ep_name", counts)
    _count(monkeypatch, bundle_config, "load_config_dict", counts, key=lambda b: Path(b).resolve())
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


def _parsed(counts: Counter) -> dict[Path, int]:
    return {k[1]: v for k, v in counts.items() if k[0] == "load_config_dict"}


def test_one_route_is_resolved_once_and_its_config_parsed_once(monkeypatch, tmp_path, capsys):
    counts = _perf(monkeypatch, tmp_path, "--ep", "cpu")
    assert sum(v for k, v in counts.items() if k[0] == "resolve_target") == 1
    assert counts[("normalize_ep_name", "cpu")] == 1  # the route's EP, as the user spelled it
    parsed = _parsed(counts)
    assert parsed and set(parsed.values()) == {1}, parsed  # the source bundle and the derived one, once each
    assert (tmp_path / "tiny").resolve() in parsed


@pytest.mark.parametrize(
    ("route", "ep"),
    [
        ("ep=cpu;stages=decoder", "cpu"),  # runs as the config route: measured once
        pytest.param("ep=qnn", "qnn", marks=needs_qnn),  # a second route measured and judged against config
    ],
)
def test_two_routes_are_resolved_once_each_and_each_config_parsed_once(monkeypatch, tmp_path, capsys, route, ep):
    counts = _perf(monkeypatch, tmp_path, "--route", "config", "--route", route)
    assert counts[("resolve_target", None)] == 1  # the config route
    assert counts[("resolve_target", ep)] == 1
    assert counts[("normalize_ep_name", ep)] == 1
    parsed = _parsed(counts)
    assert parsed and set(parsed.values()) == {1}, parsed  # equivalence and the record read them too
