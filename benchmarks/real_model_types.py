"""The real model in other GGUF tensor types: F16, Q8_0 and Q4_0 files written from its own tensors, each
converted by `winml bundle from-gguf` and checked against llama.cpp on that same file.

Each file keeps the Q4_1 file's metadata (tokenizer, chat template, hyper-parameters); its quantized
matrices (Q4_1, and the Q8_0 embedding) are dequantized with `gguf` and written as the target type
(F16 as float16; Q8_0 and Q4_0 quantized by `gguf.quants`, llama.cpp's reference quantizers); the F32
norms stay F32. Then, per file: llama.cpp (llama-cpp-python) and onnxruntime-genai on the converted
bundle, greedy, 32 new tokens on a few prompts (where the two part), and teacher-forced logits over
llama.cpp's continuation (top-1 agreement, KL), as benchmarks/llamacpp_oracle.py does for the Q4_1 file.

    python benchmarks/real_model_types.py GGUF WORKDIR [--types F16,Q8_0,Q4_0] [-o table.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llamacpp_oracle import bundle_logits, compare_logits, first_difference, genai_greedy, llama_greedy  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "import numpy as np\n\ndef softmax(x):",
    "1, 2, 3, 4, 5,",
    "Photosynthesis is the process by which",
]
NEW_TOKENS = 32


def write_as(source: Path, target: Path, type_name: str) -> None:
    """A copy of ``source`` whose quantized matrices are stored as ``type_name``."""
    import gguf

    qtype = gguf.GGMLQuantizationType[type_name]
    reader = gguf.GGUFReader(str(source))
    arch = str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    writer = gguf.GGUFWriter(str(target), arch)
    for field in reader.fields.values():
        if (
            field.name == gguf.Keys.General.ARCHITECTURE
            or field.name.startswith("GGUF.")
            or field.name == "general.file_type"
        ):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    for tensor in reader.tensors:
        if tensor.tensor_type == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(tensor.name, np.asarray(tensor.data, np.float32).reshape(tuple(reversed(tensor.shape))))
            continue
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        if qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(tensor.name, values.astype(np.float16))
        else:
            writer.add_tensor(tensor.name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def check(gguf_path: Path, bundle: Path, threads: int) -> dict:
    """llama.cpp on the file against the bundle: greedy tokens and teacher-forced logits."""
    import llama_cpp
    import onnxruntime as ort
    import onnxruntime_genai as og

    llm = llama_cpp.Llama(str(gguf_path), n_ctx=512, n_threads=threads, logits_all=True, verbose=False)
    model = og.Model(str(bundle))
    config = json.loads((bundle / "genai_config.json").read_text())
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(bundle / "model.onnx"), options)
    cases = []
    for text in PROMPTS:
        ids = [int(t) for t in llm.tokenize(text.encode(), add_bos=False, special=True)]
        theirs, logits = llama_greedy(llm, ids, NEW_TOKENS)
        ours = genai_greedy(model, ids, NEW_TOKENS)
        forced = bundle_logits(session, config, ids + theirs)
        cases.append(
            {
                "text": text,
                "first_difference": first_difference(ours, theirs),
                **compare_logits(logits[: len(forced)], forced),
            }
        )
    return {
        "parted": [c["first_difference"] for c in cases],
        "top1_min": min(c["top1_agreement"] for c in cases),
        "kl_mean": float(np.mean([c["kl_mean"] for c in cases])),
        "kl_max": max(c["kl_max"] for c in cases),
        "text": llm.detokenize(
            llama_greedy(llm, [int(t) for t in llm.tokenize(PROMPTS[0].encode(), add_bos=False)], 12)[0]
        ).decode(errors="replace"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf", type=Path)
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--types", default="F16,Q8_0,Q4_0")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = [
        f"{len(PROMPTS)} prompts x {NEW_TOKENS} greedy tokens; teacher-forced over llama.cpp's continuation;"
        f" {args.threads} threads",
        "",
        "| file | size MB | convert s | bundle's weights | greedy: step where they part (per prompt) | top-1 min | KL mean / max |",
        "|---|---|---|---|---|---|---|",
    ]
    for type_name in args.types.split(","):
        target = args.workdir / f"smollm2-{type_name}.gguf"
        bundle = args.workdir / f"smollm2-{type_name}"
        t0 = time.perf_counter()
        write_as(args.gguf, target, type_name)
        print(f"{type_name}: wrote {target} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        t0 = time.perf_counter()
        convert = [sys.executable, "-m", "winml_perf", "bundle", "from-gguf", str(target), "-o", str(bundle), "--force"]
        subprocess.run(convert, check=True, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        weights = json.loads((bundle / "gguf.json").read_text())["weights"]
        got = check(target, bundle, args.threads)
        parted = ", ".join("-" if k is None else str(k) for k in got["parted"])
        rows.append(
            f"| {type_name} | {target.stat().st_size / 1e6:.0f} | {seconds:.1f} | {'; '.join(f'{n} {k}' for k, n in weights.items())}"
            f" | {parted} | {got['top1_min']:.3f} | {got['kl_mean']:.4f} / {got['kl_max']:.3f} |"
        )
        print(f"{type_name}: {rows[-1]}  llama.cpp says: {got['text']!r}", file=sys.stderr)
    text = "\n".join(rows) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
