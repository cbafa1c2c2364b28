"""winml tune's parts apart from the race: the candidate assignments and the route each becomes,
device crossings, --budget parsing, placement pruning and --emit's folder."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from winml_perf.support.errors import UsageError
from winml_perf.tune.candidates import device_crossings, enumerate_candidates
from winml_perf.tune.goal import Budget, parse_budget

CPU, GPU, NPU = "CPUExecutionProvider", "WebGpuExecutionProvider", "QNNExecutionProvider"
STAGES = ("embeddings", "context", "iterator", "lm_head")


def _config(*eps):
    return tuple(zip(STAGES, eps))


def test_every_assignment_of_two_eps_over_a_cpu_config_is_one_route():
    cands = enumerate_candidates(_config(CPU, CPU, CPU, CPU), [CPU, GPU], {})
    assert len(cands) == 16 and cands[0].label == "config"
    assert not any(c.route.assign for c in cands)  # a CPU config over two EPs moves stages to one EP only
    labels = {c.label for c in cands}
    assert "ep=webgpu" in labels and "ep=webgpu[context,iterator]" in labels  # all stages: the plain route
    assert len(labels) == 16


def test_an_assignment_moving_stages_to_two_eps_is_a_per_stage_route():
    cands = enumerate_candidates(_config(CPU, NPU, NPU, CPU), [CPU, NPU], {NPU: {"soc_model": "60"}})
    assert len(cands) == 16 and len({c.label for c in cands}) == 16
    mixed = {c.label: c for c in cands if c.route.assign}
    # {embeddings -> qnn, context -> cpu}: each changed stage named with its own EP, the rest left to config
    route = mixed["stages=embeddings:qnn,context:cpu(qnn:soc_model=60)"].route
    assert route.assign == (("embeddings", "qnn"), ("context", "cpu"))
    assert dict(route.options) == {"qnn:soc_model": "60"}  # each option scoped to its EP
    assert len(mixed) == 9  # every assignment that changes stages to both EPs
    assert {"config", "ep=cpu[context,iterator]", "ep=qnn(soc_model=60)[embeddings]"} <= {c.label for c in cands}


def test_per_ep_options_ride_on_that_eps_routes():
    cands = enumerate_candidates(_config(CPU, CPU, CPU, CPU), [CPU, NPU], {NPU: {"soc_model": "60"}})
    forced = [c for c in cands if c.route.ep == "qnn"]
    assert forced and all(dict(c.route.options) == {"soc_model": "60"} for c in forced)
    assert "(soc_model=60)" in forced[0].label


def test_device_crossings_count_the_worse_of_the_prompt_and_token_paths():
    on_prompt = {"embeddings": True, "context": True, "iterator": False, "lm_head": True}
    on_tokens = {"embeddings": True, "context": False, "iterator": True, "lm_head": True}
    assert device_crossings(_config(CPU, CPU, CPU, CPU), on_prompt, on_tokens) == 0
    assert device_crossings(_config(CPU, GPU, CPU, CPU), on_prompt, on_tokens) == 2  # prompt: cpu>gpu>cpu
    assert device_crossings(_config(GPU, CPU, GPU, CPU), on_prompt, on_tokens) == 1  # both: one
    assert device_crossings(_config(CPU, CPU, GPU, CPU), on_prompt, on_tokens) == 2  # tokens: cpu>gpu>cpu


@pytest.mark.parametrize(
    "text,budget",
    [("300s", Budget(seconds=300)), ("5m", Budget(seconds=300)), ("20000tok", Budget(tokens=20000))],
)
def test_budget_parses_seconds_minutes_and_tokens(text, budget):
    assert parse_budget(text) == budget


@pytest.mark.parametrize("text", ["", "300", "-5s", "0s", "1.5tok", "300h"])
def test_a_bad_budget_names_the_flag(text):
    with pytest.raises(UsageError, match="--budget"):
        parse_budget(text)


def _spec(stage, ep, per_ep, status="ok", forced=True):
    placement = SimpleNamespace(ep=ep, status=status, error=None, nodes_per_ep=per_ep, nodes=sum(per_ep.values()))
    return SimpleNamespace(
        recorded_route=SimpleNamespace(stages=[SimpleNamespace(stage=stage, forced=forced, placement=placement)])
    )


def test_placement_prunes_a_stage_whose_nodes_mostly_fall_back():
    from winml_perf.tune.prune import placement_problem

    assert placement_problem(_spec("lm_head", GPU, {GPU: 1, CPU: 5}), 0.5) == (
        f"stage lm_head: 1 of 6 nodes on {GPU}, the rest fall back (--min-placement 0.5)"
    )
    assert placement_problem(_spec("context", GPU, {GPU: 23, CPU: 6}), 0.5) is None
    assert "no session" in placement_problem(_spec("context", GPU, {}, status="error"), 0.5)
    assert placement_problem(_spec("context", GPU, {CPU: 6}, forced=False), 0.5) is None  # config's own stage


def test_emit_links_the_weights_copies_the_config_and_writes_nothing_outside(tmp_path):
    from winml_perf.tune.emit import emit_bundle

    src = tmp_path / "derived"
    (src / "_compiled" / "x").mkdir(parents=True)
    (src / "genai_config.json").write_text('{"model": {}}')
    (src / "model.onnx.data").write_bytes(b"w" * 64)
    (src / "manifest.json").write_text("{}")
    (src / "_compiled" / "x" / "other.onnx").write_bytes(b"x")
    dest = tmp_path / "out" / "best"
    dest.parent.mkdir()
    before = sorted(p for p in tmp_path.rglob("*") if dest not in p.parents and p != dest)
    written = emit_bundle(src, dest, {"route": "ep=cpu"})
    assert sorted(written) == ["genai_config.json", "model.onnx.data", "tune.json"]
    assert os.path.samefile(dest / "model.onnx.data", src / "model.onnx.data")  # a hard link, not a copy
    assert not os.path.samefile(dest / "genai_config.json", src / "genai_config.json")
    assert json.loads((dest / "tune.json").read_text())["route"] == "ep=cpu"
    after = sorted(p for p in tmp_path.rglob("*") if dest not in p.parents and p != dest)
    assert before == after


def test_emit_refuses_a_folder_that_holds_something(tmp_path):
    from winml_perf.tune.emit import check_emit_dir

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(UsageError, match="--emit"):
        check_emit_dir(tmp_path / "full")
    with pytest.raises(UsageError, match=r"--emit .*/full/f/x: .*/full/f is not a folder"):
        check_emit_dir(tmp_path / "full" / "f" / "x")


def test_emit_makes_missing_parent_folders_as_every_output_does(tmp_path):
    """`winml perf --export-csv new/t.csv` makes new/; `--emit new/best` did not (it refused)."""
    from winml_perf.tune.emit import check_emit_dir, emit_bundle

    dest = tmp_path / "no" / "such" / "best"
    check_emit_dir(dest)
    assert not (tmp_path / "no").exists()  # checked before measuring, made only when written
    src = tmp_path / "derived"
    src.mkdir()
    (src / "genai_config.json").write_text('{"model": {}}')
    assert "genai_config.json" in emit_bundle(src, dest, {"route": "config"})
    assert (dest / "tune.json").is_file()
    broken = tmp_path / "other" / "deeper" / "best"
    (src / "genai_config.json").write_text('{"model": {"decoder": {"filename": "absent.onnx"}}}')
    with pytest.raises(UsageError, match="incomplete"):
        emit_bundle(src, broken, {})
    assert not (tmp_path / "other").exists()  # the parents made for a refused bundle are gone too


def test_stages_limits_the_search_and_an_unknown_stage_names_the_flag():
    cands = enumerate_candidates(_config(CPU, CPU, CPU, CPU), [CPU, GPU], {}, ("context", "iterator"))
    assert {c.label for c in cands} == {
        "config",
        "ep=webgpu[context]",
        "ep=webgpu[iterator]",
        "ep=webgpu[context,iterator]",
    }
    with pytest.raises(UsageError, match="--stages decoder"):
        enumerate_candidates(_config(CPU, CPU, CPU, CPU), [CPU, GPU], {}, ("decoder",))


def test_host_memory_eps_do_not_cross_devices_with_cpu():
    every = {s: True for s in STAGES}
    assert device_crossings(_config(CPU, NPU, CPU, CPU), every, every) == 0  # QNN takes I/O on the host


@pytest.mark.parametrize(
    "args,named",
    [
        (["--budget", "5h"], "--budget"),
        (["--objective", "fastest"], "--objective"),
        (["--eps", "cpu,nosuchep"], "--eps 'nosuchep'"),
        (["--stages", "decoder", "--eps", "cpu"], "--stages decoder"),
        (["--ep-option", "soc_model=60"], "--ep-option"),
        (["--min-placement", "1.5"], "--min-placement"),
        (["--screen-rounds", "1", "--eps", "cpu"], "--screen-rounds 1"),
        (["--screen-rounds", "-1"], "--screen-rounds"),
        (["--screen-rounds", "2", "--objective", "goodput"], "--screen-rounds does not apply to --objective goodput"),
    ],
)
def test_bad_tune_input_is_exit_2_naming_the_flag_before_anything_is_measured(capsys, args, named):
    from tests.conftest import TINY_PIPELINE
    from winml_perf import cli

    with pytest.raises(SystemExit) as ended:
        cli.main(["tune", str(TINY_PIPELINE), "--no-store", *args])
    assert ended.value.code == 2
    assert named in capsys.readouterr().err


def test_tune_refuses_a_folder_without_a_bundle_and_an_emit_folder_in_use(capsys, tmp_path):
    from tests.conftest import TINY_PIPELINE
    from winml_perf import cli

    with pytest.raises(SystemExit) as ended:
        cli.main(["tune", str(tmp_path), "--no-store"])
    assert ended.value.code == 2 and "no genai_config.json" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("x")
    with pytest.raises(SystemExit) as ended:
        cli.main(["tune", str(TINY_PIPELINE), "--no-store", "--emit", str(tmp_path / "taken")])
    assert ended.value.code == 2 and "--emit" in capsys.readouterr().err
    assert (tmp_path / "taken" / "x").read_text() == "x"


@pytest.mark.parametrize("objective", [(), ("--objective", "goodput", "--requests", "4")])
def test_lengths_past_the_bundles_context_are_refused_before_preparing(capsys, objective):
    """`winml tune` prepared and judged every route (26 s on SmolLM2) before each cell failed on
    max_length, exit 1 naming no flag; it is refused at once, naming the flags, as perf and serve do."""
    from tests.conftest import TINY_FLAT
    from winml_perf import cli

    with pytest.raises(SystemExit) as ended:
        cli.main(["tune", str(TINY_FLAT), "--no-store", "--prompt-tokens", "1020", "--max-new-tokens", "8", *objective])
    err = " ".join(capsys.readouterr().err.split())
    assert ended.value.code == 2
    assert err.startswith("error: --prompt-tokens + --max-new-tokens = 1020 + 8 exceeds the bundle's context of 1024")
    assert "candidate" not in err  # nothing was enumerated or prepared


def test_lengths_past_the_context_without_prompt_tokens_name_only_the_flag_given(capsys):
    from tests.conftest import TINY_FLAT
    from winml_perf import cli

    with pytest.raises(SystemExit) as ended:
        cli.main(["tune", str(TINY_FLAT), "--no-store", "--max-new-tokens", "1020"])
    err = " ".join(capsys.readouterr().err.split())
    assert ended.value.code == 2
    assert err.startswith("error: --max-new-tokens (+ the prompt) = 16 + 1020 exceeds the bundle's context of 1024")


@pytest.mark.qnn
@pytest.mark.parametrize(
    "option, words",
    [
        ("qnn:bogus=1", "--ep-option qnn:bogus: QNNExecutionProvider has no provider option 'bogus'"),
        ("cpu:foo=1", "--ep-option cpu:foo=1: EP options do not apply to the CPU EP"),
    ],
)
def test_an_ep_option_its_ep_does_not_take_is_refused_before_any_candidate(capsys, option, words):
    """A bad --ep-option only pruned the routes it was meant for (a cpu: one was ignored), and tune
    shipped config with exit 0; it is a usage error, as in `winml perf`."""
    from tests.conftest import TINY_FLAT
    from winml_perf import cli

    with pytest.raises(SystemExit) as ended:
        cli.main(["tune", str(TINY_FLAT), "--no-store", "--eps", "cpu,qnn", "--ep-option", option])
    err = " ".join(capsys.readouterr().err.split())
    assert ended.value.code == 2 and err.startswith(f"error: {words}"), err
    assert "candidate" not in err
