"""The store at fleet scale, on SQLite and PostgreSQL: samples stored once (with the migration of
older stores), series identity, one series' history, 'latest'/'previous' per series, pruning, and
the bounded-chunk reads."""

from __future__ import annotations

import copy
import json
import statistics

import pytest
import sqlalchemy as sa

from tests.results_fakes import hex_id, make_cell
from winml_perf.model.sample import IterationSample
from winml_perf.results import load
from winml_perf.results import migrations as mig
from winml_perf.results import rows as R
from winml_perf.results import store as store_mod
from winml_perf.results.rows import json_record_rows as record_rows
from winml_perf.results.rows import without_restorable_samples
from winml_perf.results.selectors import select
from winml_perf.results.series import history
from winml_perf.results.store import open_store
from winml_perf.stats.cell_intervals import by_invocation


def series_key(doc: dict) -> str:
    """The series key the store gives a record file's JSON (results/rows.py reads it typed)."""
    return R.series_key(R.typed_record(doc))


def series_identity(doc: dict) -> dict:
    return R.series_identity(R.typed_record(doc))


def _json_of(store, rid: int) -> dict:
    with store.engine.connect() as conn:
        return json.loads(
            conn.execute(sa.select(mig.records.c.record_json).where(mig.records.c.id == rid)).scalar_one()
        )


def test_raw_samples_are_stored_once_and_given_back_whole(store_url):
    cell = make_cell(hex_id("once"), step_ms=[2.0, 2.5, 1.5], rounds=[0, 0, 1])
    with open_store(store_url) as store:
        rid = store.write_json_record(cell)
        assert "samples" not in _json_of(store, rid)  # only the samples table holds them
        assert store.get(rid)["record"] == cell
        assert store.get(cell["cell_id"][:10])["record"] == cell


def _with_invocations(cell: dict) -> dict:
    for i, sample in enumerate(cell["samples"]["iterations"]):
        sample["invocation"] = i % 2
    for sample in cell["samples"]["warmup"]:
        sample["invocation"] = 0
    return cell


def test_samples_of_several_invocations_are_stored_once_with_their_invocation(store_url):
    cell = _with_invocations(make_cell(hex_id("inv"), step_ms=[2.0, 2.5, 1.5, 2.2]))
    with open_store(store_url) as store:
        rid = store.write_json_record(cell)
        assert "samples" not in _json_of(store, rid)
        assert [s["invocation"] for s in store.samples([rid])] == [0, 1, 0, 1]
        assert store.get(rid)["record"] == cell


def test_a_sample_the_table_cannot_give_back_stays_in_the_json(store_url):
    cell = make_cell(hex_id("odd"))
    cell["samples"]["iterations"][0]["token_ids"] = [1, 2, 3]  # kept by --keep-token-ids; no column
    with open_store(store_url) as store:
        rid = store.write_json_record(cell)
        assert _json_of(store, rid)["samples"] == cell["samples"]
        assert store.get(rid)["record"] == cell


@pytest.mark.parametrize(
    "change",
    [
        lambda s: None,
        lambda s: s.update(token_ids=[1, 2]),
        lambda s: s.update(decode_step_ms=[2, 3]),  # ints: given back as 2.0, 3.0, which compare equal
        lambda s: s.update(decode_step_ms=[0.1 + 0.2, 1e-300, 123456.789012345]),
        lambda s: s.update(round_index=1.0),
        lambda s: s.pop("invocation", None),
        lambda s: s.update(surprise=1),
    ],
)
def test_the_write_path_drops_samples_from_the_json_exactly_when_their_rows_give_them_back(change):
    cell = _with_invocations(make_cell(hex_id("rt")))
    change(cell["samples"]["iterations"][1])
    rows = record_rows(cell)
    kept_by_round_trip = "samples" in without_restorable_samples(cell, copy.deepcopy(rows.samples))  # through JSON text
    assert ("samples" in json.loads(rows.record["record_json"])) == kept_by_round_trip


