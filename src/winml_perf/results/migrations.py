"""The results store's schema: ordered, named migrations applied on open, and the current tables.

Each migration is a function ``(connection) -> None`` with a stable name; the names applied so
far are rows of ``schema_migrations``. Opening a store applies the missing ones in order inside one
transaction (under a lock, so several processes opening a fresh store at once agree). A store that
holds a migration name this code does not know was written by a newer winml-perf: we refuse it
rather than guess (StoreError, exit 2). Never edit a released migration; add a new one.

Tables (one schema for SQLite and PostgreSQL):

- ``records``: one row per measured cell (a record from record/build.py): identity, the keys the
  commands filter and group by (run, testbed, bundle, route, shape, status, versions, git commit),
  and the whole record as JSON text (lossless; ``winml results show`` prints it).
- ``metrics``: one row per record and metric: the record's summary statistics over iterations,
  plus per-cell scalars (peak RSS, model load, roofline fraction) with n = 1 (what
  ``results list``, the exports and the dashboard history read).
- ``samples``: one row per iteration (measured and warmup): the raw timings, the per-iteration
  metrics derived from them, and ``round_index`` pairing interleaved routes (what ``compare``
  reads). Since 0003 the raw samples live here only: the record JSON leaves them out whenever
  these rows give them back exactly (``rows.restore_samples``; ``Store.get`` puts them back).
- ``samples.invocation`` (0003): the invocation (fresh process) that ran the iteration.
- ``records.series_key`` (0003): a hash of everything that changes what a cell measures
  (``rows.series_identity``), indexed with the time: one series' history is one index range.
- ``change_point_cache`` (0004): the change points last found in a series' metric, with a digest of
  everything the detector was given (results/change_point_cache.py); a row whose digest no longer
  matches is recomputed, never read. Derived data: dropping the rows loses nothing.
- Covering indexes (0005) for reading whole series (results/series.py): the records of a series
  with the columns the dashboard shows, and metric values by record, read from the indexes alone
  instead of one table page per record.
- ``metrics.invocations`` (0006): JSON list of the record's per-invocation medians of a
  per-iteration metric (``rows.invocation_medians``), NULL when its samples carry no invocation:
  the mode-aware input of change points (gate and dashboard) without reading the samples.
- ``records.equivalence_*`` (0007): the verdict and key figures of the record's ``route.equivalence``
  (model/equivalence_view.py; verdict 'not checked' without one), filled from the stored JSON, so
  listings, filters and exports show them beside the speed without parsing every record.
- ``records.bundle_id`` (0008): the bundle's content digest (``record.bundle_id``), part of the
  series identity when known; NULL for records made before it, whose series stay as they were.
- ``records.series_label`` (0009): ``winml perf --series NAME``. Since 0009 a series is what the
  user tracks (issue 35): the label, else the bundle's path, with route (as shown: compiled,
  emulated), shape and testbed; ``bundle_id`` is recorded with every run, an event on its series
  (a model change), no longer part of ``series_key``. 0009 recomputes every ``series_key`` and
  ``route`` from the stored JSON.
- ``records.equivalence_perplexity*`` (0010): with ``winml perf --perplexity``, the route's perplexity
  and its ratio to the reference's with the ratio's interval (``route.equivalence.perplexity``),
  filled from the stored JSON; NULL for runs without it.
- ``records.equivalence_perplexity_kl*``, ``equivalence_perplexity_top1`` (0011): over the same text,
  KL(reference ‖ route) with its interval over chunks and top-1 agreement (``route.equivalence.perplexity``),
  filled from the stored JSON; NULL for runs without them (and for runs made before they were measured).
- ``ix_records_n_samples`` (0012): the records by their number of samples, so the dashboard finds the
  serving cells (records with none) without reading the whole records table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

MIGRATIONS_TABLE = "schema_migrations"


def _v1_tables(md: sa.MetaData) -> tuple[sa.Table, sa.Table, sa.Table, sa.Table]:
    """The version-1 tables, built into ``md``. Frozen: a later migration that changes a table
    gets its own builder and ``metadata`` below is built from the newest."""
    migrations_t = sa.Table(
        MIGRATIONS_TABLE,
        md,
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("applied_utc", sa.String(40), nullable=False),
    )
    records_t = sa.Table(
        "records",
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("record_uid", sa.String(80), nullable=False, unique=True),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("run_id", sa.String(80), nullable=True, index=True),
        sa.Column("created_utc", sa.String(40), nullable=False, index=True),
        sa.Column("testbed_id", sa.String(200), nullable=True, index=True),
        sa.Column("hostname", sa.String(200), nullable=True),
        sa.Column("bundle", sa.String(400), nullable=True, index=True),
        sa.Column("bundle_path", sa.Text, nullable=True),
        sa.Column("route", sa.String(200), nullable=True, index=True),
        sa.Column("runtime", sa.String(40), nullable=True),
        sa.Column("prompt_tokens", sa.Integer, nullable=True),
        sa.Column("max_new_tokens", sa.Integer, nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("git_commit", sa.String(80), nullable=True, index=True),
        sa.Column("winml_perf_version", sa.String(80), nullable=True),
        sa.Column("onnxruntime_version", sa.String(80), nullable=True),
        sa.Column("genai_version", sa.String(80), nullable=True),
        sa.Column("n_samples", sa.Integer, nullable=False),
        sa.Column("record_json", sa.Text, nullable=False),
    )
    metrics_t = sa.Table(
        "metrics",
        md,
        sa.Column("record_id", sa.Integer, sa.ForeignKey("records.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(80), primary_key=True),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("median", sa.Float, nullable=True),
        sa.Column("mean", sa.Float, nullable=True),
        sa.Column("stdev", sa.Float, nullable=True),
        sa.Column("cv_pct", sa.Float, nullable=True),
        sa.Column("min", sa.Float, nullable=True),
        sa.Column("max", sa.Float, nullable=True),
        sa.Column("p90", sa.Float, nullable=True),
        sa.Column("p95", sa.Float, nullable=True),
        sa.Column("p99", sa.Float, nullable=True),
        sa.Column("ci95_low", sa.Float, nullable=True),
        sa.Column("ci95_high", sa.Float, nullable=True),
    )
    samples_t = sa.Table(
        "samples",
        md,
        sa.Column("record_id", sa.Integer, sa.ForeignKey("records.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("phase", sa.String(10), nullable=False),  # 'measured' | 'warmup'
        sa.Column("round_index", sa.Integer, nullable=False),
        sa.Column("latency_ms", sa.Float, nullable=True),
        sa.Column("prompt_tokens", sa.Integer, nullable=True),
        sa.Column("new_tokens", sa.Integer, nullable=True),
        sa.Column("prompt_ms", sa.Float, nullable=True),
        sa.Column("ttft_ms", sa.Float, nullable=True),
        sa.Column("e2e_ms", sa.Float, nullable=True),
        sa.Column("prompt_tokens_per_s", sa.Float, nullable=True),
        sa.Column("decode_tokens_per_s", sa.Float, nullable=True),
        sa.Column("tpot_ms", sa.Float, nullable=True),
        sa.Column("decode_step_ms", sa.Text, nullable=True),  # JSON list, raw
    )
    return migrations_t, records_t, metrics_t, samples_t


def _v2_indexes(records_t: sa.Table, samples_t: sa.Table) -> list[sa.Index]:
    return [
        sa.Index(
            "ix_records_series",
            records_t.c.bundle,
            records_t.c.route,
            records_t.c.testbed_id,
            records_t.c.prompt_tokens,
            records_t.c.max_new_tokens,
        ),
        sa.Index("ix_samples_record_round", samples_t.c.record_id, samples_t.c.round_index),
    ]


def _m0001_initial(conn: sa.Connection) -> None:
    _, records_t, metrics_t, samples_t = _v1_tables(sa.MetaData())
    for table in (records_t, metrics_t, samples_t):
        table.create(conn)


def _m0002_query_indexes(conn: sa.Connection) -> None:
    _, records_t, _, samples_t = _v1_tables(sa.MetaData())
    for index in _v2_indexes(records_t, samples_t):
        index.create(conn)


SERIES_KEY_LENGTH = 40
#: Records rewritten per statement batch while migrating an existing store.
MIGRATION_CHUNK = 1000


def _m0003_series_key_samples_once(conn: sa.Connection) -> None:
    """Add and fill ``records.series_key`` with its index, and drop from each record's JSON the raw
    samples that its sample rows give back exactly; then refresh the planner's statistics."""
    import json

    from winml_perf.results.rows import series_key, typed_record, without_restorable_samples

    conn.execute(sa.text(f"ALTER TABLE records ADD COLUMN series_key VARCHAR({SERIES_KEY_LENGTH})"))
    conn.execute(sa.text("ALTER TABLE samples ADD COLUMN invocation INTEGER"))
    _, records_t, _, samples_t = _v1_tables(sa.MetaData())
    last = 0
    while True:
        batch = conn.execute(
            sa.select(records_t.c.id, records_t.c.record_json)
            .where(records_t.c.id > last)
            .order_by(records_t.c.id)
            .limit(MIGRATION_CHUNK)
        ).all()
        if not batch:
            break
        last = batch[-1].id
        lo, hi = batch[0].id, batch[-1].id
        by_record: dict[int, list[dict[str, Any]]] = {}
        for row in conn.execute(sa.select(samples_t).where(samples_t.c.record_id.between(lo, hi))):
            by_record.setdefault(row.record_id, []).append(dict(row._mapping))
        updates, invocations = [], []
        for rid, text in batch:
            record = json.loads(text)
            raw = record.get("samples") if isinstance(record.get("samples"), dict) else {}
            in_order = list(raw.get("iterations") or ()) + list(raw.get("warmup") or ())  # the rows' seq order
            for sample_row in by_record.get(rid, []):
                seq = sample_row["seq"]
                sample = in_order[seq] if seq < len(in_order) else None
                if isinstance(sample, dict) and isinstance(sample.get("invocation"), int):
                    sample_row["invocation"] = sample["invocation"]
                    invocations.append({"rid": rid, "seq": seq, "inv": sample["invocation"]})
            stored = without_restorable_samples(record, by_record.get(rid, []))
            new_text = (
                text if stored is record else json.dumps(stored, sort_keys=True, separators=(",", ":"), allow_nan=False)
            )
            updates.append({"rid": rid, "k": series_key(typed_record(record)), "j": new_text})
        conn.execute(sa.text("UPDATE records SET series_key = :k, record_json = :j WHERE id = :rid"), updates)
        if invocations:
            conn.execute(
                sa.text("UPDATE samples SET invocation = :inv WHERE record_id = :rid AND seq = :seq"), invocations
            )
    conn.execute(sa.text("CREATE INDEX ix_records_series_key ON records (series_key, created_utc)"))
    analyze(conn, ("records", "metrics", "samples"))


