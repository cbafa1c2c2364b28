#!/usr/bin/env bash
# Issue 23's OpenVINO run on the lent H200 machine's Intel Xeon host (OpenVINO offers devices only on
# Intel hardware, so neither here nor in CI): config vs --ep openvino vs --ep openvino --compile on the
# flat int4 Qwen2.5-0.5B-shaped bundle, the placement, --explain of the difference, load times.
#
# The machine has no package index and a 64 MiB limit on what travels, so it takes two calls:
#   1. carry .whl/ (cp312 wheels: onnxruntime, onnxruntime-genai, sqlalchemy, jsonschema + deps,
#      typer 0.29 + pydantic, filelock, psutil, tabulate, rich) and run the step `setup-wheels`;
#   2. carry .ov/ov-cpu.tar.xz (onnxruntime-ep-openvino 1.8.1 with only its CPU plugin: the GPU and NPU
#      plugins, cache.json and the duplicate provider .so.1* copies removed; tar cJf packs it to ~20 MB)
#      and run `setup-openvino,devices,measure,explain` (files written by call 1 stay while it is warm).
# Issue 24's step `equivalence` (the WebGPU EP wheel and the OpenVINO EP installed): config vs ep=webgpu vs
# ep=openvino (and OpenVINO at precision FP32) judged from teacher-forced logits and each decoder layer's
# output, then the same routes against the reference's own MatMulNBits accuracy_level 0 build (fp32
# activations); verdicts, band figures and the first departing layer in $out/equivalence*.txt (~4-6 min).
# torch, transformers, numpy, pandas and onnx are on the machine's image (for `winml bundle synth`).
#
# Usage: benchmarks/gpu/h200_openvino.sh STEP[,STEP...] OUTDIR
#   steps: setup-wheels setup-openvino devices measure explain equivalence tune tune-check
#   tune (issue 25): `winml tune` of the pipeline int4 Qwen2.5-0.5B-shaped bundle (built on first use into
#     $PIPELINE, as h200_webgpu.sh builds /tmp/q05-pipeline) over cpu,webgpu,openvino, budget $TUNE_BUDGET
#     (default 300s, preparation included), searching $TUNE_STAGES (default context,iterator: 7 routes;
#     TUNE_STAGES= searches all four stages), the winner emitted into $TUNE_EMIT (/tmp/q05-tune-best).
#     Needs the WebGPU wheel in /tmp/site and, for NVIDIA's Vulkan ICD, .gl/ (as h200_webgpu.sh); writes
#     tune.txt (devices, then the table and verdict), tune.json (the report), tune-best.json and
#     tune-best-genai_config.json (the emitted winner's).
#   tune-check: the emitted bundle against the source's config, alternating fresh `winml perf` runs,
#     paired (benchmarks/tune_reproduce.py): does its ratio fall in the tune's interval? tune-check.txt.
# Overrides: FLAT (bundle path; built on first use), PROMPT_TOKENS, NEW_TOKENS, INVOCATIONS, ITERATIONS,
#   PIPELINE, TUNE_BUDGET, TUNE_STAGES, TUNE_EPS, TUNE_EMIT, SEED, PAIRS.
set -euo pipefail
steps=${1:?one or more of setup-wheels,setup-openvino,devices,measure,explain,tune,tune-check (comma-separated)}
out=${2:?output folder}
mkdir -p "$out"
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
export WINML_PERF_STORE="$out/openvino.db"
PY=${PYTHON:-python3}
winml() { "$PY" -m winml_perf "$@"; }
flat=${FLAT:-/tmp/q05-flat}
shape=(--prompt-tokens "${PROMPT_TOKENS:-64}" --max-new-tokens "${NEW_TOKENS:-64}")
policy=(--invocations "${INVOCATIONS:-5}" --iterations "${ITERATIONS:-3}" --warmup 1)
build_flat() { [ -d "$flat" ] || winml bundle synth -o "$flat" --preset qwen2.5-0.5b -p int4 --force; }
pipeline=${PIPELINE:-/tmp/q05-pipeline}
tune_best=${TUNE_EMIT:-/tmp/q05-tune-best}  # the winner `winml tune --emit` writes
build_pipeline() {
  [ -d "$pipeline" ] || winml bundle synth -o "$pipeline" --preset qwen2.5-0.5b -p int4 --pipeline --quantize-lm-head --force
}
. "$(dirname "$0")/nvidia_vulkan.sh"
webgpu_env() {  # the Vulkan loaders (.gl) and NVIDIA's ICD for the WebGPU EP
  if [ -d .gl ] && [ ! -e /tmp/.gl-done ]; then for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; touch /tmp/.gl-done; fi
  nvidia_vulkan_env
}

