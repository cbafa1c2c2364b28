"""The dashboard's SVG: nice ticks that never go below zero, an x axis in run order labelled by commit, one marker per record with
its hover text, the interval band, change points, and labels inside the drawing."""

from __future__ import annotations

import json
import re

import pytest

from tests.unit.test_dashboard_hover_numbers import js_human, marker_groups
from winml_perf.publish import dashboard_svg as svg


@pytest.mark.parametrize("low, high", [(0.3, 9.7), (412.0, 431.0), (0.001, 0.004), (95_000.0, 260_000.0), (5.0, 5.0)])
def test_nice_ticks_cover_the_range_in_round_steps_and_never_go_below_zero(low, high):
    ticks = svg.nice_ticks(low, high)
    assert ticks[0] <= low and ticks[-1] >= high and ticks[0] >= 0
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
    assert len(steps) == 1
    mantissa = float(f"{steps.pop():e}".split("e")[0])
    assert mantissa in (1.0, 2.0, 2.5, 5.0)
    assert 2 <= len(ticks) <= 12


def test_a_throughput_near_zero_is_not_drawn_below_zero():
    assert svg.nice_ticks(-3.0, 12.0)[0] == 0.0
    assert svg.nice_ticks(0.5, 40.0)[0] == 0.0


def test_x_axis_is_run_order_labelled_with_each_records_commit_and_own_date():
    # uneven times: a run at 19:14 on Dec 1, then two nights later, then a week later
    times = ["2026-12-01T19:14:00Z", "2026-12-03T02:00:00Z", "2026-12-10T02:00:00Z"]
    pts = [{"t": t, "v": 10.0 + i, "lo": None, "hi": None, "commit": f"abc{i}def0123"} for i, t in enumerate(times)]
    out = svg.chart(pts, title="decode", unit="tokens/s")
    commits = re.findall(r'<text class="xlab"[^>]*x="([\d.]+)"[^>]*>([^<]+)</text>', out)
    dates = re.findall(r'<text class="xdate"[^>]*>([^<]+)</text>', out)
    assert [c for _, c in commits] == ["abc0def", "abc1def", "abc2def"] and dates == ["12-01", "12-03", "12-10"]
    xs = [float(x) for x, _ in commits]
    assert abs((xs[1] - xs[0]) - (xs[2] - xs[1])) < 0.2  # evenly spaced: run order, not time
    assert "12-02" not in out and "2026-12-02" not in out


def test_one_record_draws_its_value_and_interval_in_every_chart():
    (pt,) = _points(1)
    for markers in (True, False):
        out = svg.chart([pt], title="ttft", unit="ms", markers=markers)
        assert out.count('class="whisker"') == 1
        assert out.count('<circle class="dot"') == (0 if markers else 1)
        assert out.count('<circle class="pt"') == (1 if markers else 0)


def test_numbers_are_written_as_people_read_them():
    pts = [{**p, "v": 33010.4 + i, "lo": 30970.2, "hi": 33950.9} for i, p in enumerate(_points(3))]
    out = svg.chart(pts, title="prompt", unit="tokens/s")
    (raw,) = marker_groups(out)
    # the hover's numbers, as its script writes them
    first = [float(svg.unpacked(raw[k])[0]) for k in ("v", "lo", "hi")]
    assert (
        "e+0" not in out and "{} [{}, {}]".format(*js_human(first)) == "33.01k [30.97k, 33.95k]"
    )  # 4 significant digits
    assert svg.tick_label(1234.5678) == "1235" and svg.tick_label(0.012345) == "0.01235"


def _points(n: int, failed: int | None = None) -> list[dict]:
    out = []
    for i in range(n):
        v = None if i == failed else 100.0 + i
        out.append(
            {
                "t": f"2025-01-{1 + i:02d}T02:00:00.000000Z",
                "v": v,
                "lo": v and v - 1,
                "hi": v and v + 1,
                "commit": f"c{i:07d}",
                "version": "0.2.0",
                "testbed": "tb-<1>",
                "run": f"run{i}",
            }
        )
    return out


def test_chart_draws_a_marker_per_record_with_its_commit_and_a_band():
    pts = _points(10, failed=4)
    cps = [{"index": 6, "shift": -0.12, "shift_low": -0.15, "shift_high": -0.09, "direction": "regression"}]
    out = svg.chart(pts, title="decode", unit="tokens/s", change_points=cps)
    assert out.count('<circle class="pt"') == 9 and out.count('class="pt failed"') == 1
    (labels,) = marker_groups(out)
    assert json.loads(labels["commit"])[3] == "c0000003" and labels["testbed"] == "tb-<1>"
    assert json.loads(labels["version"]) == ["0.2.0"] * 10 and json.loads(labels["run"])[9] == "run9"
    assert out.count('<polygon class="band"') == 1
    assert '<g class="cp regression">' in out and "-12.0%" in out and "[-15.0%, -9.0%]" in out
    assert svg.chart(pts, title="t", unit="ms", markers=False).count("<circle") == 0
    labelled = [{**cps[0], "shift_coverage": 0.9}]
    assert "[-15.0%, -9.0%] (a 90% interval: too few runs either side for 95%)" in svg.chart(
        pts, title="decode", unit="tokens/s", change_points=labelled
    )


def test_labels_stay_inside_the_drawing():
    for values in ([0.5, 1.5], [120_000.0, 980_000.0], [3.14159, 3.14161]):
        pts = [{"t": f"2025-0{1 + i}-01T00:00:00Z", "v": v, "lo": None, "hi": None} for i, v in enumerate(values)]
        out = svg.chart(pts, title="x", unit="u")
        width = float(re.search(r'viewBox="0 0 (\d+)', out).group(1))
        for x, text in re.findall(r'<text class="ylab" x="([\d.]+)"[^>]*>([^<]+)</text>', out):
            assert float(x) - len(text) * svg.CHAR_PX >= 0, (text, x)  # right-aligned at x: its start is inside
        for anchor, x, text in re.findall(
            r'<text class="xlab" text-anchor="(\w+)" x="([\d.]+)"[^>]*>([^<]+)</text>', out
        ):
            half = len(text) * svg.CHAR_PX / 2
            lo = float(x) - (0 if anchor == "start" else 2 * half if anchor == "end" else half)
            assert lo >= 0 and lo + 2 * half <= width, (text, anchor, x)


def test_labels_of_close_change_points_do_not_overprint():
    # Seen on the H200's 5-minute sustained chart: "-5.4%" and "+12.3%" 20 s apart printed over
    # each other. Close labels take another row; far ones share the first.
    pts = _points(28)
    cps = [
        {"index": i, "shift": s, "shift_low": s - 0.01, "shift_high": s + 0.01, "direction": d}
        for i, s, d in ((5, -0.054, "regression"), (6, 0.123, "improvement"), (25, 0.097, "improvement"))
    ]
    out = svg.chart(pts, title="tokens/s", unit="tokens/s", change_points=cps)
    ys = {
        text: float(y) for y, text in re.findall(r'<g class="cp [^"]+">.*?<text [^>]*y="([\d.]+)">([^<]+)</text>', out)
    }
    assert set(ys) == {"-5.4%", "+12.3%", "+9.7%"}
    assert ys["-5.4%"] != ys["+12.3%"]  # close: two rows
    assert ys["+9.7%"] == ys["-5.4%"]  # far: back to the first row
