"""The dashboard in a real headless browser (Debian's chromium): every page kind loads offline with
no errors, the primary card of a testbed/bundle page draws one marker per record of the store, the
filters work, and screenshots at the width of a 1400 px screen (the overview; a page of one record,
of many records, of a change point) are checked pixel by pixel and kept (``$WINML_PERF_ARTIFACTS``,
else ``artifacts/`` under the repository: a CI artifact, git-ignored)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import numpy as np
import pytest

from tests.png_pixels import read_png
from tests.results_fakes import golden_cells, hex_id, interleaved_run, make_cell, noisy
from winml_perf.publish.dashboard import page_path, write_dashboard
from winml_perf.publish.dashboard_svg import unpacked
from winml_perf.results.store import open_store

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
    "--disable-default-apps",
    "--hide-scrollbars",
    "--virtual-time-budget=5000",
    "--enable-logging=stderr",
    "--v=0",
)
#: The screen the dashboard is read on: its width, and a height that shows a page's cards.
SCREEN_W, SCREEN_H = 1400, 2400
BLUE = (9, 105, 218)  # #0969da: markers, lines, a lone record's dot and whisker
RED = (207, 34, 46)  # #cf222e: a regression's change point, a failed status


def chromium() -> str:
    for path in ("/usr/bin/chromium", "/usr/bin/chromium-browser", shutil.which("chromium") or ""):
        if path and os.access(path, os.X_OK):
            return path
    if os.environ.get("CI"):
        pytest.fail("chromium is missing in CI; .ci/run installs it with scripts/ci-chromium.sh")
    pytest.skip("chromium is not installed (scripts/ci-chromium.sh installs it)")


def _profile(tmp_path: Path) -> str:
    n = len(list(tmp_path.glob("profile*")))
    return f"--user-data-dir={tmp_path / f'profile{n}'}"


def render(page: Path, tmp_path: Path, fragment: str = "") -> tuple[dict[str, str], str, str]:
    """Load the page in headless chromium; the #winml-status attributes, the DOM and chromium's log."""
    proc = subprocess.run(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            _profile(tmp_path),
            f"--window-size={SCREEN_W},{SCREEN_H}",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    tag = re.search(r'<div id="winml-status"[^>]*>', proc.stdout)
    assert tag, f"no status element in the DOM: {proc.stdout[:500]}"
    attrs = {k: unescape(v) for k, v in re.findall(r'(data-[a-z-]+)="([^"]*)"', tag.group(0))}
    return attrs, proc.stdout, proc.stderr


def screenshot(page: Path, tmp_path: Path, name: str) -> Path:
    folder = Path(os.environ.get("WINML_PERF_ARTIFACTS") or REPO / "artifacts") / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{name}.png"
    proc = subprocess.run(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            _profile(tmp_path),
            f"--window-size={SCREEN_W},{SCREEN_H}",
            f"--screenshot={out}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and out.stat().st_size > 10_000, proc.stderr[-2000:]
    return out


def console_errors(log: str) -> list[str]:
    """Console messages of the page in chromium's log (the page writes nothing to the console)."""
    return [line for line in log.splitlines() if ":CONSOLE" in line]


NIGHTLY = "bundles/tiny-qwen2-pipeline"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("dash")
    with open_store(root / "winml-perf.db") as store:
        store.write_json_records(golden_cells())  # 5 records: 3 routes of one run, then a regression and a failed cell
        for day in range(3, 40):  # a second bundle: 37 nights of two routes, a 15 % step on night 25
            center = 2.0 if day < 25 else 2.3
            run = hex_id("nightly", day)
            store.write_json_records(
                interleaved_run(
                    run,
                    {"config": noisy(center, 10, 0.01, day), "ep=cpu": noisy(center * 0.8, 10, 0.01, 50 + day)},
                    bundle=NIGHTLY,
                    when=f"2025-{1 + day // 28:02d}-{1 + day % 28:02d}T02:00:00Z",
                    commit=f"{day:02d}" * 6,
                )
            )
        store.write_json_record(
            make_cell(
                hex_id("plain"),
                bundle="bundles/other",
                testbed="tb-win",
                prompt_tokens=128,
                max_new_tokens=32,
                when="2025-01-05T02:00:00Z",
            )
        )
        counts = {
            (tb, b): store.count(testbed=tb, bundle=b)
            for tb, b in (("tb-linux", "tiny-qwen2"), ("tb-linux", "tiny-qwen2-pipeline"), ("tb-win", "other"))
        }
        index = write_dashboard(store, root / "site")
    return index, counts


def test_every_page_renders_without_errors_and_draws_every_record(site, tmp_path):
    index, counts = site
    status, dom, log = render(index, tmp_path)
    assert (status["data-state"], status["data-errors"], status["data-page"]) == ("done", "0", "index"), status
    assert not console_errors(log), console_errors(log)
    assert int(status["data-records"]) == sum(counts.values()) and status["data-series"] == status["data-rows"] == "6"
    assert (
        dom.count('<span class="regression">2025-01-26: -13.') == 2
    )  # the nightly step: newest change point of both routes
    for (testbed, bundle), count in counts.items():
        page = index.parent / page_path(testbed, bundle)
        status, dom, log = render(page, tmp_path)
        assert (status["data-state"], status["data-errors"]) == ("done", "0"), status
        assert not console_errors(log), console_errors(log)
        assert int(status["data-records"]) == count
        assert int(status["data-points"]) == count  # one marker per stored record in the primary card, failed ones too


def test_change_points_are_marked_and_listed(site, tmp_path):
    index, _ = site
    _, dom, _ = render(index.parent / page_path("tb-linux", "tiny-qwen2-pipeline"), tmp_path)
    primary = dom.split('data-primary=""', 1)[1].split("</section>", 1)[0]
    assert primary.count('<g class="cp regression">') == 2  # one per route, decode 15 % slower from night 25
    listed = re.findall(r"<li class=\"regression\"[^>]*>([^<]*)</li>", primary)
    assert len(listed) == 2 and all("2025-01-26: -13." in x for x in listed), listed
    others = dom.split('data-primary=""', 1)[1].split("</section>", 1)[1]
    assert 'class="card"' in others and '<g class="cp' not in others  # only the primary metric's card is marked


def test_filters_hide_other_testbeds_and_routes(site, tmp_path):
    index, _ = site
    status, _, _ = render(index, tmp_path, "#testbed=tb-win")
    assert status["data-rows"] == "1" and status["data-errors"] == "0"
    status, _, _ = render(index, tmp_path, "#route=ep%3Dcpu")
    assert status["data-rows"] == "2"
    page = index.parent / page_path("tb-linux", "tiny-qwen2-pipeline")
    every, _, _ = render(page, tmp_path)
    only_cpu, _, _ = render(page, tmp_path, "#route=ep%3Dcpu")
    assert int(only_cpu["data-visible-charts"]) * 2 == int(every["data-visible-charts"]) > 0


def _like(shot: np.ndarray, colour: tuple[int, int, int], tolerance: int = 60) -> np.ndarray:
    """Where the screenshot is (nearly) ``colour``: anti-aliased edges count."""
    return np.abs(shot[..., :3].astype(int) - np.array(colour)).sum(axis=2) <= tolerance


def _cards(status: dict[str, str]) -> dict[str, tuple[int, int]]:
    """Each card's metric -> its top and bottom in px, as the page reported them."""
    spans = (item.split(":") for item in status["data-cards"].split())
    return {metric: tuple(int(x) for x in span.split("-")) for metric, span in spans}


def test_screenshot_of_the_overview_uses_the_screen(site, tmp_path):
    index, _ = site
    status, _, _ = render(index, tmp_path)
    shot = read_png(screenshot(index, tmp_path, "overview"))
    right_third = slice(SCREEN_W * 2 // 3, None)
    assert shot.shape[1] == SCREEN_W and int(status["data-content-right"]) > SCREEN_W * 0.9
    assert (shot[:, right_third, :3] < 160).all(axis=2).sum() > 500  # text and rules in the right third
    assert _like(shot, RED)[:, right_third].any()  # the failed route's status and the regression


def test_screenshot_of_many_records_fills_the_width(site, tmp_path):
    index, _ = site
    page = index.parent / page_path("tb-linux", "tiny-qwen2-pipeline")
    status, _, _ = render(page, tmp_path)
    shot = read_png(screenshot(page, tmp_path, "detail-many-records"))
    assert int(status["data-content-right"]) > SCREEN_W * 0.9
    assert _like(shot, BLUE)[:, SCREEN_W * 2 // 3 :].sum() > 200  # the second route's charts reach the right third


def test_screenshot_of_one_record_draws_it_in_every_card(site, tmp_path):
    index, _ = site
    page = index.parent / page_path("tb-win", "other")
    status, _, _ = render(page, tmp_path)
    shot = read_png(screenshot(page, tmp_path, "detail-one-record"))
    cards = {m: span for m, span in _cards(status).items() if span[1] <= shot.shape[0]}
    assert len(cards) >= 4, status["data-cards"]
    blue = _like(shot, BLUE)
    for metric, (top, bottom) in cards.items():
        assert blue[top:bottom].sum() > 10, f"the {metric} card draws nothing of its one record"


def test_screenshot_of_a_change_point(site, tmp_path):
    index, _ = site
    page = index.parent / page_path("tb-linux", "tiny-qwen2-pipeline")
    status, _, _ = render(page, tmp_path)
    shot = read_png(screenshot(page, tmp_path, "detail-change-point"))
    top, bottom = _cards(status)["decode_tokens_per_s"]
    red = _like(shot, RED)[top:bottom]
    assert red.sum(axis=0).max() > 40  # a dashed vertical line: the regression's change point


def test_an_empty_store_renders_an_empty_page(tmp_path):
    with open_store(tmp_path / "empty.db") as store:
        page = write_dashboard(store, tmp_path / "site")
    status, dom, log = render(page, tmp_path)
    assert (status["data-state"], status["data-errors"], status["data-records"], status["data-rows"]) == (
        "done",
        "0",
        "0",
        "0",
    )
    assert "the store holds no records" in dom and not console_errors(log)


def test_a_script_error_is_reported_by_the_status_element(site, tmp_path):
    """The check above would catch a broken page: inject a throwing script and see it counted."""
    index, _ = site
    broken = tmp_path / "broken.html"
    broken.write_text(index.read_text().replace("  init();", "  init(); null.boom();"))
    status, _, _ = render(broken, tmp_path)
    assert status["data-state"] == "error" and status["data-errors"] != "0"
    noisy_page = tmp_path / "console.html"
    noisy_page.write_text(index.read_text().replace("  init();", '  init(); console.error("bad thing");'))
    status, _, log = render(noisy_page, tmp_path)
    assert status["data-errors"] == "1" and "bad thing" in status["data-error-messages"]
    assert any("bad thing" in line for line in console_errors(log))


def test_the_serving_page_and_its_overview_section_render_without_errors(tmp_path):
    from tests.unit.test_dashboard_serving import _serving_run

    with open_store(tmp_path / "serving.db") as store:
        store.write_json_records(_serving_run("3" * 32, "2026-12-04T00:00:00Z", 100.0))
        elsewhere = _serving_run("4" * 32, "2026-12-04T00:00:00Z", 50.0)
        for cell in elsewhere:
            cell["environment"]["testbed_id"] = "u"
        store.write_json_records(elsewhere)
        index = write_dashboard(store, tmp_path / "site")
    status, dom, log = render(index, tmp_path)
    assert (status["data-state"], status["data-errors"], status["data-serving-charts"]) == ("done", "0", "4"), status
    assert "serving.html#serving-t-tiny-qwen2" in dom and not console_errors(log)
    status, dom, _ = render(index, tmp_path, "#testbed=u")  # the testbed filter hides the other testbed's row
    assert '<tr data-testbed="t" class="hidden">' in dom
    assert '<tr data-testbed="u"' in dom and '<tr data-testbed="u" class="hidden">' not in dom
    status, dom, log = render(index.parent / "serving.html", tmp_path)
    assert (status["data-state"], status["data-errors"], status["data-charts"]) == ("done", "0", "4"), status
    assert dom.count('class="point"') == 2 * 6 and not console_errors(log)


def test_a_hover_shows_the_numbers_as_human_writes_them(site, tmp_path):
    """The markers' titles are written by the page's script when the pointer reaches them: every
    marker of the hovered chart, with its record's labels and human()'s text of its value, interval
    and unit."""
    from winml_perf.support.human_numbers import human

    index, _ = site
    page = index.parent / page_path("tb-linux", "tiny-qwen2-pipeline")
    hover = 'document.querySelector(".card[data-primary] circle.pt").dispatchEvent(new MouseEvent("mouseover", {bubbles: true}));'
    hovered = tmp_path / "hovered.html"
    hovered.write_text(page.read_text().replace("  init();", "  init(); " + hover))
    status, dom, log = render(hovered, tmp_path)
    assert (status["data-state"], status["data-errors"]) == ("done", "0") and not console_errors(log), status
    primary = dom.split('data-primary=""', 1)[1].split("</section>", 1)[0]
    groups = re.findall(r'<g class="pts" ([^>]*)>(.*?)</g>', primary)
    assert len(groups) == 2  # a chart per route
    (attrs, markers), (_, untouched) = groups
    raw = {k: unescape(v) for k, v in re.findall(r'data-([a-z]+)="([^"]*)"', attrs)}
    titles = [unescape(t) for t in re.findall(r"<title>([^<]*)</title>", markers)]
    assert len(titles) == len(unpacked(raw["v"])) == 37
    for title, v, lo, hi in zip(titles, *(unpacked(raw[k]).tolist() for k in ("v", "lo", "hi"))):
        assert title.endswith(f" · {human(v)} [{human(lo)}, {human(hi)}] {raw['unit']}"), title
        assert title.startswith("2025-") and " UTC · commit " in title and " · winml-perf " in title
    assert "<title>" not in untouched  # only the chart hovered has titles