run_step() {
  case "$1" in
    setup-wheels)
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
      ;;
    setup-openvino)
      tar xJf .ov/ov-cpu.tar.xz -C /tmp/site
      ;;
    devices)
      lscpu | grep -E "Model name|^CPU\(s\)" | tee "$out/cpu.txt"
      winml devices | tee "$out/devices.txt"
      ;;
    measure)
      build_flat
      winml bundle show "$flat" --ep openvino --placement | tee "$out/placement.txt"
      # one interleaved run of config and the uncompiled forced route, then the compiled route
      winml perf "$flat" --route config --route ep=openvino "${shape[@]}" "${policy[@]}" --check-outputs \
        -o "$out/run-uncompiled.json" | tee "$out/perf-uncompiled.txt"
      winml bundle prepare "$flat" --ep openvino --compile | tee "$out/prepare-compiled.txt"
      winml perf "$flat" --route config --route ep=openvino --compile "${shape[@]}" "${policy[@]}" \
        -o "$out/run-compiled.json" | tee "$out/perf-compiled.txt"
      ;;
    explain)
      build_flat
      winml perf "$flat" --route config --route ep=openvino "${shape[@]}" --invocations 1 --iterations 2 --explain \
        -o "$out/explain.json" | tee "$out/explain.txt"
      ;;
    tune)
      build_pipeline
      webgpu_env
      winml devices | tee "$out/tune.txt"
      rm -rf "$tune_best"
      searched=${TUNE_STAGES-context,iterator}
      stages=(); [ -z "$searched" ] || stages=(--stages "$searched")
      winml tune "$pipeline" --eps "${TUNE_EPS:-cpu,webgpu,openvino}" ${stages[@]+"${stages[@]}"} \
        --budget "${TUNE_BUDGET:-300s}" --prompt-tokens "${PROMPT_TOKENS:-64}" --max-new-tokens "${NEW_TOKENS:-64}" \
        --iterations "${ITERATIONS:-3}" --warmup 1 --seed "${SEED:-0}" --emit "$tune_best" \
        --report "$out/tune.json" | tee -a "$out/tune.txt"
      # the emitted bundle's weights stay out of $out (the device returns few, small files)
      cp "$tune_best/tune.json" "$out/tune-best.json"
      cp "$tune_best/genai_config.json" "$out/tune-best-genai_config.json"
      ;;
    tune-check)
      webgpu_env
      "$PY" benchmarks/tune_reproduce.py "$tune_best" --pairs "${PAIRS:-5}" -- "${shape[@]}" \
        --iterations "${ITERATIONS:-3}" --warmup 1 | tee "$out/tune-check.txt"
      ;;
    equivalence)
      build_flat
      # few timed iterations: the judging runs before the sweep, outside every timed iteration
      eq_shape=(--prompt-tokens 16 --max-new-tokens 4 --warmup 1 --iterations 1 --invocations 1)
      ov32="ep=openvino;options=precision=FP32"
      winml perf "$flat" --route config --route ep=webgpu --route ep=openvino --route "$ov32" "${eq_shape[@]}" \
        -o "$out/equivalence.json" 2>&1 | tee "$out/equivalence-perf.txt" || true
      "$PY" benchmarks/gpu/equivalence_report.py "$out/equivalence.json" | tee "$out/equivalence.txt"
      # the reference computing with fp32 activations (MatMulNBits accuracy_level 4 -> 0): which route is closer?
      acc0=$("$PY" -c "import sys; from pathlib import Path; from winml_perf.bundle.variants import precision_variant; print(precision_variant(Path(sys.argv[1]))[0])" "$flat")
      winml perf "$flat" --route config --route ep=webgpu --route ep=openvino --route "$ov32" "${eq_shape[@]}" \
        --reference-bundle "$acc0" -o "$out/equivalence-acc0.json" 2>&1 | tee "$out/equivalence-acc0-perf.txt" || true
      "$PY" benchmarks/gpu/equivalence_report.py "$out/equivalence-acc0.json" | tee "$out/equivalence-acc0.txt"
      rm -rf "$acc0"
      ;;
    *)
      echo "unknown step $1" >&2
      exit 2
      ;;
  esac
}

IFS=, read -ra wanted <<< "$steps"
for one in "${wanted[@]}"; do
  echo "== $one ($(date -u +%T))" >&2
  run_step "$one"
done
