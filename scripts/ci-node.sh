#!/usr/bin/env bash
# Make sure Node.js is installed for the test that runs the dashboard's hover formatter
# (publish/assets/human.js) against Python's human(). Prints node's path. Installs Debian's nodejs with
# apt-get when missing (needs root).
set -euo pipefail
if ! path="$(command -v node || command -v nodejs)"; then
  [ "$(id -u)" -eq 0 ] || { echo "ci-node: node is missing; install it: sudo apt-get install -y nodejs" >&2; exit 1; }
  echo "ci-node: installing nodejs from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends nodejs >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends nodejs >/dev/null; }
  path="$(command -v node || command -v nodejs)" || { echo "ci-node: node still not found after installing" >&2; exit 1; }
fi
"$path" --version >&2 || true
echo "$path"
