"""Does the equivalence check tell a changed model from the same one, and another EP from a broken model?

Makes changed copies of a bundle built by `winml bundle from-gguf` (one layer's attention or MLP removed,
one matrix x2 or x1.05, every MatMulNBits scale x1.03, every float weight x N(1, 0.01)) and runs
`winml perf COPY --route config --reference-bundle BUNDLE` on each (the question "is this the same
model?"), then the routes given with --routes against the bundle's config (the question "is the
difference what precision does?"), at several prompt seeds, and prints one markdown table.

    python benchmarks/equivalence_discrimination.py BUNDLE [--seeds 0,1,2] [--routes ep=webgpu,ep=openvino] [-o table.md]

With ``--copy-accuracy-level 0`` each copy also runs its MatMulNBits on float activations: a changed
model on another precision, which the precision question must still catch (its layer jump, JUMP_FACTOR).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

RUN = ("--prompt-tokens", "16", "--max-new-tokens", "4", "--iterations", "1", "--invocations", "1", "--warmup", "0")


def _scale(
    pattern: Callable[[str], bool], factor: float
) -> Callable[[str, np.ndarray, np.random.Generator], np.ndarray]:
    def change(name: str, value: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return value * factor if pattern(name) else value

    return change


def _matrix(layer: int, part: str) -> Callable[[str], bool]:
    """A linear weight's scales and Q4_1 block offsets (scaling both scales the matrix's values)."""
    prefix = f"/model/layers.{layer}/{part}."
    return lambda name: name.startswith(prefix) and name.endswith(("weight_scales", "block_offsets"))


def _noise(name: str, value: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if value.dtype.kind != "f" or name in ("cos_cache", "sin_cache"):
        return value
    return (value * (1 + 0.01 * rng.standard_normal(value.shape))).astype(value.dtype)


def changes(layers: int) -> dict[str, Callable]:
    mid, late = layers // 2, layers * 2 // 3
    every_scale = _scale(lambda n: n.endswith(("weight_scales", "block_offsets")), 1.03)
    return {
        "layer 0 attention removed": _scale(_matrix(0, "attn/o_proj"), 0.0),
        f"layer {mid} attention removed": _scale(_matrix(mid, "attn/o_proj"), 0.0),
        f"layer {late} attention removed": _scale(_matrix(late, "attn/o_proj"), 0.0),
        f"layer {mid} MLP removed": _scale(_matrix(mid, "mlp/down_proj"), 0.0),
        f"layer {late} o_proj x 2": _scale(_matrix(late, "attn/o_proj"), 2.0),
        "layer 5 down_proj x 1.05": _scale(_matrix(5, "mlp/down_proj"), 1.05),
        "every MatMulNBits scale x 1.03": every_scale,
        "every float weight x N(1, 0.01)": _noise,
    }


def changed_copy(bundle: Path, out: Path, change: Callable, accuracy_level: int | None = None) -> Path:
    """A copy of ``bundle`` with ``change`` applied to its initializers; with ``accuracy_level``, every
    MatMulNBits also computes at that level (another precision than the bundle's)."""
    import onnx
    from onnx import helper, numpy_helper

    shutil.copytree(bundle, out, ignore=shutil.ignore_patterns("_compiled"))
    model = onnx.load(str(out / "model.onnx"))
    rng = np.random.default_rng(0)
    for init in model.graph.initializer:
        value = numpy_helper.to_array(init)
        new = change(init.name, value, rng)
        if new is not value:
            init.CopyFrom(numpy_helper.from_array(np.asarray(new, dtype=value.dtype), init.name))
    if accuracy_level is not None:
        for node in model.graph.node:
            if node.op_type == "MatMulNBits":
                kept = [a for a in node.attribute if a.name != "accuracy_level"]
                del node.attribute[:]
                node.attribute.extend([*kept, helper.make_attribute("accuracy_level", accuracy_level)])
    (out / "model.onnx.data").unlink()
    onnx.save(model, str(out / "model.onnx"), save_as_external_data=True, location="model.onnx.data")
    return out


def judge(bundle: Path, args: list[str], seed: int) -> dict:
    cmd = [sys.executable, "-m", "winml_perf", "perf", str(bundle), *args, *RUN, "--seed", str(seed)]
    cmd += ["--no-store", "--format", "json", "-q"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    cells = json.loads(done.stdout)["cells"]
    return {c["route"]["label"]: c["route"].get("equivalence") for c in cells}


def row(label: str, per_seed: list[dict | None]) -> str:
    def one(e: dict | None) -> str:
        if not e or "verdict" not in e:
            return f"error: {e.get('error') if e else '?'}"
        layers = e.get("layers") or {}
        wrong, departing = layers.get("first_wrong"), layers.get("first_departing")
        named = f"{wrong} (jump)" if wrong is not None else f"{departing} (growth)" if departing is not None else None
        kl = e["figures"]["kl_mean"]
        verdict = (
            "not the same model"
            if e.get("question") == "same model" and e["verdict"] == "not equivalent"
            else e["verdict"]
        )
        return f"{verdict}; KL {kl:.3g}; layer {named if named is not None else 'none'}"

    return f"| {label} | " + " | ".join(one(e) for e in per_seed) + " |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--routes", default="")
    parser.add_argument("--only", default="", help="comma-separated change names to run (default: all)")
    parser.add_argument(
        "--copy-accuracy-level",
        type=int,
        help="every copy also computes MatMulNBits at this level (0: float activations), so each is judged"
        " by the precision question (another precision than the bundle's) instead of the same-model one;"
        " adds the unchanged copy at that level as a control",
    )
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    layers = json.loads((args.bundle / "genai_config.json").read_text())["model"]["decoder"]["num_hidden_layers"]
    lines = ["| copy or route | " + " | ".join(f"seed {s}" for s in seeds) + " |", "|---" * (len(seeds) + 1) + "|"]
    with tempfile.TemporaryDirectory(prefix="winml-discrimination-") as tmp:
        todo = changes(layers)
        if args.copy_accuracy_level is not None:
            todo = {"no change (the accuracy level alone)": lambda name, value, rng: value, **todo}
        for name, change in todo.items():
            if args.only and name not in args.only.split(","):
                continue
            copy = changed_copy(args.bundle, Path(tmp) / "copy", change, args.copy_accuracy_level)
            results = [judge(copy, ["--route", "config", "--reference-bundle", str(args.bundle)], s) for s in seeds]
            lines.append(row(name, [r.get("config", r) for r in results]))
            print(lines[-1], file=sys.stderr, flush=True)
            shutil.rmtree(copy)
    for route in [r for r in args.routes.split(",") if r]:
        results = [judge(args.bundle, ["--route", "config", "--route", route], s) for s in seeds]
        lines.append(row(route, [r.get(route, r) for r in results]))
        print(lines[-1], file=sys.stderr, flush=True)
    text = "\n".join(lines) + "\n"
    if args.output:
        args.output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