def analyze(conn: sa.Connection, tables: Iterable[str]) -> None:
    """Refresh the planner's statistics of these tables only: on PostgreSQL a bare ANALYZE covers
    every table of the database, which a fleet may share with other tools."""
    for table in tables:
        conn.execute(sa.text(f"ANALYZE {table}"))


def _v4_change_point_cache(md: sa.MetaData) -> sa.Table:
    return sa.Table(
        "change_point_cache",
        md,
        sa.Column("series_key", sa.String(SERIES_KEY_LENGTH), primary_key=True),
        sa.Column("metric", sa.String(80), primary_key=True),
        sa.Column("input_digest", sa.String(64), nullable=False),  # detector, its options and its input
        sa.Column("records", sa.Integer, nullable=False),  # records searched
        sa.Column("newest_record_id", sa.Integer, nullable=True),
        sa.Column("change_points_json", sa.Text, nullable=False),
        sa.Column("computed_utc", sa.String(40), nullable=False),
    )


def _m0004_change_point_cache(conn: sa.Connection) -> None:
    _v4_change_point_cache(sa.MetaData()).create(conn)


def _m0005_series_covering_indexes(conn: sa.Connection) -> None:
    conn.execute(
        sa.text(
            "CREATE INDEX ix_records_series_shown ON records (series_key, created_utc, id, status, run_id,"
            " git_commit, winml_perf_version, testbed_id)"
        )
    )
    conn.execute(sa.text("CREATE INDEX ix_metrics_values ON metrics (record_id, name, median, ci95_low, ci95_high)"))
    analyze(conn, ("records", "metrics"))