def _store_at_schema_2(url: str, cells: list[dict]) -> None:
    """A store as version 0002 wrote it: no series_key, the samples in the record JSON too."""
    loc = store_mod.resolve_location(url)
    if loc.path:
        loc.path.parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(loc.url)
    with engine.begin() as conn:
        mig.schema_migrations.create(conn)
        for m in mig.MIGRATIONS[:2]:
            m.apply(conn)
            conn.execute(mig.schema_migrations.insert().values(name=m.name, applied_utc="2025-01-01T00:00:00Z"))
        _, records_v1, metrics_v1, _ = mig._v1_tables(sa.MetaData())
        for i, cell in enumerate(cells, 1):
            rows = record_rows(cell)
            old = {k: v for k, v in rows.record.items() if k in records_v1.c}  # no later column
            old["record_json"] = json.dumps(cell, sort_keys=True, separators=(",", ":"))
            conn.execute(records_v1.insert().values(id=i, **old))
            conn.execute(
                metrics_v1.insert(),
                [{**{k: v for k, v in m.items() if k != "invocations"}, "record_id": i} for m in rows.metrics],
            )
            _, _, _, samples_v1 = mig._v1_tables(sa.MetaData())
            conn.execute(
                samples_v1.insert(),
                [{**{k: v for k, v in s.items() if k != "invocation"}, "record_id": i} for s in rows.samples],
            )
    engine.dispose()


def test_migration_0003_fills_series_keys_and_drops_the_second_copy_of_samples(store_url, monkeypatch):
    monkeypatch.setattr(mig, "MIGRATION_CHUNK", 2)  # several chunks
    cells = [
        make_cell(hex_id("m", i), index=i, prompt_tokens=16 * (1 + i % 2), when=f"2025-01-0{1 + i}T00:00:00Z")
        for i in range(5)
    ]
    _with_invocations(cells[3])  # written by a version with invocations but no samples.invocation column
    _store_at_schema_2(store_url, cells)
    with open_store(store_url) as store:
        assert "0003_series_key_samples_once" in store.applied_migrations()
        rows = store.records()
        assert [r["series_key"] for r in rows] == [series_key(c) for c in cells]
        for r, cell in zip(rows, cells):
            assert "samples" not in _json_of(store, r["id"])
            assert store.get(r["id"])["record"] == cell
        assert [s["invocation"] for s in store.samples([rows[3]["id"]])] == [0, 1, 0, 1, 0, 1]
        assert {s["invocation"] for s in store.samples([rows[0]["id"]])} == {None}
        with store.engine.connect() as conn:
            assert "ix_records_series_key" in {ix["name"] for ix in sa.inspect(conn).get_indexes("records")}


def _stored_invocations(store) -> dict[tuple[int, str], list[float] | None]:
    m = mig.metrics.c
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(m.record_id, m.name, m.invocations)).all()
    return {(rid, name): None if text is None else json.loads(text) for rid, name, text in rows}


def test_migration_0006_back_fills_each_records_per_invocation_medians(store_url, monkeypatch):
    monkeypatch.setattr(mig, "MIGRATION_CHUNK", 2)  # several chunks
    cells = [
        make_cell(
            hex_id("m6", i),
            index=i,
            when=f"2025-01-0{1 + i}T00:00:00Z",
            step_ms=[2.0 + 0.1 * i, 3.0, 2.2, 3.3, 2.1, 2.9],
        )
        for i in range(5)
    ]
    for cell in cells[1:4]:
        _with_invocations(cell)  # cells[0] and cells[4]: records without invocations
    _store_at_schema_2(store_url, cells)
    with open_store(store_url) as store:
        assert "0006_metric_invocations" in store.applied_migrations()
        stored = _stored_invocations(store)
        ids = [r["id"] for r in store.records()]
    samples = {i: [IterationSample.from_dict(s) for s in cell["samples"]["iterations"]] for i, cell in zip(ids, cells)}
    for rid, cell in zip(ids, cells):
        with_invocations = "invocation" in cell["samples"]["iterations"][0]
        for metric in ("decode_tokens_per_s", "tpot_ms", "ttft_ms"):
            expected = [statistics.median(v) for v in by_invocation(samples[rid], metric)] if with_invocations else None
            assert stored[(rid, metric)] == pytest.approx(expected) if expected else stored[(rid, metric)] is None
            written = {m["name"]: m["invocations"] for m in record_rows(cell).metrics}[metric]  # the write path agrees
            assert (json.loads(written) if written else None) == stored[(rid, metric)]
        assert stored[(rid, "peak_rss_bytes")] is None  # a per-cell scalar has no invocations
    assert len(stored[(ids[1], "decode_tokens_per_s")]) == 2


