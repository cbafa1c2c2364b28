"""The dashboard's overview (index.html): per testbed x bundle x route x shape the latest value
with its interval in human numbers, a trend, the ratio to config and a status; nothing local."""

from __future__ import annotations

import re

import pytest

from tests.results_fakes import golden_cells, hex_id, make_cell
from winml_perf.publish.dashboard import write_dashboard
from winml_perf.results.store import open_store


@pytest.fixture(scope="module")
def index_html(tmp_path_factory):
    root = tmp_path_factory.mktemp("overview")
    with open_store(root / "private-folder" / "winml-perf.db") as store:
        store.write_json_records(golden_cells())
        store.write_json_record(make_cell(hex_id("solo"), bundle="bundles/solo", when="2025-01-05T02:00:00Z"))
        fast = [0.0303, 0.0299, 0.0310, 0.0297, 0.0305, 0.0301]  # ~33000 tokens/s: e-notation under %.4g
        store.write_json_record(
            make_cell(hex_id("fast"), bundle="bundles/fast", when="2025-01-05T02:00:00Z", step_ms=fast)
        )
        index = write_dashboard(store, root / "site")
    return root, index.read_text()


def _rows(html: str) -> list[str]:
    return re.findall(r"<tr data-testbed=.*?</tr>", html)


def test_no_local_path_in_the_page(index_html):
    root, html = index_html
    assert str(root) not in html and "private-folder" not in html and "winml-perf.db" not in html


def test_values_are_human_numbers_never_exponents(index_html):
    _, html = index_html
    values = re.findall(r'<td class="num">([^<]*) <span', html)
    assert values and all("e+" not in v and "e-" not in v for v in values)
    assert all(re.fullmatch(r"[\d.]+k?( \[[\d.]+k?, [\d.]+k?\])?", v) for v in values), values
    # 33.01k, not 3.301e+04
    assert any(re.fullmatch(r"3\d\.\d\dk \[3\d\.\d\dk, 3\d\.\d\dk\]", v) for v in values), values


def test_each_route_has_a_ratio_to_config_and_a_status(index_html):
    _, html = index_html
    head = re.search(r"<thead>.*?</thead>", html).group(0)
    assert "vs config" in head and "status" in head and "trend" in head
    rows = _rows(html)
    config = [r for r in rows if 'data-route="config"' in r]
    forced = [r for r in rows if 'data-route="config"' not in r]
    assert all("–" in r for r in config)
    ratio = r'<td class="num (level|improvement|regression)" title="run ([0-9a-f]+): [^"]*" data-run="\2" data-ratio="[^"]*">×([\d.]+) '
    ratios = [re.search(ratio, r) for r in forced]
    assert any(ratios), forced
    (cpu,) = [m for r, m in zip(forced, ratios) if 'data-route="ep=cpu"' in r]
    assert cpu.group(2) == "a" + "0" * 30 + "1" and cpu.group(1) == "level"  # from run a, the one with both routes
    (webgpu,) = [r for r in forced if 'data-route="ep=webgpu"' in r]  # newest run b failed it: run a's ratio
    assert re.search(ratio, webgpu) and 'data-run="a000' in webgpu
    statuses = [re.search(r'<td class="status ([a-z -]+)">', r).group(1) for r in rows]
    assert set(statuses) <= {"ok", "failed", "regression", "improvement", "lower-mode", "lower mode"}
    assert "failed" in statuses  # the golden store's failed webgpu cell is its route's newest record


def test_a_filter_that_selects_nothing_is_refused_and_writes_nothing(tmp_path):
    """`winml dashboard --testbed TYPO` wrote an index saying "the store holds no records" (exit 0)
    over a store that held some; it is refused now, naming the filter, and writes no page."""
    from winml_perf.support.errors import EXIT_USAGE, StoreError

    with open_store(tmp_path / "s.db") as store:
        store.write_json_records(golden_cells())
        with pytest.raises(StoreError, match=r"no record in .* matches --testbed 'tb-linx'") as err:
            write_dashboard(store, tmp_path / "site", testbed="tb-linx", bundle=None)
        assert err.value.exit_code == EXIT_USAGE
        assert not (tmp_path / "site").exists()
        assert write_dashboard(store, tmp_path / "site", testbed="tb-linux").exists()  # a filter that matches
    with open_store(tmp_path / "empty.db") as empty:  # an empty store still gets its empty page
        assert "the store holds no records" in write_dashboard(empty, tmp_path / "empty", testbed="x").read_text()