def _m0006_metric_invocations(conn: sa.Connection) -> None:
    """Add ``metrics.invocations`` and fill it from the measured samples grouped by record and
    invocation (records without invocations keep NULL); then refresh the metrics' statistics."""
    from winml_perf.model.metrics import METRICS
    from winml_perf.results.rows import invocation_medians, invocations_text

    conn.execute(sa.text("ALTER TABLE metrics ADD COLUMN invocations TEXT"))
    _, _, _, samples_t = _v1_tables(sa.MetaData())
    invocation = sa.Column("invocation", sa.Integer)
    samples_t.append_column(invocation)
    names = [m.name for m in METRICS if m.stored and m.name in samples_t.c]
    s = samples_t.c
    with_invocations = sa.select(s.record_id).where(s.phase == "measured", s.invocation.is_not(None)).distinct()
    ids = conn.execute(with_invocations.order_by(s.record_id)).scalars().all()
    for k in range(0, len(ids), MIGRATION_CHUNK):
        chunk = ids[k : k + MIGRATION_CHUNK]
        by_record: dict[int, list[dict[str, Any]]] = {}
        for row in conn.execute(
            sa.select(s.record_id, s.invocation, *(s[n] for n in names))
            .where(s.record_id.between(chunk[0], chunk[-1]), s.phase == "measured")
            .order_by(s.record_id, s.seq)
        ):
            by_record.setdefault(row.record_id, []).append(dict(row._mapping))
        updates = [
            {"rid": rid, "name": name, "v": invocations_text(values)}
            for rid, rows in by_record.items()
            for name, values in invocation_medians(rows, names).items()
        ]
        if updates:
            conn.execute(
                sa.text("UPDATE metrics SET invocations = :v WHERE record_id = :rid AND name = :name"), updates
            )
    conn.execute(sa.text("ANALYZE metrics"))


