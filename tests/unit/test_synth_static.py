"""`winml bundle synth --static-npu`: static context/iterator files on QNN, CPU ends, one weights file."""

from __future__ import annotations

import importlib.util
import json

import pytest

from winml_perf.onnxfile.header import input_shapes
from winml_perf.support.errors import UsageError
from winml_perf.synth.transformer import SynthSpec, check_spec, synthesize

SYNTH_MODULES = ("torch", "transformers", "tokenizers", "safetensors", "onnx", "onnx_ir")
missing = [m for m in SYNTH_MODULES if importlib.util.find_spec(m) is None]
needs_synth = pytest.mark.skipif(
    bool(missing), reason=f"the synth extra is not installed ({', '.join(missing)}): pip install -e '.[synth]'"
)


@pytest.mark.parametrize("length, kv", [(1, 128), (128, 128), (200, 128)])
def test_a_prompt_length_outside_the_kv_buffer_is_refused(length, kv):
    with pytest.raises(UsageError, match="--prompt-length"):
        check_spec(SynthSpec(static_npu=True, prompt_length=length, kv_length=kv))


@needs_synth
def test_static_npu_bundle_has_fixed_shapes_and_qnn_stages(tmp_path):
    import onnx

    out = tmp_path / "npu"
    synthesize(
        SynthSpec(
            precision="fp32",
            static_npu=True,
            prompt_length=8,
            kv_length=40,
            soc_model="73",
            overrides={"num_hidden_layers": 1},
        ),
        out,
        log=lambda m: None,
    )
    cfg = json.loads((out / "genai_config.json").read_text())
    stages = cfg["model"]["decoder"]["pipeline"][0]
    assert (
        stages["context"]["filename"] == "transformer_context.onnx"
        and stages["iterator"]["filename"] == "transformer_iterator.onnx"
    )
    assert stages["context"]["session_options"]["provider_options"] == [
        {"qnn": {"backend_type": "htp", "soc_model": "73", "enable_htp_fp16_precision": "1"}}
    ]
    assert stages["embeddings"]["session_options"]["provider_options"] == []
    assert cfg["model"]["context_length"] == 40 and cfg["search"]["max_length"] == 40
    assert not (out / "transformer.onnx").exists()

    context, iterator = input_shapes(out / "transformer_context.onnx"), input_shapes(out / "transformer_iterator.onnx")
    assert context["inputs_embeds"] == (1, 8, 128) and context["attention_mask"] == (1, 8)
    assert iterator["inputs_embeds"] == (1, 1, 128) and iterator["attention_mask"][0] == 1
    assert context["past_key_values.0.key"][:3] == (1, 2, 40)
    for name in ("transformer_context.onnx", "transformer_iterator.onnx"):
        model = onnx.load(str(out / name), load_external_data=False)
        assert "SkipSimplifiedLayerNormalization" not in {n.op_type for n in model.graph.node}
        locations = {e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"}
        assert locations == {"transformer.onnx.data"}  # both stages share one weights file
    assert json.loads((out / "synth.json").read_text())["static_npu"] == {
        "prompt_length": 8,
        "kv_length": 40,
        "soc_model": "73",
    }
