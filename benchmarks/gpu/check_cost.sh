#!/usr/bin/env bash
# The equivalence check's cold cost inside `winml tune` (issue 34), this checkout's code against a base
# (BASE_SRC: a folder holding the base commit's src/, e.g. `git archive BASE src | tar -x -C .base`),
# interleaved in the order given. Each run empties the verdict cache first (cold) and is stopped once
# the check has printed its cost line: the race that follows is not what this measures.
#   benchmarks/gpu/check_cost.sh OUT [ORDER]      ORDER: comma-separated base/new/inturn (default base,new)
# "inturn" is this checkout's code with every route pass in the main process (WINML_PERF_CHECK_PROCESSES=0:
# no pass lanes, equivalence/passes/genai_passes.py); "new" takes the lanes the machine's cores give.
# Run after h200_session.sh setup-wheels,bundles and setup-openvino,setup-webgpu on the same warm machine.
# Overrides: PIPELINE (/tmp/q05-pipeline), TUNE_EPS (cpu,webgpu,openvino), TUNE_STAGES (context,iterator), PYTHON.
set -euo pipefail
out=${1:?output folder}
order=${2:-base,new}
mkdir -p "$out"
pipeline=${PIPELINE:-/tmp/q05-pipeline}
PY=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvidia_vulkan.sh"
nvidia_vulkan_env
export PYTHONUNBUFFERED=1
n=0
IFS=, read -ra runs <<<"$order"
for who in "${runs[@]}"; do
  n=$((n + 1))
  src=$PWD/src
  [ "$who" = base ] && src=${BASE_SRC:?BASE_SRC: the base code\'s src folder}
  lanes=()
  [ "$who" = inturn ] && lanes=(WINML_PERF_CHECK_PROCESSES=0)
  rm -f "$pipeline"/_compiled/equivalence-*
  log="$out/check-$n-$who.txt"
  env "${lanes[@]}" PYTHONPATH=/tmp/site:$src "$PY" -m winml_perf tune "$pipeline" --eps "${TUNE_EPS:-cpu,webgpu,openvino}" \
    --stages "${TUNE_STAGES:-context,iterator}" --budget 60s --prompt-tokens 64 --max-new-tokens 64 \
    --iterations 3 --warmup 1 --seed 0 --no-store >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && ! grep -q "route(s) to race" "$log"; do sleep 1; done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "== $n $who: $(grep -m1 'equivalence:' "$log" || echo 'no check line')"
done
