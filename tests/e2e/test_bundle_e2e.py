"""`winml bundle show | prepare | clean` for real on copies of the committed tiny bundles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.bundle_fakes import tree_digest

pytestmark = pytest.mark.e2e


def test_show_table_and_json(winml, bundle_copy, tiny_pipeline):
    bundle = bundle_copy(tiny_pipeline)
    before = tree_digest(bundle)
    res = winml("bundle", "show", bundle)
    assert res.returncode == 0, res.stderr
    for word in ("embeddings", "context", "iterator", "lm_head", "transformer.onnx", "P-", "-T", "cpu (config)"):
        assert word in res.stdout
    res = winml("bundle", "show", bundle, "--ep", "qnn", "--stages", "context,iterator", "--format", "json")
    assert res.returncode == 0, res.stderr
    after = {s["stage"]: s["ep_after"] for s in res.json()["stages"]}
    assert after == {
        "embeddings": "CPUExecutionProvider",
        "context": "QNNExecutionProvider",
        "iterator": "QNNExecutionProvider",
        "lm_head": "CPUExecutionProvider",
    }
    assert not (bundle / "_compiled").exists() and tree_digest(bundle) == before


def test_prepare_cpu_pipeline_loads_and_hits_cache(winml, bundle_copy, tiny_pipeline):
    import onnxruntime_genai as og

    bundle = bundle_copy(tiny_pipeline)
    before = tree_digest(bundle)
    res = winml("bundle", "prepare", bundle, "--ep", "cpu")
    assert res.returncode == 0, res.stderr
    derived = Path(res.stdout.strip())
    assert derived.parent == bundle / "_compiled" and derived.name.startswith("cpu-")
    cfg = json.loads((derived / "genai_config.json").read_text())
    stages = cfg["model"]["decoder"]["pipeline"][0]
    assert set(stages) == {"embeddings", "context", "iterator", "lm_head"}
    assert all(s["session_options"]["provider_options"] == [] for s in stages.values())
    model = og.Model(og.Config(str(derived)))  # the derived pipeline really loads
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=6, do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens([1, 5, 7])
    gen.generate_next_token()
    assert len(gen.get_sequence(0)) == 4
    del gen, model
    again = winml("bundle", "prepare", bundle, "--ep", "cpu", "--format", "json")
    assert again.returncode == 0 and again.json()["cache"] == "hit" and again.json()["path"] == str(derived)
    assert tree_digest(bundle) == before


def test_prepare_flat_by_device_then_clean(winml, bundle_copy, tiny_flat):
    bundle = bundle_copy(tiny_flat)
    before = tree_digest(bundle)
    res = winml("bundle", "prepare", bundle, "--device", "cpu", "--format", "json")
    assert res.returncode == 0, res.stderr
    out = res.json()
    assert out["cache"] == "miss" and out["requested"] == "device=cpu" and out["stages"][0]["stage"] == "decoder"
    cfg = json.loads((Path(out["path"]) / "genai_config.json").read_text())
    assert cfg["model"]["decoder"]["session_options"]["provider_options"] == []
    res = winml("bundle", "clean", bundle)
    assert res.returncode == 0 and not (bundle / "_compiled").exists()
    assert tree_digest(bundle) == before


def test_clean_of_the_folder_above_the_bundles_or_a_file_inside_one_is_refused(winml, bundle_copy, tiny_flat):
    """`bundle clean bundles/` said 'nothing to remove' and exited 0 while each bundle kept its _compiled/;
    `bundle clean BUNDLE/genai_config.json` said the file does not exist. Both exit 2 saying what to pass."""
    bundle = bundle_copy(tiny_flat)
    assert winml("bundle", "prepare", bundle, "--device", "cpu").returncode == 0
    above = winml("bundle", "clean", bundle.parent)
    assert above.returncode == 2, above.stderr
    assert f"{bundle.parent} is a folder of 1 bundle(s), not a bundle: {bundle.name}" in above.stderr
    assert f"pass one of them, e.g. {bundle}" in above.stderr
    inside = winml("bundle", "clean", bundle / "genai_config.json")
    assert inside.returncode == 2 and "is not a folder; pass the bundle folder, not a file inside it" in inside.stderr
    assert (bundle / "_compiled").is_dir()  # nothing was removed by either
    assert winml("bundle", "clean", bundle).returncode == 0 and not (bundle / "_compiled").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (("show", "{b}", "--ep", "warpdrive"), "unknown execution provider"),
        (("show", "{b}", "--ep", "cpu", "--stages", "nope"), "not a stage"),
        (("prepare", "{b}"), "needs --ep"),
    ],
)
def test_bad_input_exits_2(winml, bundle_copy, tiny_pipeline, args, needle):
    bundle = bundle_copy(tiny_pipeline)
    res = winml("bundle", *[a.format(b=bundle) for a in args])
    assert res.returncode == 2 and needle in res.stderr


def test_dotdot_filename_refused_before_writing(winml, bundle_copy, tiny_pipeline):
    bundle = bundle_copy(tiny_pipeline)
    raw = json.loads((bundle / "genai_config.json").read_text())
    raw["model"]["decoder"]["pipeline"][0]["lm_head"]["filename"] = "../lm_head.onnx"
    (bundle / "genai_config.json").write_text(json.dumps(raw))
    res = winml("bundle", "prepare", bundle, "--ep", "cpu")
    assert res.returncode == 2 and "'..'" in res.stderr and not (bundle / "_compiled").exists()
