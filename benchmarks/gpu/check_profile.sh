#!/usr/bin/env bash
# The tune's cold equivalence check under py-spy on the lent machine (issue 34), after h200_session.sh
# setup-wheels,bundles and setup-openvino,setup-webgpu; carries .prof/ (the py-spy wheel, cp312 manylinux).
# Writes $OUT/new.raw (py-spy raw stacks) and $OUT/new.txt.
set -e
pip install -q --no-index .prof/*.whl 2>&1 | tail -1
. benchmarks/gpu/nvidia_vulkan.sh; nvidia_vulkan_env
export PYTHONUNBUFFERED=1
rm -f /tmp/q05-pipeline/_compiled/equivalence-*
PYTHONPATH=/tmp/site:$PWD/src py-spy record -r 50 -f raw -o $OUT/new.raw -- python3 -m winml_perf tune /tmp/q05-pipeline --eps cpu,webgpu,openvino --stages context,iterator --budget 60s --prompt-tokens 64 --max-new-tokens 64 --iterations 3 --warmup 1 --seed 0 --no-store > $OUT/new.txt 2>&1 &
sleep 5
while ! grep -q "route(s) to race" $OUT/new.txt; do sleep 1; done
pkill -INT -f "winml_perf tune" || true
wait || true
grep -m1 equivalence: $OUT/new.txt
