"""The statuses, directions and verdicts that are StrEnums: each value is defined once, in its enum,
and a member writes exactly its text to JSON, the store and every message, so records made before
the enums read and write byte for byte as they did."""

from __future__ import annotations

import json

import pytest

from tests.results_fakes import logits_equivalence, make_cell
from winml_perf.model.cell_status import CellStatus
from winml_perf.model.equivalence import VERDICTS, EquivalenceVerdict
from winml_perf.model.metrics import METRICS, Better, Source
from winml_perf.model.record import CellRecord, load_schema, parse_status
from winml_perf.model.route import COMPILE_FAILURES, CompileOutcome, CompileStatus
from winml_perf.results import load
from winml_perf.results.store import open_store
from winml_perf.stats.series.changepoint import Direction, GateStatus
from winml_perf.stats.significance import SpeedVerdict, ci_verdict
from winml_perf.support.errors import StoreError
from winml_perf.support.indented_json import dumps_indented

ENUMS = (CellStatus, Better, Source, EquivalenceVerdict, SpeedVerdict, Direction, GateStatus, CompileStatus)


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.__name__)
def test_a_member_writes_its_text_wherever_text_goes(enum):
    for member in enum:
        text = member.value
        assert member == text and hash(member) == hash(text)  # a dict keyed by text finds it
        assert str(member) == f"{member}" == "%s" % member == text  # noqa: UP031 (the %-format too)
        assert json.dumps(member) == json.dumps(text) == dumps_indented(member)
        assert json.dumps({"v": [member]}, indent=2) == json.dumps({"v": [text]}, indent=2)
        assert enum(text) is member


def _enums_under(node, key):
    """Every ``{"enum": [...]}`` the schema gives under ``key``."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key and isinstance(v, dict) and "enum" in v:
                yield v["enum"]
            yield from _enums_under(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _enums_under(v, key)


def test_the_schema_allows_the_values_the_enums_define():
    schema = load_schema()
    statuses = list(_enums_under(schema, "status"))
    verdicts = list(_enums_under(schema, "verdict"))
    assert statuses == [["measured", "not measured"], list(CellStatus), list(CellStatus)]  # energy, cell, run
    assert len(verdicts) == 3 and all(v == list(EquivalenceVerdict) for v in verdicts)
    assert tuple(EquivalenceVerdict) == VERDICTS


def test_a_compile_outcome_reads_its_status_as_a_member():
    d = {"stages": ["decoder"], "source": "m.onnx", "ep": "QNNExecutionProvider", "output": None, "status": "timeout"}
    outcome = CompileOutcome.from_dict(d)
    assert outcome.status is CompileStatus.TIMEOUT and outcome.status in COMPILE_FAILURES
    assert json.dumps(outcome.to_dict()["status"]) == '"timeout"'


def test_a_record_reads_its_status_and_verdict_as_members_and_writes_the_same_text():
    equivalence = logits_equivalence("within precision tolerance", 0.01, 0.98)
    d = json.loads(json.dumps(make_cell("a" * 32, status="failed", equivalence=equivalence)))
    record = CellRecord.from_dict(d)
    assert type(record.status) is CellStatus and record.status is CellStatus.FAILED and not record.ok
    assert record.route.equivalence is not None
    assert record.route.equivalence.verdict is EquivalenceVerdict.WITHIN_PRECISION
    written = json.loads(record.to_json())
    assert {k: written[k] for k in d} == d  # the same document back (with the sections it left to their defaults)
    ok = CellRecord.from_dict(make_cell("b" * 32))
    assert ok.status is CellStatus.OK and ok.ok
    assert ok.to_json(indent=2) == CellRecord.from_dict(json.loads(ok.to_json())).to_json(indent=2)
    with pytest.raises(StoreError, match="record status 'done' is not one of ok, failed"):
        parse_status("done")


def test_the_store_keeps_a_member_as_its_text(store_url):
    ok = CellRecord.from_dict(make_cell("c" * 32))
    failed = CellRecord.from_dict(make_cell("d" * 32, status="failed"))
    with open_store(store_url) as store:  # SQLite, and PostgreSQL where offered
        ids = [store.write_record(ok), store.write_record(failed)]
        df = load(store)
        assert sorted(df["status"]) == ["failed", "ok"]
        assert {type(s) for s in df["status"]} == {str}  # read back as plain text
        assert len(load(store, status=CellStatus.OK)) == 1  # a member filters as its text
        stored = [store.get(i)["record"] for i in ids]
    assert [r["status"] for r in stored] == ["ok", "failed"]
    back = [CellRecord.from_dict(r) for r in stored]
    assert [r.status for r in back] == [CellStatus.OK, CellStatus.FAILED]
    same = [json.dumps(r.to_dict(), sort_keys=True) for r in (ok, failed)]  # the store keeps keys sorted
    assert [json.dumps(r.to_dict(), sort_keys=True) for r in back] == same


def test_each_metric_says_its_direction_and_source_with_a_member():
    assert {type(m.better) for m in METRICS} == {Better} and {type(m.source) for m in METRICS} == {Source}
    assert {m.better for m in METRICS} == set(Better)


def test_a_speed_verdict_is_a_member():
    assert ci_verdict(1.2, 1.4) is SpeedVerdict.FASTER and ci_verdict(0.5, 0.8) is SpeedVerdict.SLOWER
    assert ci_verdict(0.99, 1.01) is SpeedVerdict.EQUIVALENT and ci_verdict(0.9, 1.2) is SpeedVerdict.INCONCLUSIVE
