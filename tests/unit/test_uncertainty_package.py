"""winml_perf.stats loads its names lazily: each is what its submodule defines, whatever was
imported before, and the change-point detector's import does not pull in scipy."""

from __future__ import annotations

import importlib
import subprocess
import sys

import winml_perf.stats as uncertainty


def test_every_offered_name_is_its_submodules_object():
    for module in uncertainty._EXPORTS:
        importlib.import_module(f"winml_perf.stats.{module}")  # a submodule import must not shadow a name
    for name in uncertainty.__all__:
        home = importlib.import_module(f"winml_perf.stats.{uncertainty._HOME[name]}")
        assert getattr(uncertainty, name) is getattr(home, name), name
    assert set(uncertainty.__all__) == set(uncertainty._HOME)
    assert not set(uncertainty._HOME) & set(uncertainty._EXPORTS)  # no name is also a submodule's


def test_the_detector_and_the_dashboard_page_import_without_scipy():
    code = (
        "import sys, winml_perf.stats.series.changepoint, winml_perf.publish.dashboard_page; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy')[:3])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out


def test_the_cli_and_the_measuring_path_import_without_scipy():
    """Every `winml` process and every measuring child paid ~1.2 CPU s for scipy.stats at import
    (a third of a tiny `perf` run); scipy.special now loads when the first interval is computed."""
    code = (
        "import sys, winml_perf.cli, winml_perf.measure.sweep, winml_perf.measure.hosting.isolate, "
        "winml_perf.stats.hierarchical, winml_perf.stats.paired, winml_perf.stats.series.sustained; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy')[:3])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out


def test_intervals_still_load_scipy_when_they_are_computed():
    from winml_perf.stats.hierarchical import student_t_median
    from winml_perf.stats.quantile_intervals import quantile_ci_ranks

    assert quantile_ci_ranks(10) == (2, 9)  # the median's 95 % ranks at n = 10 (Conover table A3)
    interval = student_t_median([[10.0, 10.1], [10.4, 10.2], [9.9, 10.0]])
    assert interval.low < 10.1 < interval.high