def test_series_identity_separates_what_changes_the_measurement():
    base = make_cell(hex_id("id"))
    plain = copy.deepcopy(base)
    plain["runtime"] = "winml"
    plain["policy"]["session"] = {
        "runtime": "winml",
        "path": "m.onnx",
        "options": {"shapes": {"x": [1, 3]}, "io_binding": False, "seed": 0},
    }
    batch8 = copy.deepcopy(plain)
    batch8["policy"]["session"]["options"]["shapes"] = {"x": [8, 3]}
    bound = copy.deepcopy(plain)
    bound["policy"]["session"]["options"]["io_binding"] = True
    threads = copy.deepcopy(plain)
    threads["policy"]["session"]["options"]["intra_op_threads"] = 4
    reseeded = copy.deepcopy(plain)
    reseeded["policy"]["session"]["options"]["seed"] = 7  # the input seed does not change what is measured
    keys = [series_key(c) for c in (plain, batch8, bound, threads)]
    assert len(set(keys)) == 4 and series_key(reseeded) == series_key(plain)
    assert series_identity(batch8)["session"]["shapes"] == {"x": [8, 3]}

    qnn = copy.deepcopy(base)
    qnn["route"]["stages"] = [
        {"stage": "decoder", "ep_after": "qnn", "provider_options_after": [{"qnn": {"htp_performance_mode": "burst"}}]}
    ]
    qnn_saver = copy.deepcopy(qnn)
    qnn_saver["route"]["stages"][0]["provider_options_after"] = [{"qnn": {"htp_performance_mode": "power_saver"}}]
    assert len({series_key(base), series_key(qnn), series_key(qnn_saver)}) == 3
    other_run = make_cell(hex_id("id-2"), when="2025-02-01T00:00:00Z", commit="2222222")
    assert series_key(other_run) == series_key(base)  # the same series on another night
    assert series_key(make_cell(hex_id("id"), testbed="tb-other")) != series_key(base)


def _fleet(store, nights: int = 3) -> None:
    for night in range(nights):
        for tb in ("tb-a", "tb-b"):
            run = hex_id("fleet", night, tb)
            for i, route in enumerate(("config", "ep=cpu")):
                store.write_json_record(
                    make_cell(
                        run,
                        route=route,
                        testbed=tb,
                        index=i,
                        when=f"2025-03-0{1 + night}T0{2 if tb == 'tb-a' else 4}:00:00Z",
                        step_ms=[2.0 + 0.01 * night] * 6,
                    )
                )


def test_latest_and_previous_are_resolved_per_series(store_url):
    with open_store(store_url) as store:
        _fleet(store)
        latest, previous = select(store, "latest", "--candidate"), select(store, "previous", "--baseline")
        # the two newest runs fleet-wide are tb-b's night 3 and tb-a's night 3: per series, each
        # testbed's own last two nights
        assert {(r["testbed_id"], r["route"], r["run_id"]) for r in latest.records} == {
            (tb, route, hex_id("fleet", 2, tb)) for tb in ("tb-a", "tb-b") for route in ("config", "ep=cpu")
        }
        assert {r["run_id"] for r in previous.records} == {hex_id("fleet", 1, "tb-a"), hex_id("fleet", 1, "tb-b")}
        assert "each of 4 series" in latest.meaning
        narrowed = select(store, "latest", "--candidate", testbed="tb-a", route="config")
        assert narrowed.meaning == f"latest run {hex_id('fleet', 2, 'tb-a')}" and len(narrowed.records) == 1


def test_history_reads_one_series_in_time_order(store_url):
    with open_store(store_url) as store:
        _fleet(store)
        key = store.records(testbed="tb-b", route="ep=cpu")[0]["series_key"]
        hist = history(store, key, "decode_tokens_per_s")
        assert [h["run_id"] for h in hist] == [hex_id("fleet", n, "tb-b") for n in range(3)]
        assert hist[0]["median"] == pytest.approx(500.0) and hist[0]["ci95_low"] is not None
        assert history(store, key, "decode_tokens_per_s", newest=2) == hist[1:]
        assert history(store, key, "decode_tokens_per_s", until=hist[1]["created_utc"], newest=1) == hist[1:2]


