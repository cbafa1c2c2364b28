#!/usr/bin/env bash
# setup-webgpu-software.sh — provide a software Vulkan driver (Mesa lavapipe >= 25) for the
# onnxruntime WebGPU plugin EP on a machine without a GPU, without touching the system.
#
# Usage:
#   eval "$(scripts/setup-webgpu-software.sh [DEST])"
#   scripts/setup-webgpu-software.sh [--refresh] [--offline] [--verify] [DEST] > webgpu.env
#
# DEST defaults to $WEBGPU_SW_DIR, else <repo>/.cache/webgpu-sw.
#   --refresh   re-download and re-unpack even when DEST is already complete
#   --offline   never download: succeed only when DEST is already complete
#   --verify    also run a 2x3 @ 3x2 MatMul on the WebGPU plugin EP in a child process with the
#               printed environment ($PYTHON, default python3, needs onnxruntime and
#               onnxruntime-ep-webgpu); fail when it did not run on WebGPU or gave a wrong result
#
# On success it prints `export NAME='value'` lines on stdout (nothing else goes to stdout):
#   VK_DRIVER_FILES, VK_ICD_FILENAMES  the lavapipe ICD json, rewritten to the private .so path
#   LD_LIBRARY_PATH                    the private lib dirs, then the caller's value (as it was
#                                      when the script ran); must be set before the process starts
#   ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER=1
#   MESA_SHADER_CACHE_DIR              DEST/shader-cache: lavapipe's compiled shaders persist there
#                                      across processes (the first run compiles for seconds)
#   WEBGPU_SW_DIR                      the private folder
# Progress goes to stderr. Exit 1 with "setup-webgpu-software: cannot provide driver: <why>"
# on stderr when the driver cannot be provided (tests skip with that text); exit 2 on bad usage.
# Concurrent runs on one DEST wait for each other (flock on DEST/.lock).
#
# How: a private apt configuration (its own sources.list with <codename>[-backports], its own
# lists and cache under DEST/apt; the system's sources, lists and cache are never used or
# changed) resolves which packages are missing or too old against the installed dpkg status,
# `apt-get download` fetches exactly those .debs, and `dpkg-deb -x` unpacks them into DEST/root.
# Nothing is installed; works as root and as a normal user.
# Environment: WEBGPU_SW_DIR (DEST), WEBGPU_SW_MIRROR (default: the URI of the system's own apt
#   source for its codename), WEBGPU_SW_KEYRING (default /usr/share/keyrings/debian-archive-keyring.gpg),
#   PYTHON (for --verify, default python3).
set -euo pipefail

readonly MIN_MESA_MAJOR=25
readonly PROG=setup-webgpu-software

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
fail() { printf '%s: cannot provide driver: %s\n' "$PROG" "$*" >&2; exit 1; }
usage_error() { printf '%s: usage error: %s (see --help)\n' "$PROG" "$*" >&2; exit 2; }

repo_root() { cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd; }

parse_args() {
  REFRESH=0; OFFLINE=0; VERIFY=0; DEST="${WEBGPU_SW_DIR:-}"
  while [ $# -gt 0 ]; do
    case "$1" in
      -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
      --refresh) REFRESH=1 ;;
      --offline) OFFLINE=1 ;;
      --verify) VERIFY=1 ;;
      -*) usage_error "unknown option $1" ;;
      *) [ -z "${DEST_ARG:-}" ] || usage_error "more than one DEST given"; DEST_ARG="$1" ;;
    esac
    shift
  done
  DEST="${DEST_ARG:-${DEST:-$(repo_root)/.cache/webgpu-sw}}"
  mkdir -p "$DEST" 2>/dev/null || fail "cannot create folder $DEST (pass another DEST or set WEBGPU_SW_DIR)"
  DEST="$(cd "$DEST" && pwd)"
}

# Which suites to read and which release the mesa packages come from, per Debian codename.
pick_suites() {
  [ -r /etc/os-release ] || fail "no /etc/os-release: this script needs Debian 12 (bookworm) or 13 (trixie)"
  # shellcheck disable=SC1091
  CODENAME="$(. /etc/os-release && echo "${ID:-}:${VERSION_CODENAME:-}")"
  case "$CODENAME" in
    debian:bookworm) SUITES="bookworm bookworm-updates bookworm-backports"; MESA_REL="bookworm-backports" ;;
    debian:trixie)   SUITES="trixie trixie-updates"; MESA_REL="" ;;
    *) fail "unsupported system '$CODENAME' (need debian:bookworm or debian:trixie); provide Mesa lavapipe >= $MIN_MESA_MAJOR yourself and set VK_DRIVER_FILES" ;;
  esac
  for tool in apt-get dpkg-deb dpkg ldd; do
    command -v "$tool" >/dev/null || fail "'$tool' not found on PATH"
  done
}

