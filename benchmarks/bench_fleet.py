"""The results store and dashboard at fleet scale (issue 15). Run on demand, not in CI.

    python benchmarks/bench_fleet.py --cells 10000 100000 1000000 [--pg URL] [--repeat 5] [--json out.json]
    python benchmarks/bench_fleet.py --cells 1000000 --pg URL --keep DIR --fill-only    # fill once, keep
    python benchmarks/bench_fleet.py --cells 1000000 --pg URL --keep DIR --reuse [--dashboard-only]

A night of the fleet is 50 testbeds x 5 bundles x 2 routes x 2 shapes = 1,000 cells; each cell has
10 measured iterations of 32 new tokens (one warmup), built as a schema-valid cell record and turned
into rows by the store's own ``json_record_rows()``, then inserted in bulk (explicit ids, one transaction
per chunk; each chunk of rows is built once and written to every store measured). Decode speed per
series: a base level, a slow drift (+-1.5 %), per-run noise (3 %) and, in one series in ten, a real
shift of 5-20 % at a random night.

Measured per store (SQLite file, and PostgreSQL when --pg is given), medians of --repeat warm runs:
one series' history through ``results.load()`` and by direct SQL; ``winml results list`` for one
series; ``winml compare runs --baseline previous --candidate latest`` without filters; and
``winml dashboard`` without filters cold (no change points kept), warm (all kept, nothing new) and
after one new night (1,000 cells appended, removed again afterwards), and with ``--testbed`` (wall
time, peak RSS of the command and its worker processes together, size of the pages written).
Bytes per cell: the store's size / cells (SQLite file; PostgreSQL pg_total_relation_size of the
three tables). ``--dashboard-only`` measures the dashboard alone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa

from winml_perf.results import load
from winml_perf.results import migrations as mig
from winml_perf.results.rows import json_record_rows
from winml_perf.results.store import open_store

TESTBEDS, BUNDLES, ROUTES, SHAPES = 50, 5, ("config", "ep=cpu"), ((128, 32), (512, 32))
CELLS_PER_NIGHT = TESTBEDS * BUNDLES * len(ROUTES) * len(SHAPES)
ITERATIONS, CHUNK = 10, 2000
START = 1_700_000_000  # the first night, as a Unix time (2023-11-14)


def _series(seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for t in range(TESTBEDS):
        for b in range(BUNDLES):
            for route in ROUTES:
                for p, n in SHAPES:
                    shifted = rng.random() < 0.1
                    out.append(
                        {
                            "testbed": f"tb-{t:02d}",
                            "bundle": f"bundles/model-{b}",
                            "route": route,
                            "p": p,
                            "n": n,
                            "level": rng.uniform(40, 200),
                            "phase": rng.uniform(0, 6.28),
                            "period": rng.uniform(90, 180),
                            "shift_at": rng.random() if shifted else None,
                            "shift": rng.choice((-1, 1)) * rng.uniform(0.05, 0.2),
                        }
                    )
    return out


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


_NP: dict = {}


def rng_np(rng: random.Random):  # noqa: ANN201
    """One numpy generator per Python generator (seeded from it): the bulk of the noise, fast."""
    import numpy as np

    if id(rng) not in _NP:
        _NP[id(rng)] = np.random.default_rng(rng.getrandbits(32))
    return _NP[id(rng)]


#: ``--invocations K`` (K > 1): the cell's ITERATIONS are spread over K invocations (fresh processes),
#: each in a slow mode 35 % slower with probability 0.3 and +-5 % apart otherwise (the one-testbed
#: noise of bench_changepoint), and every sample carries its invocation: the mode-aware path.
INVOCATIONS = 1


def _cell(s: dict, night: int, nights: int, index: int, rng: random.Random) -> dict:
    level = s["level"] * (1 + 0.015 * math.sin(s["phase"] + 6.28 * night / s["period"])) * (1 + rng.gauss(0, 0.03))
    if s["shift_at"] is not None and night >= int(s["shift_at"] * nights):
        level *= 1 + s["shift"]
    when = _iso(START + 86400 * night + index)
    noise = rng_np(rng).normal(1.0, 0.02, (ITERATIONS + 1, s["n"]))
    process = [(0.65 if rng.random() < 0.3 else 1.0) * math.exp(rng.gauss(0, 0.05)) for _ in range(INVOCATIONS)]
    per_invocation = max(1, ITERATIONS // INVOCATIONS)
    iterations = []
    for i in range(ITERATIONS + 1):
        k = min(max(i - 1, 0) // per_invocation, INVOCATIONS - 1)
        step = 1000.0 / (level * process[k] if INVOCATIONS > 1 else level)
        steps = [round(x, 5) for x in (step * noise[i, 1:]).tolist()]
        prompt_ms = round(s["p"] * 0.05 * float(noise[i, 0]), 5)
        e2e = prompt_ms + 0.5 + sum(steps)
        iterations.append(
            {
                "round_index": max(i - 1, 0),
                "latency_ms": e2e,
                "prompt_tokens": s["p"],
                "new_tokens": s["n"],
                "prompt_ms": prompt_ms,
                "ttft_ms": prompt_ms + 0.5,
                "decode_step_ms": steps,
                "e2e_ms": e2e,
            }
        )
        if INVOCATIONS > 1:
            iterations[-1]["invocation"] = k
    measured = iterations[1:]
    dec = sorted((s["n"] - 1) / (sum(x["decode_step_ms"]) / 1000) for x in measured)
    med = statistics.median(dec)
    run_id = f"{night:06d}{s['testbed']}".ljust(32, "0")
    metrics = {
        "decode_tokens_per_s": {
            "n": ITERATIONS,
            "median": med,
            "mean": statistics.fmean(dec),
            "stdev": statistics.stdev(dec),
            "cv_pct": 1.0,
            "min": dec[0],
            "max": dec[-1],
            "p90": dec[-2],
            "p95": dec[-1],
            "p99": dec[-1],
            "ci95_low": dec[1],
            "ci95_high": dec[-2],
        }
    }
    return {
        "schema_version": 1,
        "kind": "cell",
        "run_id": run_id,
        "cell_id": f"{night:06d}{index:06d}".ljust(32, "c"),
        "cell_key": f"{s['route']}|p{s['p']}|n{s['n']}",
        "cell_index": index % 20,
        "status": "ok",
        "runtime": "winml-genai",
        "bundle": s["bundle"],
        "route": {"label": s["route"]},
        "shape": {"prompt_tokens": s["p"], "max_new_tokens": s["n"], "requested_prompt_tokens": s["p"]},
        "prompt": {"mode": "synthetic", "seed": 0},
        "policy": {
            "warmup": {"mode": "count", "count": 1},
            "iterations": {"mode": "fixed", "iterations": ITERATIONS, "target_ci_pct": None},
        },
        "load": {"model_load_ms": 120.0},
        "samples": {"warmup": iterations[:1], "iterations": measured},
        "metrics": metrics,
        "summary": {"primary_metric": "decode_tokens_per_s", "iterations": ITERATIONS, "warmup_iterations": 1},
        "memory": {"peak_rss_bytes": 2e8},
        "warnings": [],
        "failure": None,
        "stop_reason": "iterations",
        "output": {},
        "roofline": None,
        "environment": {
            "hostname": s["testbed"],
            "testbed_id": s["testbed"],
            "timestamp_utc": when,
            "git": {"commit": f"{night:012x}", "dirty": False},
            "versions": {"winml-perf": "0.1.0", "onnxruntime": "1.32.0", "onnxruntime-genai": "0.18.0"},
        },
        "started_utc": when,
        "finished_utc": when,
        "wall_s": 1.0,
        "measure_s": 0.5,
    }


def fill(
    urls: str | list[str], cells: int, seed: int = 1, first_night: int = 0, span_nights: int | None = None
) -> float:
    """Write ``cells`` cells (whole nights, from night ``first_night`` on) into each store of
    ``urls``, building each chunk of rows once for all of them; returns seconds taken. Explicit
    ids continue after the store's largest; the series and their shifts depend on ``seed`` only,
    so nights appended later belong to the same series. ``span_nights``: the nights the injected
    shifts are spread over (default: the nights written)."""
    urls = [urls] if isinstance(urls, str) else list(urls)
    series = _series(seed)
    nights = max(1, cells // CELLS_PER_NIGHT)
    total_nights = span_nights or nights
    rng = random.Random(seed + first_night)
    t0 = time.perf_counter()
    stores = [open_store(u) for u in urls]
    try:
        next_ids = []
        for store in stores:
            with store.engine.connect() as conn:
                next_ids.append(int(conn.execute(sa.select(sa.func.max(mig.records.c.id))).scalar() or 0) + 1)
        chunk: list = []

        def flush() -> None:
            for k, store in enumerate(stores):
                base = next_ids[k]
                with store.engine.begin() as conn:
                    conn.execute(
                        mig.records.insert(), [{**rows.record, "id": base + i} for i, rows in enumerate(chunk)]
                    )
                    conn.execute(
                        mig.metrics.insert(),
                        [{**m, "record_id": base + i} for i, rows in enumerate(chunk) for m in rows.metrics],
                    )
                    conn.execute(
                        mig.samples.insert(),
                        [{**x, "record_id": base + i} for i, rows in enumerate(chunk) for x in rows.samples],
                    )
                next_ids[k] = base + len(chunk)
            chunk.clear()

        for night in range(first_night, first_night + nights):
            for index, s in enumerate(series):
                chunk.append(json_record_rows(_cell(s, night, total_nights, index, rng)))
                if len(chunk) >= CHUNK:
                    flush()
        if chunk:
            flush()
        for store in stores:
            if store.location.dialect == "postgresql":
                with store.engine.begin() as conn:
                    conn.execute(
                        sa.text("SELECT setval(pg_get_serial_sequence('records', 'id'), (SELECT max(id) FROM records))")
                    )
            store.analyze()
    finally:
        for store in stores:
            store.close()
    return time.perf_counter() - t0


def _median_ms(fn, repeat: int) -> float:  # noqa: ANN001
    fn()  # warm
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _tree_rss_bytes(root: int) -> int:
    """Resident memory of ``root`` and every process below it now (Linux /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    total = 0
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def _cli(args: list[str], env: dict, cpu: list | None = None) -> tuple[float, int, str]:
    """(seconds, peak RSS bytes of the child and its workers together, sampled every 0.2 s, tail of
    stderr) of one `winml` command; appends to ``cpu`` the CPU seconds of the child and the workers
    it waited for (a figure the machine's other load disturbs less than the wall time)."""
    import threading

    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", "from winml_perf.cli import main; main()", *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                peak[0] = max(peak[0], _tree_rss_bytes(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if cpu is not None:
            cpu.append(usage.ru_utime + usage.ru_stime)
        err.seek(0)
        tail = err.read().strip().splitlines()[-1:] if proc.returncode else []
    return wall, max(peak[0], usage.ru_maxrss * 1024), f"exit {proc.returncode}: {tail}" if proc.returncode else ""


def _size_bytes(url: str) -> int:
    if "://" not in url or url.startswith("sqlite"):
        path = Path(url.replace("sqlite:///", ""))
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    with open_store(url) as store, store.engine.connect() as conn:
        return int(
            conn.execute(
                sa.text(
                    "SELECT pg_total_relation_size('records') + pg_total_relation_size('metrics')"
                    " + pg_total_relation_size('samples')"
                )
            ).scalar_one()
        )


def _one_series() -> dict:
    return {"bundle": "model-2", "route": "config", "testbed": "tb-17", "prompt_tokens": 128, "max_new_tokens": 32}


def _child_env(url: str) -> dict:
    import winml_perf

    src = str(Path(winml_perf.__file__).resolve().parents[1])  # the children run the code this process imported
    return {**os.environ, "WINML_PERF_STORE": url, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def measure(url: str, cells: int, repeat: int, out_dir: Path, dashboard: bool) -> dict:
    env = _child_env(url)
    f = _one_series()
    fig: dict = {"cells": cells, "bytes_per_cell": round(_size_bytes(url) / cells)}
    with open_store(url, create=False) as store:
        fig["history_load_ms"] = _median_ms(lambda: load(store, **f), repeat)
        r = mig.records.c
        stmt = (
            sa.select(r.created_utc, mig.metrics.c.median)
            .join(mig.metrics, mig.metrics.c.record_id == r.id)
            .where(
                r.bundle == "model-2",
                r.route == "config",
                r.testbed_id == "tb-17",
                r.prompt_tokens == 128,
                r.max_new_tokens == 32,
                mig.metrics.c.name == "decode_tokens_per_s",
            )
            .order_by(r.created_utc)
        )
        with store.engine.connect() as conn:
            fig["history_sql_ms"] = _median_ms(lambda: conn.execute(stmt).all(), repeat)
            fig["history_points"] = len(conn.execute(stmt).all())
    series_args = ["--bundle", "model-2", "--route", "config", "--testbed", "tb-17"]
    fig["results_list_s"] = statistics.median(
        _cli(["results", "list", *series_args], env)[0] for _ in range(min(repeat, 3))
    )
    wall, _, err = _cli(
        ["compare", "runs", "--baseline", "previous", "--candidate", "latest", "--fail-on-regression", "5%"], env
    )
    fig["compare_unfiltered_s"], fig["compare_unfiltered_note"] = wall, err
    if dashboard:
        fig.update(measure_dashboard(url, cells, out_dir, env))
    return fig


def _pages(site: Path) -> dict:
    pages = sorted(site.rglob("*.html")) if site.exists() else []
    return {
        "pages": len(pages),
        "total_mb": round(sum(p.stat().st_size for p in pages) / 1e6, 1),
        "largest_mb": round(max((p.stat().st_size for p in pages), default=0) / 1e6, 2),
    }


def _forget_change_points(url: str) -> None:
    with open_store(url, create=False) as store, store.engine.begin() as conn:
        conn.execute(mig.change_point_cache.delete())


def _drop_records_after(url: str, last_id: int) -> None:
    """Delete the records after ``last_id`` (an appended night) with their rows."""
    with open_store(url, create=False) as store, store.engine.begin() as conn:
        for table in (mig.samples, mig.metrics):
            conn.execute(table.delete().where(table.c.record_id > last_id))
        conn.execute(mig.records.delete().where(mig.records.c.id > last_id))


def measure_dashboard(url: str, cells: int, out_dir: Path, env: dict) -> dict:
    """``winml dashboard`` without filters: cold (no change points kept), warm (all kept, nothing new),
    after one new night (CELLS_PER_NIGHT cells appended, then removed again), and ``--testbed``."""
    kind = "sqlite" if "://" not in url or url.startswith("sqlite") else "pg"
    nights = max(1, cells // CELLS_PER_NIGHT)
    fig: dict = {}

    def run(name: str, extra: Sequence[str] = ()) -> None:
        site = out_dir / f"site-{name}-{cells}-{kind}"
        shutil.rmtree(site, ignore_errors=True)
        cpu: list = []
        wall, rss, err = _cli(["dashboard", "-o", str(site), *extra], env, cpu)
        fig[name] = {
            "s": round(wall, 2),
            "cpu_s": round(cpu[0], 1),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "peak_rss_mib": round(rss / 2**20),
            "error": err,
            **_pages(site),
        }
        print(f"  {kind} {cells}: {name} {fig[name]}", file=sys.stderr, flush=True)

    _forget_change_points(url)
    run("dashboard_cold")
    run("dashboard_warm")
    with open_store(url, create=False) as store, store.engine.connect() as conn:
        last_id = int(conn.execute(sa.select(sa.func.max(mig.records.c.id))).scalar_one())
    fig["new_night_fill_s"] = round(fill(url, CELLS_PER_NIGHT, first_night=nights, span_nights=nights), 1)
    try:
        run("dashboard_new_night")
    finally:
        _drop_records_after(url, last_id)
    run("dashboard_testbed", ["--testbed", "tb-17"])
    return fig


def _pg_url(base: str, name: str) -> str:
    from urllib.parse import quote

    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={name}')}"


def _pg_fresh(base: str, name: str) -> str:
    """A fresh schema on the server at ``base``; the store URL that uses it."""
    admin = sa.create_engine(sa.make_url(base).set(drivername="postgresql+psycopg"))
    with admin.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    admin.dispose()
    return _pg_url(base, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--pg", help="a PostgreSQL server URL (scripts/ci-postgres.sh start prints one)")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-dashboard", action="store_true")
    ap.add_argument(
        "--dashboard-only",
        action="store_true",
        help="measure only the dashboard (cold, warm, one new night, --testbed)",
    )
    ap.add_argument("--keep", type=Path, help="folder for the stores and pages (default: a temporary one)")
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--reuse", action="store_true", help="measure the stores --keep holds from an earlier run (no fill)"
    )
    ap.add_argument("--fill-only", action="store_true", help="fill the stores and stop (measure later with --reuse)")
    ap.add_argument(
        "--invocations", type=int, default=1, help="invocations per cell (>1: samples carry them, with process modes)"
    )
    ap.add_argument("--name", default="fleet", help="store name prefix (fleet-CELLS.db, schema fleet_CELLS)")
    a = ap.parse_args()
    global INVOCATIONS
    INVOCATIONS = a.invocations
    out_dir = a.keep or Path(tempfile.mkdtemp(prefix="winml-fleet-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for cells in a.cells:
        targets = [] if a.no_sqlite else [("sqlite", str(out_dir / f"{a.name}-{cells}.db"))]
        if a.pg:
            schema = f"{a.name}_{cells}"
            targets.append(("postgresql", _pg_url(a.pg, schema) if a.reuse else _pg_fresh(a.pg, schema)))
        fill_s = float("nan")
        if not a.reuse:
            for kind, url in targets:
                if kind == "sqlite" and Path(url).exists():
                    for p in Path(url).parent.glob(Path(url).name + "*"):
                        p.unlink()
            fill_s = fill([url for _, url in targets], cells)  # one pass of row building for every store
            print(
                json.dumps({"cells": cells, "fill_s": round(fill_s, 1), "stores": [k for k, _ in targets]}), flush=True
            )
        if a.fill_only:
            continue
        for kind, url in targets:
            if a.dashboard_only:
                figs = {"cells": cells, **measure_dashboard(url, cells, out_dir, _child_env(url))}
            else:
                figs = measure(url, cells, a.repeat, out_dir, not a.no_dashboard)
            fig = {"store": kind, "fill_s_all_stores": round(fill_s, 1), **figs}
            print(json.dumps(fig), flush=True)
            results.append(fig)
    if a.json:
        a.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
