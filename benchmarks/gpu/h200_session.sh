#!/usr/bin/env bash
# One lent H200 session for issues 24, 25 and 29: installs the packages (the machine has no package index)
# and builds the Qwen2.5-0.5B-shaped bundles once, then runs the steps of the per-issue scripts.
#
# What travels is capped at 64 MiB a call, so setup takes two calls while the machine stays warm
# (files written by one call stay for the next; the machine goes back after ~30 s idle):
#   call 1, carry .whl     : h200_session.sh setup-wheels,bundles OUT
#       .whl/ = cp312 wheels: onnxruntime 1.32.0, onnxruntime-genai 0.18.0, sqlalchemy, jsonschema + deps,
#       typer 0.29 + pydantic, filelock, psutil, tabulate, rich, nvidia-ml-py (~48 MB)
#   call 2, carry .ov .gpuwhl .gl : h200_session.sh setup-openvino,setup-webgpu,<work steps> OUT
#       .ov/ov-cpu.tar.xz = onnxruntime-ep-openvino 1.8.1, CPU plugin only (~20 MB; see h200_openvino.sh)
#       .gpuwhl/ = onnxruntime-ep-webgpu 0.4.0 (cp312 manylinux_2_28, 6.9 MB)
#       .gl/ = Debian's libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 (NVIDIA's Vulkan ICD needs them)
# Work steps (each delegates to the per-issue script, same OUT): equivalence (issue 24, h200_openvino.sh),
# tune (issue 25, h200_openvino.sh), energy-* (issue 29, h200_energy.sh: its own step names after the dash).
# The device returns at most 8 files from $OUT: give OUT as a scratch folder and pack it afterwards with
#   tar czf $OUT/results.tgz --exclude='*.onnx*' --exclude='*.bin' -C SCRATCH .
# Overrides for a dry run elsewhere: FLAT, PIPELINE (bundle paths; built on first use), PYTHON.
set -euo pipefail
steps=${1:?comma-separated steps: setup-wheels bundles setup-openvino setup-webgpu equivalence tune energy-STEP}
out=${2:?output folder}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
flat=${FLAT:-/tmp/q05-flat}
pipeline=${PIPELINE:-/tmp/q05-pipeline}
winml() { "$PY" -m winml_perf "$@"; }
. "$here/nvidia_vulkan.sh"

run_step() {
  case "$1" in
    setup-wheels)  # whichever wheel folders this call carries (.whl, .whl2: benchmarks/gpu/carry_folders.sh)
      for d in .whl .whl2; do
        [ -d "$d" ] || continue
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$d"/*.whl
      done
      ;;
    bundles)
      [ -d "$flat" ] || winml bundle synth -o "$flat" --preset qwen2.5-0.5b -p int4 --force
      [ -d "$pipeline" ] || winml bundle synth -o "$pipeline" --preset qwen2.5-0.5b -p int4 --pipeline --quantize-lm-head --force
      du -sh "$flat" "$pipeline" | tee "$out/bundles.txt"
      ;;
    setup-openvino)
      tar xJf .ov/ov-cpu.tar.xz -C /tmp/site
      ;;
    setup-webgpu)
      for f in .gl/*.deb; do dpkg -x "$f" /; done
      ldconfig
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpuwhl/*.whl
      nvidia_vulkan_env
      winml devices | tee "$out/devices.txt"
      ;;
    equivalence | tune)
      nvidia_vulkan_env
      FLAT=$flat PIPELINE=$pipeline bash "$here/h200_openvino.sh" "$1" "$out"
      ;;
    energy-*)
      nvidia_vulkan_env
      FLAT=$flat SKIP_SETUP=1 bash "$here/h200_energy.sh" "${1#energy-}" "$out"
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