apt_private() {  # run apt-get/apt-cache with the private configuration
  local tool="$1"; shift
  "$tool" -o Dir::Etc::sourcelist="$APTDIR/sources.list" -o Dir::Etc::sourceparts="$APTDIR/sources.list.d" \
    -o Dir::State::Lists="$APTDIR/lists" -o Dir::Cache="$APTDIR/cache" \
    -o Dir::Etc::preferences="$APTDIR/preferences" -o Dir::Etc::preferencesparts="$APTDIR/preferences.d" \
    -o APT::Get::List-Cleanup=0 -o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
}

# Prints the first URI of an enabled `deb` source of the system whose suites include $1: the
# private sources reuse the mirror the machine is already set up with (the files are only read).
system_mirror() {
  local files=() f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] && files+=("$f")
  done
  [ "${#files[@]}" -gt 0 ] || return 0
  awk -v cn="$1" '
    function flush() {
      if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " cn " ") && uris != "") {
        split(uris, u, " "); print u[1]; found = 1; exit
      }
      types = ""; suites = ""; uris = ""
    }
    FNR == 1 { flush() }
    /^[[:space:]]*#/ { next }
    FILENAME ~ /\.sources$/ {
      if ($0 ~ /^[[:space:]]*$/) { flush(); next }
      key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
      if (key == "types") types = $0; else if (key == "suites") suites = $0
      else if (key == "uris") uris = $0; else if (key == "enabled" && tolower($0) == "no") types = ""
      next
    }
    /^[[:space:]]*deb[[:space:]]/ {
      line = $0; sub(/^[[:space:]]*deb[[:space:]]+/, "", line); sub(/^\[[^]]*\][[:space:]]*/, "", line)
      split(line, f, /[[:space:]]+/); if (f[2] == cn) { print f[1]; found = 1; exit }
    }
    END { if (!found) flush() }' "${files[@]}"
}

