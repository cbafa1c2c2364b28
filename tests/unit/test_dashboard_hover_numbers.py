"""The dashboard's hover titles: the page carries each marker's labels and its raw value, low and
high, exactly, and its script (publish/assets/human.js, run here in node) writes the title, its
numbers as support/human_numbers.human() does, character for character, ties and edges included."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from winml_perf.publish import dashboard_svg as svg
from winml_perf.publish.dashboard_page import _asset
from winml_perf.support.human_numbers import human


def marker_groups(html: str) -> list[dict[str, str]]:
    """The data attributes (unescaped, without 'data-') of each marker group (g.pts) of a chart or
    page, read as a browser reads them (either quote style)."""
    groups: list[dict[str, str]] = []

    class Groups(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "g" and dict(attrs).get("class") == "pts":
                groups.append({k[5:]: v or "" for k, v in attrs if k.startswith("data-")})

    Groups().feed(html)
    return groups


def _node() -> str:
    path = shutil.which("node") or shutil.which("nodejs")
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail("node is missing in CI (the dashboard's hover formatter is checked with it)")
    pytest.skip("node is not installed")


def js_human(values: list[float]) -> list[str]:
    """human.js's text of each value, in node (values passed as exact reprs)."""
    script = (
        _asset("human.js")
        + "\nvar xs = JSON.parse(require('fs').readFileSync(0, 'utf8')).map(Number);"
        + "\nprocess.stdout.write(JSON.stringify(xs.map(winmlHuman)));"
    )
    texts = [repr(float(v)).replace("inf", "Infinity") for v in values]
    proc = subprocess.run([_node(), "-e", script], input=json.dumps(texts), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _values() -> list[float]:
    rng = random.Random(37)
    out = [rng.choice((-1, 1)) * 10 ** rng.uniform(-14, 17) for _ in range(40_000)]
    out += [round(rng.uniform(0, 300), rng.randint(0, 6)) for _ in range(10_000)]  # stored values: few decimals
    # exact binary ties at the fifth significant digit (Python rounds them to even, toExponential away from 0)
    out += [sign * k / 2**m for k in range(10_001, 99_999, 2) for m in (0, 3) for sign in (1, -1) if k % 10 == 5][
        :20_000
    ]
    out += [12.125, 12.135, 1234.5, 1235.5, 99995.0, 9999.5, 9999.6, 999.95, 0.5, 0.00012345, 33010.4, 30970.2]
    out += [1e-9, 1.23456e-9, 9.9996e-10, 1.23456e-10, 1e-15, -1.5e-13, 9.9995e14, 1e15, 1.2345e20, 5e-324]
    out += [0.0, -0.0, math.nan, math.inf, -math.inf, 1e300]
    return out


def test_the_pages_formatter_writes_every_number_as_human_does():
    values = _values()
    wanted = [human(v) for v in values]
    got = js_human(values)
    wrong = [(v, w, g) for v, w, g in zip(values, wanted, got) if w != g]
    assert not wrong, f"{len(wrong)} of {len(values)} differ, e.g. {wrong[:5]}"


def test_markers_carry_exact_values_and_labels_and_no_titles():
    pts = [
        {"t": f"2026-12-0{i + 1}T02:00:00Z", "v": 33010.4 + i / 3, "lo": 30970.2, "hi": 33950.9, "commit": "abc"}
        for i in range(3)
    ]
    pts.append({"t": "2026-12-05T02:00:00Z", "v": None, "lo": None, "hi": None, "commit": "def"})  # failed
    pts.append({"t": "2026-12-06T02:00:00Z", "v": 0.1 + 0.2, "lo": None, "hi": None, "commit": "ghi"})  # no interval
    out = svg.chart(pts, title="decode", unit="tokens/s")
    (attrs,) = marker_groups(out)
    assert attrs["unit"] == "tokens/s"
    for key in ("v", "lo", "hi"):
        column = np.array([np.nan if p[key] is None else p[key] for p in pts], dtype=float)
        assert np.array_equal(svg.unpacked(attrs[key]), column, equal_nan=True)  # exact: each value round-trips
    assert json.loads(attrs["commit"]) == ["abc"] * 3 + ["def", "ghi"] and attrs["testbed"] == "?"
    assert json.loads(attrs["t"])[3] == "2026-12-05 02:00"
    assert "<title>" not in out.split('class="pts"', 1)[1]  # the page's script writes them on hover
    assert out.count('class="pt failed"') == 1 and out.count('<circle class="pt"') == 4


def js_titles(group_attributes: dict[str, str]) -> list[str]:
    """human.js's winmlTitle of each marker of a group, in node, from its data attributes (unescaped)
    parsed as dashboard.js parses them."""
    script = (
        _asset("human.js")
        + "\nvar a = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        + "\nvar labels = {testbed: a.testbed, t: JSON.parse(a.t), commit: JSON.parse(a.commit),"
        + " version: JSON.parse(a.version), run: JSON.parse(a.run)};"
        + "\nprocess.stdout.write(JSON.stringify(labels.t.map(function (_, i) { return winmlTitle(labels, i); })));"
    )
    proc = subprocess.run(
        [_node(), "-e", script], input=json.dumps(group_attributes), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_the_scripts_titles_name_each_records_time_commit_version_testbed_and_run():
    """What a marker's title says, as the page's script writes it from the group's labels: None and
    empty fields as '?', characters HTML escapes in any field, non-text fields, run ids cut to 12
    characters, the time to its UTC minute."""
    rng = random.Random(7)
    pieces = ["abc1234", "", None, "v1.2", "<b>", "a&b", 'q"t', "it's", "x>y", "run-0123456789abcdef", 0, 17, "é→ü"]
    for testbed in ("tb-01", None, "", "tb<&>", 3):
        n = 40
        pts = [
            {
                "t": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T0{rng.randint(0, 9)}:15:09.123456Z",
                "v": 1.0 + i,
                "lo": None,
                "hi": None,
                "commit": rng.choice(pieces),
                "version": rng.choice(pieces),
                "run": rng.choice(pieces),
                "testbed": testbed,
            }
            for i in range(n)
        ]
        (attrs,) = marker_groups(svg.chart(pts, title="t", unit="ms"))
        expected = [
            f"{p['t'][:16].replace('T', ' ')} UTC · commit {p['commit'] or '?'} · winml-perf {p['version'] or '?'}"
            f" · {testbed or '?'} · run {str(p['run'] or '?')[:12]}"
            for p in pts
        ]
        assert js_titles(attrs) == expected


def test_the_numbers_the_script_appends_are_the_ones_written_before():
    pts = [{"t": "2026-12-01T02:00:00Z", "v": 33010.4, "lo": 30970.2, "hi": 33950.9, "commit": "abc"}]
    (attrs,) = marker_groups(svg.chart(pts * 2, title="prompt", unit="tokens/s"))
    v, lo, hi = (float(svg.unpacked(attrs[k])[0]) for k in ("v", "lo", "hi"))
    assert js_human([v, lo, hi]) == ["33.01k", "30.97k", "33.95k"]  # four significant digits
