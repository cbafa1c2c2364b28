"""The typed sections of a cell record (model/json_section.py and the sections built on it) read a
record's JSON and write it back key for key: the order the keys came in, a null kept apart from a
key left out, keys this version does not name kept as they were."""

from __future__ import annotations

import json
from dataclasses import replace

from tests.results_fakes import hex_id, make_cell
from winml_perf.model.record import CellRecord
from winml_perf.model.record_context import Environment, Output, Prompt
from winml_perf.model.record_measures import Energy, Invocation, Memory, Sustained


def test_a_section_is_written_back_in_its_order_with_its_nulls_and_unknown_keys():
    d = {"scope": "each invocation", "peak_rss_bytes": 5, "ru_maxrss_bytes": None, "from_the_future": {"x": [1]}}
    memory = Memory.from_dict(d)
    assert memory.peak_rss_bytes == 5 and memory.scope == "each invocation" and memory.ru_maxrss_bytes is None
    assert memory.extra == {"from_the_future": {"x": [1]}}
    out = memory.to_dict()
    assert out == d and list(out) == list(d)  # order, the null and the unknown key, as read
    assert json.dumps(out) == json.dumps(d)
    out["from_the_future"]["x"].append(2)  # the caller's copy: the section is unchanged
    assert memory.to_dict() == d


def test_a_section_made_here_writes_its_set_fields_in_field_order():
    assert Prompt(seed=3, mode="synthetic").to_dict() == {"mode": "synthetic", "seed": 3}
    assert list(Prompt(seed=3, mode="synthetic").to_dict()) == ["mode", "seed"]
    assert Memory().to_dict() == {} and Energy().to_dict() == {}
    assert Prompt.from_dict({"seed": 3, "mode": "synthetic"}) == Prompt(mode="synthetic", seed=3)  # equal content


def test_a_field_set_on_a_section_read_from_json_is_written_after_the_keys_read():
    memory = replace(Memory.from_dict({"pid": 1, "ru_maxrss_bytes": None}), scope="each invocation")
    assert list(memory.to_dict().items()) == [("pid", 1), ("ru_maxrss_bytes", None), ("scope", "each invocation")]


def test_lists_read_as_tuples_are_written_as_lists():
    out = Output.from_dict({"tokens_sha256": "ab", "first_token_ids": [1, 2], "identical_across_iterations": True})
    assert out.first_token_ids == (1, 2)
    assert out.to_dict() == {"tokens_sha256": "ab", "first_token_ids": [1, 2], "identical_across_iterations": True}
    s = Sustained.from_dict({"duration_s": 6.0, "change_points": None, "windows": [{"t_s": 0.0}]})
    assert s.change_points is None and s.windows == ({"t_s": 0.0},)
    assert s.to_dict() == {"duration_s": 6.0, "change_points": None, "windows": [{"t_s": 0.0}]}


def test_environment_reads_its_versions_and_commit():
    env = Environment.from_dict(make_cell(hex_id("env"))["environment"])
    assert env.testbed_id == "tb-linux" and env.version("onnxruntime") == "1.31.1" and env.version("nope") is None
    assert env.git_commit == "1111111aaaaaaa"


def test_a_cell_record_of_a_file_is_written_back_with_its_sections_typed():
    doc = make_cell(hex_id("doc"))
    doc.update(
        invocations=[{"index": 0, "round": 0, "pid": 7, "iterations": 6, "medians": {"decode_tokens_per_s": 500.0}}],
        energy={"status": "not measured", "reason": "no meter", "power_state": {}},
        explain=None,
        uncertainty={"invocation_kind": "session", "metrics": {}},
        sustained=None,
    )
    record = CellRecord.from_dict(doc)
    assert isinstance(record.invocations[0], Invocation) and record.invocations[0].pid == 7
    assert record.energy.status == "not measured" and record.memory.peak_rss_bytes == 200_000_000
    assert record.prompt.mode == "synthetic" and record.environment.hostname == "bench-01"
    back = record.to_dict()
    # every key but the samples (IterationSample writes each sample's invocation) as the file had it
    assert {k: v for k, v in back.items() if k != "samples"} == {k: v for k, v in doc.items() if k != "samples"}
    for key in ("prompt", "memory", "environment", "energy", "uncertainty"):
        assert json.dumps(back[key]) == json.dumps(doc[key])  # each section's keys in the file's order