def test_bundle_filter_by_name_or_by_path(store_url):
    with open_store(store_url) as store:
        store.write_json_record(make_cell(hex_id("b1"), bundle="bundles/tiny-qwen2"))
        store.write_json_record(make_cell(hex_id("b2"), bundle="/elsewhere/tiny-qwen2", index=1))
        store.write_json_record(make_cell(hex_id("b3"), bundle="bundles/other", index=2))
        assert store.count(bundle="tiny-qwen2") == 2
        assert store.count(bundle="bundles/tiny-qwen2") == 1
        assert store.count(bundle=["other", "/elsewhere/tiny-qwen2"]) == 2


def test_reads_by_id_go_in_bounded_chunks(store_url, monkeypatch):
    monkeypatch.setattr(store_mod, "ID_CHUNK", 3)
    with open_store(store_url) as store:
        ids = [
            store.write_json_record(make_cell(hex_id("c"), index=i, when=f"2025-01-01T00:00:{i:02d}Z"))
            for i in range(8)
        ]
        assert {m["record_id"] for m in store.metrics(ids)} == set(ids)
        assert len(store.samples(ids)) == 8 * 6
        assert [m["name"] for m in store.metrics(ids[:1], names=["ttft_ms"])] == ["ttft_ms"]
        df = load(store, metrics=["decode_tokens_per_s"], limit=5)
        assert list(df["id"]) == ids[3:] and "ttft_ms" not in df.columns and df["decode_tokens_per_s"].notna().all()


def test_prune_deletes_old_records_with_their_rows(store_url, monkeypatch):
    monkeypatch.setattr(store_mod, "PRUNE_CHUNK", 2)
    with open_store(store_url) as store:
        for i in range(5):
            store.write_json_record(make_cell(hex_id("p"), index=i, when=f"2025-01-0{1 + i}T00:00:00Z"))
        assert store.prune("2025-01-04T00:00:00.000000Z") == 3
        kept = store.records()
        assert [r["created_utc"][:10] for r in kept] == ["2025-01-04", "2025-01-05"]
        with store.engine.connect() as conn:
            assert set(conn.execute(sa.select(mig.samples.c.record_id).distinct()).scalars()) == {r["id"] for r in kept}
            assert set(conn.execute(sa.select(mig.metrics.c.record_id).distinct()).scalars()) == {r["id"] for r in kept}
        assert store.prune("2025-01-01T00:00:00.000000Z") == 0


def _planner_rows(store, table: str) -> float | None:
    """The row count the planner has for ``table`` (None before its first ANALYZE)."""
    with store.engine.connect() as conn:
        if store.location.dialect == "sqlite":
            row = conn.execute(sa.text("SELECT stat FROM sqlite_stat1 WHERE tbl = :t"), {"t": table}).first()
            return None if row is None else float(row[0].split()[0])
        reltuples = conn.execute(
            sa.text("SELECT reltuples FROM pg_class WHERE oid = to_regclass(:t)"), {"t": table}
        ).scalar_one()
        return None if reltuples < 0 else reltuples


def test_analyze_gives_the_planner_the_stores_tables(store_url):
    with open_store(store_url) as store:
        for i in range(3):
            store.write_json_record(make_cell(hex_id(f"an{i}")))
        store.analyze()
        assert _planner_rows(store, "records") == 3
        assert _planner_rows(store, "metrics") > 3


@pytest.mark.postgres
def test_analyze_leaves_the_other_tables_of_a_shared_database_alone(pg_url):
    other = "o_" + hex_id("other")[:12]
    with open_store(pg_url) as store:
        with store.engine.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{other}"'))
            conn.execute(sa.text(f'CREATE TABLE "{other}".orders AS SELECT generate_series(1, 5) AS id'))
        try:
            store.write_json_record(make_cell(hex_id("shared")))
            store.analyze()
            assert _planner_rows(store, "records") == 1
            assert _planner_rows(store, f'"{other}".orders') is None  # a bare ANALYZE would have counted its 5 rows
        finally:
            with store.engine.begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA "{other}" CASCADE'))