def equivalence_columns() -> list[sa.Column[Any]]:
    """The ``records.equivalence_*`` columns of 0007, in model/equivalence_view.COLUMNS order."""
    return [
        sa.Column("equivalence_verdict", sa.String(40), nullable=True),
        sa.Column("equivalence_reference", sa.Text, nullable=True),
        sa.Column("equivalence_kind", sa.String(20), nullable=True),
        sa.Column("equivalence_kl_mean", sa.Float, nullable=True),
        sa.Column("equivalence_top1_agreement", sa.Float, nullable=True),
        sa.Column("equivalence_first_divergence_step", sa.Integer, nullable=True),
        sa.Column("equivalence_first_stage", sa.String(200), nullable=True),
        sa.Column("equivalence_max_abs_error", sa.Float, nullable=True),
        sa.Column("equivalence_max_rel_error", sa.Float, nullable=True),
        sa.Column("equivalence_cosine_min", sa.Float, nullable=True),
    ]


def perplexity_columns() -> list[sa.Column[Any]]:
    """The ``records.equivalence_perplexity*`` columns of 0010, after 0007's in COLUMNS order."""
    return [
        sa.Column("equivalence_perplexity", sa.Float, nullable=True),
        sa.Column("equivalence_perplexity_ratio", sa.Float, nullable=True),
        sa.Column("equivalence_perplexity_ratio_low", sa.Float, nullable=True),
        sa.Column("equivalence_perplexity_ratio_high", sa.Float, nullable=True),
    ]


def text_agreement_columns() -> list[sa.Column[Any]]:
    """The ``records.equivalence_perplexity_kl*`` and ``_top1`` columns of 0011, after 0010's in COLUMNS order."""
    return [
        sa.Column("equivalence_perplexity_kl", sa.Float, nullable=True),
        sa.Column("equivalence_perplexity_kl_low", sa.Float, nullable=True),
        sa.Column("equivalence_perplexity_kl_high", sa.Float, nullable=True),
        sa.Column("equivalence_perplexity_top1", sa.Float, nullable=True),
    ]


