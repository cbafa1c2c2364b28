#!/usr/bin/env bash
# The GPU run of issue 7 on an NVIDIA machine with no package index (the lent H200):
# config route (CPU EP) vs --ep webgpu vs --ep webgpu --stages context,iterator, interleaved.
#
# Needs, in the working tree: .whl/ (cp312 wheels: onnxruntime 1.31.1, onnxruntime-genai 0.18.0,
# onnxruntime-ep-webgpu 0.4.0, onnx-ir 1.1.0, sqlalchemy, jsonschema + deps) and .gl/ (Debian's
# libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 .debs; NVIDIA's Vulkan ICD needs
# the GL loaders too). torch, transformers, onnx, tokenizers, pandas, typer... are on the image.
#
# Usage: benchmarks/gpu/h200_webgpu.sh smoke|measure|overhead|explain OUTDIR
#   explain (issue 16): `perf --explain` of config vs ep=webgpu on the pipeline and on the flat bundle;
#   writes explain-{pipeline,flat}.json (run records, each cell with its `explain` section) and
#   explain-{pipeline,flat}.txt (the tables, each route's breakdown, the difference to config).
set -euo pipefail
step=${1:?smoke|measure|overhead|explain}
out=${2:?output folder}
mkdir -p "$out"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export WINML_PERF_STORE="$out/gpu.db"
winml() { python3 -m winml_perf "$@"; }
bundle=/tmp/q05-pipeline
routes=(--route config --route ep=webgpu --route "ep=webgpu;stages=context,iterator")

case "$step" in
  smoke)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    winml devices
    winml perf bundles/tiny-qwen2-pipeline "${routes[@]}" --prompt-tokens 16 --max-new-tokens 8 --iterations 2 --check-outputs
    ;;
  measure)
    [ -d "$bundle" ] || winml bundle synth -o "$bundle" --preset qwen2.5-0.5b -p int4 --pipeline --quantize-lm-head --force
    winml devices --format json > "$out/devices.json"
    winml bundle show "$bundle" --ep webgpu --placement | tee "$out/placement.txt"
    winml perf "$bundle" "${routes[@]}" --prompt-tokens 128 --max-new-tokens 128 --warmup 2 --iterations 8 \
      --check-outputs -o "$out/run.json" | tee "$out/perf.txt"
    winml compare routes --store "$out/gpu.db" | tee "$out/compare.txt"
    ;;
  overhead)
    flat=/tmp/q05-flat
    [ -d "$flat" ] || winml bundle synth -o "$flat" --preset qwen2.5-0.5b -p int4 --force
    winml perf "$flat" --route config --route ep=webgpu --prompt-tokens 128 --max-new-tokens 128 --warmup 2 \
      --iterations 6 -o "$out/flat-run.json" | tee "$out/flat-perf.txt"
    python3 benchmarks/bench_overhead.py --bundle "$flat" --pairs 16 --max-time 60 --json "$out/overhead.json" \
      | tee "$out/overhead.txt"
    ;;
  explain)
    flat=/tmp/q05-flat
    [ -d "$bundle" ] || winml bundle synth -o "$bundle" --preset qwen2.5-0.5b -p int4 --pipeline --quantize-lm-head --force
    [ -d "$flat" ] || winml bundle synth -o "$flat" --preset qwen2.5-0.5b -p int4 --force
    for kind in pipeline flat; do
      path=$bundle; [ "$kind" = flat ] && path=$flat
      winml perf "$path" --route config --route ep=webgpu --prompt-tokens 128 --max-new-tokens 128 --warmup 2 \
        --iterations 4 --explain -o "$out/explain-$kind.json" | tee "$out/explain-$kind.txt"
    done
    ;;
esac
