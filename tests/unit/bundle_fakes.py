"""Hand-made bundle folders for the routing / derive tests (fake .onnx bytes: nothing here is loaded)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from tests.bundle_bytes import tree_state
from winml_perf.ep.devices import Target

FLAT_QNN = {
    "model": {
        "type": "qwen2",
        "future_model_key": {"kept": [1, 2]},
        "decoder": {
            "filename": "model.onnx",
            "session_options": {
                "log_id": "og",
                "provider_options": [{"qnn": {"backend_path": "libQnnHtp.so", "htp_performance_mode": "burst"}}],
            },
            "head_size": 32,
        },
    },
    "search": {"max_length": 64},
}

FLAT_CPU = {
    "model": {"type": "qwen2", "decoder": {"filename": "model.onnx", "session_options": {"provider_options": []}}}
}

_STAGES = {
    "embeddings": {"filename": "embeddings.onnx", "session_options": {"provider_options": []}, "inputs": ["input_ids"]},
    "context": {
        "filename": "transformer.onnx",
        "run_on_token_gen": False,
        "future_stage_key": "kept",
        "session_options": {"intra_op_num_threads": 1, "provider_options": [{"QNN": {"backend_path": "libQnnHtp.so"}}]},
    },
    "iterator": {
        "filename": "transformer.onnx",
        "run_on_prompt": False,
        "session_options": {"provider_options": [{"QNN": {"backend_path": "libQnnHtp.so"}}]},
    },
    "lm_head": {"filename": "lm_head.onnx", "is_lm_head": True},  # inherits the decoder's session_options
}


def pipeline_config(form: str = "list") -> dict:
    stages = copy.deepcopy(_STAGES)
    return {
        "model": {
            "type": "decoder-pipeline",
            "decoder": {
                "session_options": {"log_id": "og", "provider_options": []},
                "pipeline": [stages] if form == "list" else stages,
                "future_decoder_key": True,
            },
        },
        "search": {"max_length": 64},
    }


def fake_model_bytes(payload: bytes) -> bytes:
    """Bytes framed as a ModelProto holding one graph field (whole, for onnxfile/integrity.py), not a model."""
    length, varint = len(payload), bytearray()
    while True:
        byte, length = length & 0x7F, length >> 7
        varint.append(byte | (0x80 if length else 0))
        if not length:
            break
    return b"\x3a" + bytes(varint) + payload


def unframed(data: bytes) -> bytes:
    """The payload of ``fake_model_bytes``."""
    pos = 1
    while data[pos] & 0x80:
        pos += 1
    return data[pos + 1 :]


def make_bundle(root: Path, config: dict, name: str = "b", extra: dict[str, bytes] | None = None) -> Path:
    """A bundle folder holding ``config`` and a small fake file for every filename it names."""
    bundle = root / name
    bundle.mkdir(parents=True)
    (bundle / "genai_config.json").write_text(json.dumps(config, indent=4))
    names = set()
    decoder = config["model"]["decoder"]
    if "pipeline" in decoder:
        groups = decoder["pipeline"] if isinstance(decoder["pipeline"], list) else [decoder["pipeline"]]
        names = {s["filename"] for g in groups for s in g.values()}
    else:
        names = {decoder["filename"]}
    for n in sorted(names):
        (bundle / n).write_bytes(fake_model_bytes(b"fake onnx " + n.encode() * 50))
        (bundle / f"{n}.data").write_bytes(b"\0" * 4096)
    (bundle / "tokenizer.json").write_text("{}")
    for rel, data in (extra or {}).items():
        (bundle / rel).parent.mkdir(parents=True, exist_ok=True)
        (bundle / rel).write_bytes(data)
    return bundle


def tree_digest(folder: Path) -> dict[str, tuple]:
    """Bytes, mtimes, modes and links of every file under ``folder`` (outside _compiled/): proves a source bundle is untouched."""
    return tree_state(folder)


def ep_target(ep: str, device: str | None = None) -> Target:
    from winml_perf.ep import table as eps

    canonical = eps.normalize_ep_name(ep)
    return Target("ep", ep, device, canonical, device or eps.EPS[canonical].home_device)


CONFIG_TARGET = Target("config", None, None, None, None)


def cpu_compiles(monkeypatch) -> None:
    """CPU's table entry says it compiles, so a CPU route makes compile jobs (the plan carries the entry)."""
    import dataclasses

    from winml_perf.ep import table as eps

    cpu = eps.CPU_EP
    monkeypatch.setitem(eps.EPS, cpu, dataclasses.replace(eps.EPS[cpu], compiles=True))


def derive_worker(bundle: str) -> tuple[str, str]:
    """Run in a spawned process by the concurrency test: derive the cpu route of ``bundle``."""
    from winml_perf.bundle.prepare import prepare_route

    prepared = prepare_route(Path(bundle), ep_target("cpu"), require_available=False)
    return str(prepared.path), prepared.cache
