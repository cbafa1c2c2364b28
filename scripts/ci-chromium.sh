#!/usr/bin/env bash
# Make sure Debian's chromium is installed for the `browser` tests (headless dashboard checks).
# Prints the browser's path. Installs with apt-get when missing (needs root).
set -euo pipefail

find_chromium() {
  local c
  for c in /usr/bin/chromium /usr/bin/chromium-browser "$(command -v chromium 2>/dev/null || true)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  return 1
}

if ! path="$(find_chromium)"; then
  [ "$(id -u)" -eq 0 ] || { echo "ci-chromium: chromium is missing; install it: sudo apt-get install -y chromium" >&2; exit 1; }
  echo "ci-chromium: installing chromium from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium >/dev/null; }
  path="$(find_chromium)" || { echo "ci-chromium: chromium still not found after installing" >&2; exit 1; }
fi
"$path" --version >&2 || true
echo "$path"
