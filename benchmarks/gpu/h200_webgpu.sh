#!/usr/bin/env bash
# The GPU run of issue 7 on an NVIDIA machine with no package index (the lent H200):
# config route (CPU EP) vs --ep webgpu vs --ep webgpu --stages context,iterator, interleaved.
#
# Needs, in the working tree: .whl/ (cp312 wheels: onnxruntime 1.31.1, onnxruntime-genai 0.18.0,
# onnxruntime-ep-webgpu 0.4.0, onnx-ir 1.1.0, sqlalchemy, jsonschema + deps) and .gl/ (Debian's
# libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 .debs; NVIDIA's Vulkan ICD needs
# the GL loaders too). torch, transformers, onnx, tokenizers, pandas, typer... are on the image.
#
# Usage: benchmarks/gpu/h200_webgpu.sh STEP[,STEP...] OUTDIR  (steps: smoke measure overhead explain agreement-cpu
#   agreement-webgpu overhead-invocations overhead-inproc bimodal adaptive; several run in one call, in order)
#   explain (issue 16): `perf --explain` of config vs ep=webgpu on the pipeline and on the flat bundle;
#   writes explain-{pipeline,flat}.json (run records, each cell with its `explain` section) and
#   explain-{pipeline,flat}.txt (the tables, each route's breakdown, the difference to config).
#
# Issue 12's steps (each sized for one device call of at most ~8 minutes; the flat int4
# Qwen2.5-0.5B-shaped bundle at 128/128 is built on first use into $FLAT):
#   agreement-cpu / agreement-webgpu  10 pairs of the same `winml perf` command (one route each:
#       both routes in one call would need ~13 min) with 3 invocations x 2 iterations: at ~100 tok/s
#       a 128-token generation takes ~1.3 s, a fresh process + load ~3 s, so a run is ~20 s.
#   overhead-invocations  harness vs bare loop over paired fresh processes (CPU, then WebGPU),
#       8 pairs x 3 iterations each, ratio of invocation medians with its interval.
#   overhead-inproc  in one process: harness, harness without the memory sampler, bare loop (CPU, then
#       WebGPU), 10 rounds x 2 iterations: names the sampler's share of a harness/bare gap.
#   bimodal  default `winml perf` (5 invocations x 5 iterations) of config and ep=webgpu: the warnings
#       (bimodal decode steps, drift) and the route ratio over paired invocations.
#   adaptive  the two-level rule vs fixed 5 warmups + 10 iterations at equal achieved interval (CPU).
# Overrides for a dry run elsewhere: FLAT=bundle path (skips the build when it exists), SKIP_SETUP=1
# (no .gl/.whl install: use the current Python), PAIRS, PROMPT_TOKENS, NEW_TOKENS, ROUTES_CPU_ONLY=1.
set -euo pipefail
steps=${1:?one or more of smoke,measure,overhead,explain,agreement-cpu,agreement-webgpu,overhead-invocations,overhead-inproc,bimodal,adaptive (comma-separated)}
out=${2:?output folder}
mkdir -p "$out"
if [ -z "${SKIP_SETUP:-}" ]; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
. "$(dirname "$0")/nvidia_vulkan.sh"
nvidia_vulkan_env
export WINML_PERF_STORE="$out/gpu.db"
PY=${PYTHON:-python3}
winml() { "$PY" -m winml_perf "$@"; }
bundle=/tmp/q05-pipeline
routes=(--route config --route ep=webgpu --route "ep=webgpu;stages=context,iterator")
flat=${FLAT:-/tmp/q05-flat}
pairs=${PAIRS:-10}
shape=(--prompt-tokens "${PROMPT_TOKENS:-128}" --max-new-tokens "${NEW_TOKENS:-128}")
build_flat() { [ -d "$flat" ] || winml bundle synth -o "$flat" --preset qwen2.5-0.5b -p int4 --force; }
agreement() {  # $1: a name, the rest: the route flags
  local name=$1; shift
  build_flat
  "$PY" benchmarks/bench_agreement.py "$flat" --pairs "$pairs" --json "$out/agreement-$name.json" -- \
    "$@" "${shape[@]}" --invocations 3 --iterations 2 --warmup 1 | tee "$out/agreement-$name.txt"
}

run_step() {
case "$1" in
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
  agreement-cpu)
    agreement cpu --route config
    ;;
  agreement-webgpu)
    agreement webgpu --route ep=webgpu
    ;;
  overhead-invocations)
    build_flat
    eps=(""); [ -n "${ROUTES_CPU_ONLY:-}" ] || eps+=(webgpu)
    for ep in "${eps[@]}"; do
      "$PY" benchmarks/bench_overhead.py --bundle "$flat" --invocation-level ${ep:+--ep "$ep"} --pairs "${PAIRS:-8}" \
        --iterations 3 --pair-warmup 1 "${shape[@]}" --max-time 200 --json "$out/overhead-inv-${ep:-cpu}.json" \
        | tee "$out/overhead-inv-${ep:-cpu}.txt"
    done
    ;;
  adaptive)
    build_flat
    "$PY" benchmarks/bench_adaptive.py "$flat" --max-time "${ADAPTIVE_MAX_TIME:-120}" --json "$out/adaptive.json" -- --route config "${shape[@]}" \
      | tee "$out/adaptive.txt"
    ;;
  overhead-inproc)
    build_flat
    eps=(""); [ -n "${ROUTES_CPU_ONLY:-}" ] || eps+=(webgpu)
    for ep in "${eps[@]}"; do
      "$PY" benchmarks/bench_overhead.py --bundle "$flat" ${ep:+--ep "$ep"} --pairs "${PAIRS:-10}" --iterations "${INPROC_ITERATIONS:-2}" \
        --pair-warmup "${INPROC_PAIR_WARMUP:-1}" --warmup 2 --seed "${SEED:-0}" --skip-stopping "${shape[@]}" --json "$out/overhead-inproc-${ep:-cpu}.json" \
        | tee "$out/overhead-inproc-${ep:-cpu}.txt"
    done
    ;;
  bimodal)
    build_flat
    winml perf "$flat" --route config --route ep=webgpu "${shape[@]}" -o "$out/bimodal-run.json" | tee "$out/bimodal.txt"
    ;;
  overhead)
    build_flat
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
}

IFS=, read -ra wanted <<< "$steps"
for one in "${wanted[@]}"; do
  echo "== $one ($(date -u +%T))" >&2
  run_step "$one"
done