def _fill_view_columns(conn: sa.Connection, names: list[str], only: str = "") -> None:
    """Fill the named ``equivalence_*`` columns of every record from its JSON (model/equivalence_view);
    ``only``: an SQL condition on the records' columns that every record with a value meets (the rest
    keep NULL without their JSON being read)."""
    import json

    from winml_perf.model.equivalence_view import view_of_record

    sets = ", ".join(f"{n} = :{n}" for n in names)
    last = 0
    while True:
        batch = conn.execute(
            sa.text(f"SELECT id, record_json FROM records WHERE id > :last {only} ORDER BY id LIMIT :n"),
            {"last": last, "n": MIGRATION_CHUNK},
        ).all()
        if not batch:
            break
        last = batch[-1][0]
        updates = []
        for rid, text in batch:
            columns = view_of_record(json.loads(text)).columns()
            updates.append({"rid": rid, **{n: columns[n] for n in names}})
        conn.execute(sa.text(f"UPDATE records SET {sets} WHERE id = :rid"), updates)


def _add_columns(conn: sa.Connection, columns: list[sa.Column[Any]]) -> None:
    for c in columns:
        conn.execute(sa.text(f"ALTER TABLE records ADD COLUMN {c.name} {c.type.compile(dialect=conn.dialect)}"))


def _m0010_perplexity_columns(conn: sa.Connection) -> None:
    """Issue 34: a route's perplexity and its ratio to the reference's beside its equivalence verdict,
    filled from each record's JSON (NULL where the run had no --perplexity)."""
    columns = perplexity_columns()
    _add_columns(conn, columns)
    _fill_view_columns(conn, [c.name for c in columns])


def _m0011_text_agreement_columns(conn: sa.Connection) -> None:
    """Issue 34: KL and top-1 agreement against the reference over the perplexity's text, beside the
    perplexity ratio, filled from each record's JSON (NULL where the run did not measure them)."""
    columns = text_agreement_columns()
    _add_columns(conn, columns)
    # measured only beside a perplexity ratio (0010's column): a fleet's other records are not read
    _fill_view_columns(conn, [c.name for c in columns], only="AND equivalence_perplexity_ratio IS NOT NULL")


def _m0007_equivalence_columns(conn: sa.Connection) -> None:
    """Add the ``records.equivalence_*`` columns and fill them from each record's JSON (records
    without a check read 'not checked')."""
    columns = equivalence_columns()
    _add_columns(conn, columns)
    _fill_view_columns(conn, [c.name for c in columns])
    conn.execute(sa.text("CREATE INDEX ix_records_equivalence_verdict ON records (equivalence_verdict)"))


BUNDLE_ID_LENGTH = 40


def _m0008_bundle_id(conn: sa.Connection) -> None:
    """Add ``records.bundle_id``: NULL for the records stored so far (their JSON has none)."""
    conn.execute(sa.text(f"ALTER TABLE records ADD COLUMN bundle_id VARCHAR({BUNDLE_ID_LENGTH})"))


SERIES_LABEL_LENGTH = 200


