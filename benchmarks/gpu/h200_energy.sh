#!/usr/bin/env bash
# Issue 29's energy run on the lent H200 machine: joules per token of prefill and decode for config
# (the CPU EP: the host has no RAPL, so its record should say "not measured" and why) and ep=webgpu
# (NVML's GPU 0 board counter) on the flat int4 Qwen2.5-0.5B-shaped bundle, idle power and the
# counter's resolution and update period as observed, and a 5-minute sustained run on ep=webgpu with
# its chart.
#
# Needs, as h200_webgpu.sh: .whl/ (cp312 wheels, now with nvidia-ml-py) and .gl/ (the Vulkan and GL
# loader .debs). Each step stays under ~7 minutes.
#
# Usage: benchmarks/gpu/h200_energy.sh STEP[,STEP...] OUTDIR
#   steps: setup counter measure sustained
#   setup      install .whl/ into /tmp/site and unpack .gl/ (skipped with SKIP_SETUP=1)
#   counter    NVML's counter polled every 1 ms for $COUNTER_S s (default 10) at idle: idle W, the
#              observed update period and smallest step (counter.txt, counter.json), the GPU's state
#   measure    config and ep=webgpu interleaved, $PROMPT_TOKENS/$NEW_TOKENS (default 512/128: a prefill
#              of ~0.35 s on WebGPU, over 2 x the 100 ms update period), 5 invocations x 3 iterations;
#              energy.json (run record), energy.txt (the table and each cell's energy section)
#   sustained  `--duration ${DURATION:-5m}` on ep=webgpu; sustained.json, sustained.txt and the chart
#              sustained-site/sustained.html
# Overrides: FLAT (bundle path; built on first use), PROMPT_TOKENS, NEW_TOKENS, INVOCATIONS, ITERATIONS,
#   DURATION, COUNTER_S.
set -euo pipefail
steps=${1:?one or more of setup,counter,measure,sustained (comma-separated)}
out=${2:?output folder}
mkdir -p "$out"
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
export WINML_PERF_STORE="$out/energy.db"
PY=${PYTHON:-python3}
winml() { "$PY" -m winml_perf "$@"; }
flat=${FLAT:-/tmp/q05-flat}
shape=(--prompt-tokens "${PROMPT_TOKENS:-512}" --max-new-tokens "${NEW_TOKENS:-128}")
policy=(--invocations "${INVOCATIONS:-5}" --iterations "${ITERATIONS:-3}" --warmup 1)
build_flat() { [ -d "$flat" ] || winml bundle synth -o "$flat" --preset qwen2.5-0.5b -p int4 --force; }
. "$(dirname "$0")/nvidia_vulkan.sh"
nvidia_vulkan_env
energy_text() {  # $1: a run record; each cell's energy section, short
  "$PY" - "$1" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
for c in run["cells"]:
    e = c.get("energy") or {}
    print(f"== {c['cell_key']}: {e.get('status')} {e.get('reason') or ''}")
    if e.get("status") == "measured":
        print(f"   meter: {e['meter']}")
        idle = e.get("idle") or {}
        print(f"   idle: {idle.get('idle_w')} W over {idle.get('window_s')} s; observed update period "
              f"{idle.get('observed_update_period_s')} s, smallest step {idle.get('observed_smallest_step_j')} J")
        for phase in ("prefill", "decode"):
            p = e.get(phase) or {}
            keys = ("status", "reason", "j_per_token", "j_per_token_interval", "j_per_token_above_idle",
                    "j_per_token_above_idle_interval", "mean_w", "mean_occurrence_s", "counter_bound_pct", "occurrences")
            print(f"   {phase}: " + json.dumps({k: p.get(k) for k in keys if k in p}))
    print(f"   power state: {json.dumps(e.get('power_state'))}")
    if e.get("power_state_differs"):
        print(f"   differs: {json.dumps(e['power_state_differs'])}")
PY
}

run_step() {
  case "$1" in
    setup)
      if [ -z "${SKIP_SETUP:-}" ]; then
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
      fi
      ;;
    counter)
      nvidia-smi --query-gpu=name,driver_version,power.limit,pstate,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
      ls /sys/class/powercap 2>&1 | tee "$out/powercap.txt" || true
      "$PY" - "${COUNTER_S:-10}" "$out/counter.json" <<'PY' | tee "$out/counter.txt"
import json, sys, time
from winml_perf.power.accounting import idle_power
from winml_perf.power.meters import NvmlMeter, meters_for
from winml_perf.power.state import power_state
seconds, path = float(sys.argv[1]), sys.argv[2]
print("cpu meters:", meters_for("cpu"))
m = NvmlMeter(0)
why = m.available()
if why:
    sys.exit(f"NVML meter not available: {why}")
marks, end = [], time.perf_counter() + seconds
while time.perf_counter() < end:
    marks.append((time.perf_counter(), m.read()))
    time.sleep(0.001)
idle = idle_power(marks)
changes = sum(1 for a, b in zip(marks, marks[1:]) if b[1] != a[1])
report = {"meter": m.covers, "declared_resolution_j": m.resolution_j, "declared_update_period_s": m.update_period_s,
          **idle, "changes": changes, "power_state": power_state(gpu=True)}
json.dump(report, open(path, "w"), indent=1)
print(json.dumps(report, indent=1))
PY
      ;;
    measure)
      build_flat
      winml perf "$flat" --route config --route ep=webgpu "${shape[@]}" "${policy[@]}" --no-store \
        -o "$out/energy.json" | tee "$out/energy.txt"
      energy_text "$out/energy.json" | tee -a "$out/energy.txt"
      ;;
    sustained)
      build_flat
      winml perf "$flat" --ep webgpu "${shape[@]}" --warmup 1 --duration "${DURATION:-5m}" --no-store \
        -o "$out/sustained.json" | tee "$out/sustained.txt"
      energy_text "$out/sustained.json" | tee -a "$out/sustained.txt"
      "$PY" - "$out/sustained.json" <<'PY' | tee -a "$out/sustained.txt"
import json, sys
c = json.load(open(sys.argv[1]))["cells"][0]
s = c["sustained"]
print("windows:", len(s["windows"]), "of", s["window_s"], "s")
print("change points:", json.dumps(s["change_points"]))
for key in ("tokens_per_s_slope_per_min", "rss_slope_bytes_per_min", "power_slope_w_per_min"):
    print(key, json.dumps(s.get(key)))
PY
      winml dashboard --sustained "$out/sustained.json" -o "$out/sustained-site"
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
