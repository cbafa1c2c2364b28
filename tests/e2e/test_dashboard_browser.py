"""The dashboard in a real headless browser (Debian's chromium): the page loads offline with no
errors, draws every chart, and draws exactly one point per record in the store."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest

from tests.results_fakes import golden_cells, hex_id, interleaved_run, make_cell, noisy
from winml_perf.results.dashboard import write_dashboard
from winml_perf.results.store import open_store

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-extensions", "--disable-default-apps",
                  "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0")


def chromium() -> str:
    for path in ("/usr/bin/chromium", "/usr/bin/chromium-browser", shutil.which("chromium") or ""):
        if path and os.access(path, os.X_OK):
            return path
    if os.environ.get("CI"):
        pytest.fail("chromium is missing in CI; .ci/run installs it with scripts/ci-chromium.sh")
    pytest.skip("chromium is not installed (scripts/ci-chromium.sh installs it)")


def render(page: Path, tmp_path: Path, fragment: str = "") -> tuple[dict[str, str], str, str]:
    """Load the page in headless chromium; the #winml-status attributes, the DOM and chromium's log."""
    profile = tmp_path / f"profile{len(list(tmp_path.glob('profile*')))}"
    proc = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri() + fragment],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    tag = re.search(r'<div id="winml-status"[^>]*>', proc.stdout)
    assert tag, f"no status element in the DOM: {proc.stdout[:500]}"
    attrs = {k: unescape(v) for k, v in re.findall(r'(data-[a-z-]+)="([^"]*)"', tag.group(0))}
    return attrs, proc.stdout, proc.stderr


def console_errors(log: str) -> list[str]:
    """Console messages of the page in chromium's log (it logs every level as INFO:CONSOLE; the page
    itself writes nothing to the console, so any message is a problem)."""
    return [line for line in log.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("dash")
    with open_store(root / "winml-perf.db") as store:
        store.write_records(golden_cells())  # 5 records: 3 routes of one run, then a regression and a failed cell
        for day in range(3, 10):  # a second bundle with a week of nightly history and a step change on day 7
            center = 2.0 if day < 7 else 2.4
            run = hex_id("nightly", day)
            store.write_records(interleaved_run(run, {"config": noisy(center, 10, 0.01, day), "ep=cpu": noisy(center * 0.8, 10, 0.01, 50 + day)},
                                                bundle="bundles/tiny-qwen2-pipeline", when=f"2025-01-{day:02d}T02:00:00Z", commit=f"{day}" * 8))
        store.write_record(make_cell(hex_id("plain"), bundle="bundles/other", testbed="tb-win", prompt_tokens=128, max_new_tokens=32,
                                     when="2025-01-05T02:00:00Z"))
        count = store.count()
        write_dashboard(store, root / "site")
    return root / "site" / "index.html", count


def test_page_renders_every_record_without_errors(site, tmp_path):
    page, count = site
    status, dom, log = render(page, tmp_path)
    assert status["data-state"] == "done", status.get("data-error-messages")
    assert status["data-errors"] == "0", status.get("data-error-messages")
    assert not console_errors(log), console_errors(log)
    assert int(status["data-records"]) == count == 5 + 7 * 2 + 1
    assert int(status["data-points"]) == count  # one marker per stored record, failed ones included
    assert int(status["data-charts"]) == 3 + 2 + 1  # series: bundle x route x testbed x shape
    assert int(status["data-bars"]) == 3 + 2  # route panels for decode: golden run (3 routes) and the nightly run (2)
    assert status["data-metric"] == "decode_tokens_per_s"
    assert dom.count('class="pt regression"') >= 2  # the day-7 step in both nightly routes, and golden run B
    assert dom.count("<svg") == int(status["data-charts"]) + 2
    assert "ep=webgpu decode ran 1.8" in dom  # the route panel's whisker title carries the compare sentence


def test_every_metric_renders(site, tmp_path):
    page, count = site
    for metric in ("ttft_ms", "e2e_ms", "peak_rss_bytes"):
        status, _, log = render(page, tmp_path, f"#metric={metric}")
        assert (status["data-state"], status["data-errors"], status["data-metric"]) == ("done", "0", metric), status
        assert int(status["data-points"]) == count
        assert not console_errors(log)


def test_an_empty_store_renders_an_empty_page(tmp_path):
    with open_store(tmp_path / "empty.db") as store:
        page = write_dashboard(store, tmp_path / "site")
    status, dom, log = render(page, tmp_path)
    assert (status["data-state"], status["data-errors"], status["data-points"], status["data-records"]) == ("done", "0", "0", "0")
    assert "the store holds no records" in dom and not console_errors(log)


def test_a_script_error_is_reported_by_the_status_element(site, tmp_path):
    """The check above would catch a broken page: inject a throwing script and see it counted."""
    page, _ = site
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text().replace("render(first);", "render(first); null.boom();"))
    status, _, _ = render(broken, tmp_path)
    assert status["data-state"] == "error" and status["data-errors"] != "0"
    noisy_page = tmp_path / "console.html"
    noisy_page.write_text(page.read_text().replace("render(first);", 'render(first); console.error("bad thing");'))
    status, _, log = render(noisy_page, tmp_path)
    assert status["data-errors"] == "1" and "bad thing" in status["data-error-messages"]
    assert any("bad thing" in line for line in console_errors(log))