def _m0009_series_by_what_is_tracked(conn: sa.Connection) -> None:
    """Issue 35: a series is what the user tracks, not the bundle's content. Add
    ``records.series_label`` (``winml perf --series NAME``; NULL for every record so far), and
    recompute from each record's JSON its ``series_key`` (rows.series_identity: the bundle's path in
    place of its digest) and its ``route`` as listings show it (`` (compiled)``, `` (emulated)``
    added). Nothing else changes: the JSON, metrics and samples stay as they were, and
    ``bundle_id`` stays with every record (an event on its series now). The change point cache,
    keyed by the old series keys, is derived data and is emptied (recomputed when next read)."""
    import json

    from winml_perf.results.rows import route_label, series_key, typed_record

    conn.execute(sa.text(f"ALTER TABLE records ADD COLUMN series_label VARCHAR({SERIES_LABEL_LENGTH})"))
    last = 0
    while True:
        batch = conn.execute(
            sa.text("SELECT id, record_json FROM records WHERE id > :last ORDER BY id LIMIT :n"),
            {"last": last, "n": MIGRATION_CHUNK},
        ).all()
        if not batch:
            break
        last = batch[-1][0]
        updates = []
        for rid, text in batch:
            record = typed_record(json.loads(text))
            updates.append({"rid": rid, "k": series_key(record), "route": route_label(record)})
        conn.execute(sa.text("UPDATE records SET series_key = :k, route = :route WHERE id = :rid"), updates)
    conn.execute(sa.text("DELETE FROM change_point_cache"))
    # the dashboard's series read (results/series.py) draws model changes: the covering index of 0005 gains bundle_id
    conn.execute(sa.text("DROP INDEX ix_records_series_shown"))
    conn.execute(
        sa.text(
            "CREATE INDEX ix_records_series_shown_digest ON records (series_key, created_utc, id, status, run_id,"
            " git_commit, winml_perf_version, testbed_id, bundle_id)"
        )
    )
    analyze(conn, ("records",))


# The current schema, for queries (never used to create tables: migrations do that).
metadata = sa.MetaData()
schema_migrations, records, metrics, samples = _v1_tables(metadata)
records.append_column(sa.Column("series_key", sa.String(SERIES_KEY_LENGTH), nullable=True))
samples.append_column(sa.Column("invocation", sa.Integer, nullable=True))
metrics.append_column(sa.Column("invocations", sa.Text, nullable=True))
records.append_column(sa.Column("bundle_id", sa.String(BUNDLE_ID_LENGTH), nullable=True))
records.append_column(sa.Column("series_label", sa.String(SERIES_LABEL_LENGTH), nullable=True))
for _column in equivalence_columns() + perplexity_columns() + text_agreement_columns():
    records.append_column(_column)
change_point_cache = _v4_change_point_cache(metadata)


def _m0012_samples_count_index(conn: sa.Connection) -> None:
    """Index ``records.n_samples``: the serving cells' search (publish/serving_pages.py: records with
    no samples) reads a few rows, or none, instead of the whole records table. A whole index, not a
    partial one: SQLite keeps no statistics of an empty index, so every PRAGMA optimize after a
    write would analyze the records table again."""
    conn.execute(sa.text("CREATE INDEX ix_records_n_samples ON records (n_samples)"))
    if conn.dialect.name == "sqlite":  # the new index's statistics alone, not the whole table's
        conn.execute(sa.text("ANALYZE ix_records_n_samples"))


@dataclass(frozen=True)
class Migration:
    name: str
    apply: Callable[[sa.Connection], None]


#: Applied in this order; a store's schema version is the number applied.
MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_initial", _m0001_initial),
    Migration("0002_query_indexes", _m0002_query_indexes),
    Migration("0003_series_key_samples_once", _m0003_series_key_samples_once),
    Migration("0004_change_point_cache", _m0004_change_point_cache),
    Migration("0005_series_covering_indexes", _m0005_series_covering_indexes),
    Migration("0006_metric_invocations", _m0006_metric_invocations),
    Migration("0007_equivalence_columns", _m0007_equivalence_columns),
    Migration("0008_bundle_id", _m0008_bundle_id),
    Migration("0009_series_by_what_is_tracked", _m0009_series_by_what_is_tracked),
    Migration("0010_perplexity_columns", _m0010_perplexity_columns),
    Migration("0011_text_agreement_columns", _m0011_text_agreement_columns),
    Migration("0012_samples_count_index", _m0012_samples_count_index),
)

SCHEMA_VERSION = len(MIGRATIONS)


def pending(applied: set[str]) -> list[Migration]:
    """Migrations not yet applied, in order."""
    return [m for m in MIGRATIONS if m.name not in applied]


def unknown(applied: set[str]) -> list[str]:
    """Applied names this code does not know (the store is newer than this code)."""
    known = {m.name for m in MIGRATIONS}
    return sorted(applied - known)