write_sources() {
  local mirror="${WEBGPU_SW_MIRROR:-$(system_mirror "${CODENAME#*:}")}"
  local keyring="${WEBGPU_SW_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}"
  [ -n "$mirror" ] || fail "no apt source for '${CODENAME#*:}' in /etc/apt/sources.list{,.d} to take the Debian mirror from (set WEBGPU_SW_MIRROR to a Debian mirror URI)"
  [ -r "$keyring" ] || fail "Debian archive keyring $keyring not readable (install debian-archive-keyring or set WEBGPU_SW_KEYRING)"
  mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/sources.list.d" "$APTDIR/preferences.d"
  : > "$APTDIR/sources.list"
  local s
  for s in $SUITES; do
    echo "deb [signed-by=$keyring] $mirror $s main" >> "$APTDIR/sources.list"
  done
  MIRROR="$mirror"
}

# Prints "name=version" for every package that must be fetched (missing or too old on this
# system); mesa-vulkan-drivers always (when the system has it installed, it is fetched again).
resolve_packages() {
  local rel_suffix="" req
  [ -z "$MESA_REL" ] || rel_suffix="/$MESA_REL"
  req="mesa-vulkan-drivers$rel_suffix libvulkan1"
  [ -z "$MESA_REL" ] || req="$req libdrm2$rel_suffix libdrm-amdgpu1$rel_suffix"
  # shellcheck disable=SC2086
  simulate install $req
  simulate install --reinstall "mesa-vulkan-drivers$rel_suffix" | { grep '^mesa-vulkan-drivers=' || true; }
}

simulate() {  # apt-get -s ... -> "name=version" of each package it would unpack
  apt_private apt-get -s -y --no-install-recommends "$@" 2>"$APTDIR/resolve.err" \
    | sed -n 's/^Inst \([^ ]*\) \(\[[^]]*\] \)\{0,1\}(\([^ ]*\) .*/\1=\3/p' \
    || fail "apt could not resolve '$*': $(tail -n 3 "$APTDIR/resolve.err" | tr '\n' ' ')"
}

fetch_and_unpack() {
  local pkgs deb
  APTDIR="$DEST/apt"
  write_sources
  log "reading package lists for: $SUITES (from $MIRROR)"
  apt_private apt-get -q --error-on=any update >"$APTDIR/update.log" 2>&1 \
    || fail "apt-get update on the private sources failed: $(grep -E '^(E|W):' "$APTDIR/update.log" | head -n 3 | tr '\n' ' ')"
  pkgs="$(resolve_packages | sort -u)"
  grep -q '^mesa-vulkan-drivers=' <<<"$pkgs" \
    || fail "no mesa-vulkan-drivers to fetch (resolver said: $(tail -n 3 "$APTDIR/resolve.err" | tr '\n' ' '))"
  log "fetching: $(tr '\n' ' ' <<<"$pkgs")"
  rm -rf "$DEST/debs" "$DEST/root" "$DEST/.complete"
  mkdir -p "$DEST/debs" "$DEST/root"
  # shellcheck disable=SC2046
  (cd "$DEST/debs" && apt_private apt-get -q download $(tr '\n' ' ' <<<"$pkgs")) >"$APTDIR/download.log" 2>&1 \
    || fail "apt-get download failed: $(grep -E '^(E|W):' "$APTDIR/download.log" | head -n 3 | tr '\n' ' ')"
  for deb in "$DEST"/debs/*.deb; do
    dpkg-deb -x "$deb" "$DEST/root" || fail "dpkg-deb -x $deb failed"
  done
  printf '%s\n' "$pkgs" > "$DEST/packages.txt"
  rm -rf "$DEST/debs" "$APTDIR/cache"  # unpacked: the archives are no longer needed
}

check_mesa_version() {
  local ver
  ver="$(sed -n 's/^mesa-vulkan-drivers=//p' "$DEST/packages.txt")"
  [ "${ver%%.*}" -ge "$MIN_MESA_MAJOR" ] 2>/dev/null \
    || fail "mesa-vulkan-drivers $ver is older than $MIN_MESA_MAJOR (Dawn needs lavapipe >= $MIN_MESA_MAJOR)"
  MESA_VERSION="$ver"
}

# Writes DEST/lvp_icd.json pointing at the private libvulkan_lvp.so; sets LIBDIR and ICD.
make_icd() {
  local so src
  so="$(find "$DEST/root" -name 'libvulkan_lvp.so' -print -quit)"
  [ -n "$so" ] || fail "libvulkan_lvp.so missing from the unpacked mesa-vulkan-drivers in $DEST/root"
  src="$(find "$DEST/root" -path '*/vulkan/icd.d/lvp_icd*.json' -print -quit)"
  [ -n "$src" ] || fail "lvp_icd*.json missing from the unpacked mesa-vulkan-drivers"
  LIBDIR="$(dirname "$so")"
  ICD="$DEST/lvp_icd.json"
  local so_sed; so_sed="$(printf '%s' "$so" | sed 's/[\\&#]/\\&/g')"
  sed -E "s#\"library_path\"[[:space:]]*:[[:space:]]*\"[^\"]*\"#\"library_path\": \"$so_sed\"#" "$src" > "$ICD"
  grep -qF "\"library_path\": \"$so\"" "$ICD" || fail "could not rewrite library_path in $src"
}

# The private library folders (lavapipe's first; Debian 12 packages also ship in /lib/<triplet>),
# then the caller's LD_LIBRARY_PATH.
ld_path() {
  local dirs="$LIBDIR" d
  for d in "$DEST"/root/lib/*-linux-gnu* "$DEST"/root/usr/lib/*-linux-gnu* "$DEST"/root/lib64 "$DEST"/root/usr/lib64; do
    [ -d "$d" ] && [ "$d" != "$LIBDIR" ] && dirs="$dirs:$d"
  done
  printf '%s%s' "$dirs" "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

check_loadable() {
  local missing loader
  missing="$(LD_LIBRARY_PATH="$(ld_path)" ldd "$LIBDIR/libvulkan_lvp.so" 2>&1 | grep 'not found' || true)"
  [ -z "$missing" ] || fail "libvulkan_lvp.so has unresolved libraries: $(tr -s ' \t\n' ' ' <<<"$missing")"
  loader="$LIBDIR/libvulkan.so.1"
  [ -e "$loader" ] || loader="$( (ldconfig -p 2>/dev/null || true) | grep -o '/[^ ]*libvulkan\.so\.1$' || true)"
  [ -n "$loader" ] || fail "no Vulkan loader libvulkan.so.1 (neither system libvulkan1 nor a private copy)"
}

# A MatMul model (A[2,3] @ B[3,2], opset 17) so that --verify needs no onnx package.
readonly MATMUL_ONNX_B64='CAkSAXg6VQoRCgFBCgFCEgFDIgZNYXRNdWwSAWdaEwoBQRIOCgwIARIICgIIAgoCCANaEwoBQhIOCgwIARIICgIIAwoCCAJiEwoBQxIOCgwIARIICgIIAgoCCAJCBAoAEBE='

verify_ep() {
  local py="${PYTHON:-python3}" out
  command -v "$py" >/dev/null || fail "--verify: python '$py' not found (set PYTHON)"
  out="$(env VK_DRIVER_FILES="$ICD" VK_ICD_FILENAMES="$ICD" LD_LIBRARY_PATH="$(ld_path)" \
      ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER=1 MESA_SHADER_CACHE_DIR="$DEST/shader-cache" \
      MODEL_B64="$MATMUL_ONNX_B64" "$py" - 2>&1 <<'PY'
import base64, os, sys
import numpy as np
import onnxruntime as ort
import onnxruntime_ep_webgpu as wg
ort.set_default_logger_severity(3)
name = wg.get_ep_name()
ort.register_execution_provider_library(name, wg.get_library_path())
devices = [d for d in ort.get_ep_devices() if d.ep_name == name]
if not devices:
    sys.exit(f"VERIFY-FAIL: {name} offers no device")
so = ort.SessionOptions()
so.add_provider_for_devices(devices, {})
so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
try:
    sess = ort.InferenceSession(base64.b64decode(os.environ["MODEL_B64"]), sess_options=so)
except Exception as exc:  # EP could not start (e.g. no Vulkan loader / driver)
    sys.exit(f"VERIFY-FAIL: session on {name} failed: {exc}")
if sess.get_providers()[0] != name:
    sys.exit(f"VERIFY-FAIL: session runs on {sess.get_providers()}, not {name}")
a = np.arange(6, dtype=np.float32).reshape(2, 3); b = np.arange(6, dtype=np.float32).reshape(3, 2)
(c,) = sess.run(None, {"A": a, "B": b})
if not np.allclose(c, a @ b):
    sys.exit(f"VERIFY-FAIL: wrong MatMul result {c.tolist()}")
print("VERIFY-OK")
PY
  )" || fail "--verify: $(grep -E 'VERIFY-FAIL|Error|error' <<<"$out" | tail -n 2 | tr '\n' ' ')"
  grep -q VERIFY-OK <<<"$out" || fail "--verify: no confirmation from the check: $(tail -n 2 <<<"$out" | tr '\n' ' ')"
  log "verified: a MatMul ran on the WebGPU EP over lavapipe"
}

print_env() {
  local ld; ld="$(ld_path)"
  printf "export VK_DRIVER_FILES='%s'\n" "$ICD"
  printf "export VK_ICD_FILENAMES='%s'\n" "$ICD"
  printf "export LD_LIBRARY_PATH='%s'\n" "$ld"
  printf "export ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER='1'\n"
  printf "export MESA_SHADER_CACHE_DIR='%s'\n" "$DEST/shader-cache"
  printf "export WEBGPU_SW_DIR='%s'\n" "$DEST"
}

main() {
  parse_args "$@"
  pick_suites
  mkdir -p "$DEST/shader-cache"
  if command -v flock >/dev/null; then
    exec 9>"$DEST/.lock"
    flock 9
  fi
  if [ "$REFRESH" = 1 ] || [ ! -f "$DEST/.complete" ]; then
    [ "$OFFLINE" = 0 ] || fail "$DEST is not set up and --offline was given (run without --offline once)"
    fetch_and_unpack
    check_mesa_version; make_icd; check_loadable
    printf '%s\n' "$MESA_VERSION" > "$DEST/.complete"
    log "lavapipe $MESA_VERSION ready in $DEST"
  else
    check_mesa_version; make_icd; check_loadable
    log "reusing lavapipe $MESA_VERSION in $DEST"
  fi
  [ "$VERIFY" = 0 ] || verify_ep
  print_env
}

main "$@"
