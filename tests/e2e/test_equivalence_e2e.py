"""Issue 24 end to end: `winml perf` with two routes judges each against config from teacher-forced
logits (on by default), a perturbed copy of a bundle given as --reference-bundle is judged not
equivalent with the stage named, and --no-equivalence turns the check off."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TINY_FLAT, TINY_PIPELINE, run_winml

pytestmark = pytest.mark.e2e

LEAN = ("--invocations", "1", "--prompt-tokens", "16", "--max-new-tokens", "4", "--warmup", "1", "--iterations", "1")
RUN = (*LEAN, "--no-store", "--format", "json", "-q")


def perturbed_copy(src: Path, dst: Path, scale: float = 0.03, prefix: str = "") -> Path:
    """A copy of ``src`` whose float weights (those whose name starts with ``prefix``) are each scaled
    by a factor drawn from N(1, scale)."""
    import onnx
    from onnx import numpy_helper

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_compiled"))
    rng = np.random.default_rng(0)
    for path in dst.glob("*.onnx"):
        model = onnx.load(str(path))
        for init in model.graph.initializer:
            a = numpy_helper.to_array(init)
            if a.dtype.kind == "f" and init.name.startswith(prefix):
                init.CopyFrom(
                    numpy_helper.from_array((a * (1 + scale * rng.standard_normal(a.shape))).astype(a.dtype), init.name)
                )
        data = dst / f"{path.name}.data"
        if data.exists():
            data.unlink()
            onnx.save(model, str(path), save_as_external_data=True, location=data.name)
        else:
            onnx.save(model, str(path))
    return dst


def _equivalence(result) -> dict[str, dict]:
    assert result.returncode == 0, result.stderr[-3000:]
    return {c["route"]["label"]: c["route"].get("equivalence") for c in result.json()["cells"]}


# ep=qnn (QNN's HTP emulator takes a Gather and a Cast of the tiny bundles) really differs from config;
# ep=cpu on these CPU bundles is the config route, measured once and never judged against itself
@pytest.mark.parametrize("bundle", [TINY_FLAT, TINY_PIPELINE], ids=["flat", "pipeline"])
def test_ep_qnn_is_judged_equivalent_to_config_by_default(bundle):
    result = run_winml("perf", bundle, "--route", "config", "--route", "ep=qnn", *RUN)
    eq = _equivalence(result)
    assert eq["config"] is None  # the reference is not judged against itself
    e = eq["ep=qnn"]
    assert e["verdict"] == "equivalent" and e["reference"] == "config" and e["figures"]["steps"] == 16
    assert e["route_path"] != e["reference_path"]  # the derived bundle, not the reference again
    assert [b["name"] for b in e["bands"]] == ["noise floor", "precision"]
    assert e["bands"][1]["figures"]["kl_mean"] > 0  # the precision change really changed the reference
    assert "ep=qnn ≈ config: equivalent" in result.stderr and "outside the timed iterations" in result.stderr
    if bundle == TINY_PIPELINE:
        judged = [s["stage"] for s in e["stages"]]
        assert judged == ["embeddings", "context", "lm_head"] and e["unobserved_stages"] == ["iterator"]
    layers = e["layers"]  # both decoder layers read, bit-equal to the reference's, nothing departs
    assert [f["layer"] for f in layers["figures"]] == [0, 1] and layers["first_departing"] is None
    assert all(f["max_abs"] == 0 for f in layers["figures"]) and layers["band"] == "precision"
    assert "layers: bit-identical at every layer" in result.stderr


@pytest.mark.parametrize("bundle", [TINY_FLAT, TINY_PIPELINE], ids=["flat", "pipeline"])
def test_a_perturbed_reference_bundle_is_not_equivalent(bundle, tmp_path):
    ref = perturbed_copy(bundle, tmp_path / "perturbed")
    result = run_winml("perf", bundle, "--route", "config", "--route", "ep=qnn", "--reference-bundle", ref, *RUN)
    eq = _equivalence(result)
    for label in ("config", "ep=qnn"):
        e = eq[label]
        assert e["verdict"] == "not equivalent", e["figures"]
        assert e["reference"] == f"bundle:{ref}" and not e["figures"]["identical"]
        if bundle == TINY_PIPELINE:
            assert e["first_stage"] == "embeddings"  # the perturbed embedding matrix departs first
        assert e["layers"]["first_departing"] == 0  # layer 0's weights moved too
    assert "NOT equivalent" in result.stderr or "≉" in result.stderr


@pytest.mark.parametrize(
    "bundle,layer", [(TINY_FLAT, 0), (TINY_FLAT, 1), (TINY_PIPELINE, 1)], ids=["flat-0", "flat-1", "pipeline-1"]
)
def test_a_reference_perturbed_in_one_layer_names_that_layer(bundle, layer, tmp_path):
    # each weight of that one layer x N(1, 0.3): far outside the int8/fp32 precision band at that layer
    ref = perturbed_copy(bundle, tmp_path / "one-layer", scale=0.3, prefix=f"model.layers.{layer}.")
    result = run_winml("perf", bundle, "--route", "config", "--reference-bundle", ref, *RUN)
    e = _equivalence(result)["config"]
    layers = e["layers"]
    assert e["verdict"] == "not equivalent" and [f["layer"] for f in layers["figures"]] == [0, 1]
    assert layers["first_departing"] == layer and layers["first_differing"] == layer
    # fed the reference's input, that layer alone computes something else: its own error is beyond its band
    assert layers["first_wrong"] == layer and layers["pattern"] == "jump"
    own = [f["local_rel"] > f["local_limit"] for f in layers["figures"]]
    assert own == [k == layer for k in (0, 1)]
    assert layers["first_wrong_stage"] == ("decoder" if bundle == TINY_FLAT else "context/iterator")
    assert f"layer {layer} ({layers['first_wrong_stage']}) computes something else" in result.stderr


def test_no_equivalence_turns_it_off():
    result = run_winml("perf", TINY_FLAT, "--route", "config", "--route", "ep=qnn", "--no-equivalence", *RUN)
    assert set(_equivalence(result).values()) == {None}
    assert "≈" not in result.stderr


def test_a_reference_bundle_without_a_config_is_exit_2(tmp_path):
    result = run_winml("perf", TINY_FLAT, "--reference-bundle", tmp_path, *RUN)
    assert result.returncode == 2 and "--reference-bundle" in result.stderr and "genai_config.json" in result.stderr


def test_reference_route_judges_the_other_routes_against_it():
    result = run_winml("perf", TINY_FLAT, "--route", "config", "--route", "ep=qnn", "--reference", "ep=qnn", *RUN)
    eq = _equivalence(result)
    assert eq["ep=qnn"] is None  # the reference is not judged against itself
    e = eq["config"]
    assert e["reference"] == "ep=qnn" and e["route_path"] == str(TINY_FLAT)
    assert e["reference_path"] != e["route_path"] and "_compiled" in e["reference_path"]  # ep=qnn's derived folder
    assert "config ≈ ep=qnn" in result.stderr and "against ep=qnn" in result.stderr


def test_a_reference_that_is_not_one_of_the_routes_is_exit_2():
    result = run_winml("perf", TINY_FLAT, "--route", "config", "--route", "ep=qnn", "--reference", "ep=webgpu", *RUN)
    assert result.returncode == 2 and "--reference ep=webgpu" in result.stderr and "config, ep=qnn" in result.stderr


NPU = TINY_FLAT.parent / "tiny-qwen2-npu"  # context/iterator on QNN's HTP emulator, fp16 precision asked
NPU_RUN = ("--invocations", "1", "--max-new-tokens", "4", "--warmup", "1", "--iterations", "1", "--no-store")
NPU_RUN = (*NPU_RUN, "--format", "json", "-q")


def test_ep_cpu_against_the_htp_emulator_is_judged_in_the_fp16_band_measured_on_the_cpu_ep():
    result = run_winml("perf", NPU, "--route", "config", "--route", "ep=cpu", *NPU_RUN)
    e = _equivalence(result)["ep=cpu"]
    precision = e["bands"][1]
    # the emulator ignores enable_htp_fp16_precision, so the band is the same change made on the CPU EP
    assert (
        "fp32 -> fp16 (converted), both on the CPU EP" in precision["change"]
        and "changed nothing" in precision["change"]
    )
    assert precision["figures"]["kl_mean"] > 0 and not e["figures"]["identical"]
    assert e["verdict"] == "within precision tolerance", (e["figures"], precision)
    layers = e["layers"]  # each layer's departure sits inside the fp16 band's at that layer
    assert [f["layer"] for f in layers["figures"]] == [0, 1] and layers["first_departing"] is None
    assert all(0 < f["max_rel"] <= f["limit"] for f in layers["figures"])
    assert layers["unobserved"] == ["iterator: takes one token per run (static shapes), no full-sequence pass"]
    assert "HTP fp16 (enable_htp_fp16_precision 1)" in e["reference_precision_class"]


def _static_prompt_copy(dst: Path, length: int) -> Path:
    """A copy of tiny-qwen2-npu whose context stage takes ``length`` prompt tokens, not 16: its file's
    declared shapes rewritten (the graph reads the length from its inputs)."""
    import onnx

    shutil.copytree(NPU, dst, ignore=shutil.ignore_patterns("_compiled"))
    path = dst / "transformer_context.onnx"
    model = onnx.load(str(path), load_external_data=False)
    for value in (*model.graph.input, *model.graph.output, *model.graph.value_info):
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_value == 16:
                dim.dim_value = length
    onnx.save(model, str(path))
    return dst


def test_output_checks_feed_a_static_prompt_stage_its_own_length(tmp_path):
    """--check-outputs on a bundle whose context stage takes 12 tokens: the check's prompt is 12
    tokens, as the equivalence check's is; with the check's usual 16 the stage refused the prompt."""
    bundle = _static_prompt_copy(tmp_path / "npu12", 12)
    result = run_winml("perf", bundle, "--route", "config", "--route", "ep=cpu", "--check-outputs", *NPU_RUN)
    assert result.returncode == 0, result.stderr[-3000:]
    (checked,) = [c for c in result.json()["cells"] if c["route"]["label"] == "ep=cpu"]
    check = checked["route"]["output_check"]
    assert check["prompt_tokens"] == 12
    assert len(check["config_token_ids"]) == len(check["route_token_ids"]) == check["new_tokens"] > 0


def test_output_checks_with_only_the_config_route_say_there_is_nothing_to_check():
    """--check-outputs where every route runs the bundle's own files (here ep=cpu on a CPU bundle, measured
    as the config route): said on stderr, not passed over in silence, and no record carries a check."""
    result = run_winml("perf", TINY_FLAT, "--route", "config", "--route", "ep=cpu", "--check-outputs", *RUN)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "note: --check-outputs: every route runs the bundle's own files" in result.stderr
    assert all(c["route"].get("output_check") is None for c in result.json()["cells"])


def test_qnn_compiled_route_is_judged_and_its_epcontext_layers_are_unobserved():
    result = run_winml("perf", NPU, "--route", "config", "--route", "ep=qnn", "--compile", *NPU_RUN)
    e = _equivalence(result)["ep=qnn"]
    assert e["verdict"] == "equivalent" and e["route_path"] != e["reference_path"]
    assert e["layers"]["figures"] == [] and any("EPContext" in u for u in e["layers"]["unobserved"])
    assert "compiled (EPContext)" in e["precision_class"]


def deep_copy(src: Path, dst: Path, n_layers: int) -> Path:
    """A copy of the flat tiny bundle with ``n_layers`` decoder layers: layer 1's nodes and weights cloned
    for layers 1..n-1 (named as the model builder names them), the final norm after the last, KV inputs
    and outputs per layer, genai_config's num_hidden_layers set. Depth as Qwen2.5-0.5B's, tiny widths."""
    import copy
    import json

    import onnx

    from winml_perf.bundle.variants import _load_with_data

    def rename(text: str, k: int) -> str:
        text = text.replace("/model/layers.0/", "\0").replace("/model/layers.1/", f"/model/layers.{k}/")
        text = text.replace("model.layers.1.", f"model.layers.{k}.").replace(
            "past_key_values.1.", f"past_key_values.{k}."
        )
        return text.replace("present.1.", f"present.{k}.").replace("\0", f"/model/layers.{k - 1}/")

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_compiled", "model.onnx*"))
    model = _load_with_data(src / "model.onnx")
    g = model.graph
    layer1 = [x for x in g.node if x.name.startswith("/model/layers.1/")]
    final = next(x for x in g.node if "final_norm_layernorm" in x.name)
    head = [x for x in g.node if x.name.startswith("/lm_head")]
    nodes = [x for x in g.node if x not in layer1 and x is not final and x not in head] + layer1
    weights = [i for i in g.initializer if i.name.startswith("model.layers.1.")]
    kv = [v for coll in (g.input, g.output) for v in coll if ".1." in v.name]
    for k in range(2, n_layers):
        for node in layer1:
            c = copy.deepcopy(node)
            c.name, c.input[:], c.output[:] = (
                rename(c.name, k),
                [rename(t, k) for t in c.input],
                [rename(t, k) for t in c.output],
            )
            nodes.append(c)
        for w in weights:
            c = copy.deepcopy(w)
            c.name = rename(w.name, k)
            g.initializer.append(c)
        for v in kv:
            c = copy.deepcopy(v)
            c.name = rename(v.name, k)
            (g.input if v in g.input else g.output).append(c)
    last = f"/model/layers.{n_layers}/"
    final.name = final.name.replace("/model/layers.2/", last)
    final.input[:] = [t.replace("/model/layers.1/", f"/model/layers.{n_layers - 1}/") for t in final.input]
    final.input[2] = final.input[2].replace("model.layers.2.", f"model.layers.{n_layers}.")
    for i in g.initializer:
        i.name = i.name.replace("model.layers.2.final", f"model.layers.{n_layers}.final")
    final.output[:] = [t.replace("/model/layers.2/", last) for t in final.output]
    for node in head:
        node.input[:] = [t.replace("/model/layers.2/", last) for t in node.input]
    del g.node[:]
    g.node.extend([*nodes, final, *head])
    onnx.save(model, str(dst / "model.onnx"), save_as_external_data=True, location="model.onnx.data")
    config = json.loads((dst / "genai_config.json").read_text())
    config["model"]["decoder"]["num_hidden_layers"] = n_layers
    (dst / "genai_config.json").write_text(json.dumps(config, indent=4))
    return dst


def test_a_wrong_layer_deep_in_a_12_layer_model_is_named(tmp_path):
    deep = deep_copy(TINY_FLAT, tmp_path / "deep", 12)
    ref = perturbed_copy(deep, tmp_path / "deep-7", scale=0.3, prefix="model.layers.7.")
    result = run_winml("perf", deep, "--route", "config", "--reference-bundle", ref, *RUN)
    e = _equivalence(result)["config"]
    layers = e["layers"]
    assert [f["layer"] for f in layers["figures"]] == list(range(12))  # no layer skipped
    assert layers["first_differing"] == 7 and layers["first_wrong"] == 7 and layers["pattern"] == "jump"
    assert e["verdict"] == "not equivalent" and "layer 7 (decoder) computes something else" in result.stderr


def test_a_reference_bundle_on_the_same_route_asks_if_it_is_the_same_model(tmp_path):
    """Issue 34: another bundle on the same route (same EP, options and precision) is judged by the noise
    floor, never the precision band: one layer's o_proj scales moved by ~2 % is "not the same model",
    named at that layer, where the precision band of random weights would have let it pass."""
    ref = perturbed_copy(TINY_FLAT, tmp_path / "o-proj", scale=0.02, prefix="model.layers.1.attn.o_proj")
    result = run_winml("perf", TINY_FLAT, "--route", "config", "--reference-bundle", ref, *RUN)
    e = _equivalence(result)["config"]
    assert e["question"] == "same model" and e["verdict"] == "not equivalent", e["figures"]
    assert e["layers"]["band"] == "noise floor" and e["layers"]["first_departing"] == 1
    assert "not the same model" in result.stderr and "asked: is this the same model?" in result.stderr
    assert "within precision tolerance" not in result.stderr
