#!/usr/bin/env bash
# Make sure a tool the tests use is installed, from Debian's packages when missing (needs root).
#   scripts/ci-apt-tool.sh PACKAGE CANDIDATE...    each CANDIDATE a command name or an absolute path
# Prints the first candidate found; progress and the tool's version go to stderr.
set -euo pipefail
package=${1:?Debian package}
shift
[ $# -gt 0 ] || { echo "ci-apt-tool: name the command(s) $package provides" >&2; exit 2; }

find_tool() {
  local c found
  for c in "$@"; do
    if [[ "$c" == /* ]]; then found=$c; else found=$(command -v "$c" 2>/dev/null || true); fi
    if [ -n "$found" ] && [ -x "$found" ]; then echo "$found"; return 0; fi
  done
  return 1
}

if ! path="$(find_tool "$@")"; then
  [ "$(id -u)" -eq 0 ] || { echo "ci-apt-tool: $1 is missing; install it: sudo apt-get install -y $package" >&2; exit 1; }
  echo "ci-apt-tool: installing $package from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "$package" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "$package" >/dev/null; }
  path="$(find_tool "$@")" || { echo "ci-apt-tool: $1 still not found after installing $package" >&2; exit 1; }
fi
"$path" --version >&2 || true
echo "$path"
