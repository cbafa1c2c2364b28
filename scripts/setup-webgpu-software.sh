#!/usr/bin/env bash
# setup-webgpu-software.sh — provide a software Vulkan driver (Mesa lavapipe >= 25) for the
# onnxruntime WebGPU plugin EP on a machine without a GPU, without touching the system.
#
# Usage:
#   eval "$(scripts/setup-webgpu-software.sh [DEST])"
#   scripts/setup-webgpu-software.sh [--refresh] [--offline] [DEST] > webgpu.env
#
# DEST defaults to $WEBGPU_SW_DIR, else <repo>/.cache/webgpu-sw.
#   --refresh   re-download and re-unpack even when DEST is already complete
#   --offline   never download: succeed only when DEST is already complete
#
# On success it prints `export NAME='value'` lines on stdout (nothing else goes to stdout):
#   VK_DRIVER_FILES, VK_ICD_FILENAMES  the lavapipe ICD json, rewritten to the private .so path
#   LD_LIBRARY_PATH                    private lib dir first, then the caller's value
#   ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER=1
#   WEBGPU_SW_DIR                      the private folder
# Progress goes to stderr. Exit 1 with "setup-webgpu-software: cannot provide driver: <why>"
# on stderr when the driver cannot be provided (tests skip with that text); exit 2 on bad usage.
#
# How: a private apt configuration (its own sources.list with <codename>[-backports], its own
# lists and cache under DEST/apt; the system's sources, lists and cache are never used or
# changed) resolves which packages are missing or too old against the installed dpkg status,
# `apt-get download` fetches exactly those .debs, and `dpkg-deb -x` unpacks them into DEST/root.
# Nothing is installed; works as root and as a normal user.
# Environment: WEBGPU_SW_DIR (DEST), WEBGPU_SW_MIRROR (default http://deb.debian.org/debian),
#   WEBGPU_SW_KEYRING (default /usr/share/keyrings/debian-archive-keyring.gpg).
set -euo pipefail

readonly MIN_MESA_MAJOR=25
readonly PROG=setup-webgpu-software

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
fail() { printf '%s: cannot provide driver: %s\n' "$PROG" "$*" >&2; exit 1; }
usage_error() { printf '%s: usage error: %s (see --help)\n' "$PROG" "$*" >&2; exit 2; }

repo_root() { cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd; }

parse_args() {
  REFRESH=0; OFFLINE=0; DEST="${WEBGPU_SW_DIR:-}"
  while [ $# -gt 0 ]; do
    case "$1" in
      -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
      --refresh) REFRESH=1 ;;
      --offline) OFFLINE=1 ;;
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

write_sources() {
  local mirror="${WEBGPU_SW_MIRROR:-http://deb.debian.org/debian}"
  local keyring="${WEBGPU_SW_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}"
  [ -r "$keyring" ] || fail "Debian archive keyring $keyring not readable (install debian-archive-keyring or set WEBGPU_SW_KEYRING)"
  mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/sources.list.d" "$APTDIR/preferences.d"
  : > "$APTDIR/sources.list"
  local s
  for s in $SUITES; do
    echo "deb [signed-by=$keyring] $mirror $s main" >> "$APTDIR/sources.list"
  done
}

# Prints "name=version" for every package that must be fetched (missing or too old on this system).
resolve_packages() {
  local rel_suffix="" req
  [ -n "$MESA_REL" ] && rel_suffix="/$MESA_REL"
  req="mesa-vulkan-drivers$rel_suffix libvulkan1"
  [ -n "$MESA_REL" ] && req="$req libdrm2$rel_suffix libdrm-amdgpu1$rel_suffix"
  # shellcheck disable=SC2086
  apt_private apt-get -s -y --no-install-recommends install $req 2>"$APTDIR/resolve.err" \
    | sed -n 's/^Inst \([^ ]*\) \(\[[^]]*\] \)\{0,1\}(\([^ ]*\) .*/\1=\3/p' \
    || fail "apt could not resolve mesa-vulkan-drivers$rel_suffix: $(tail -n 3 "$APTDIR/resolve.err" | tr '\n' ' ')"
}

fetch_and_unpack() {
  local pkgs deb
  APTDIR="$DEST/apt"
  write_sources
  log "reading package lists for: $SUITES"
  apt_private apt-get -q update >"$APTDIR/update.log" 2>&1 \
    || fail "apt-get update on the private sources failed: $(grep -E '^(E|W):' "$APTDIR/update.log" | head -n 3 | tr '\n' ' ')"
  pkgs="$(resolve_packages)"
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
  sed -E "s#\"library_path\"[[:space:]]*:[[:space:]]*\"[^\"]*\"#\"library_path\": \"$so\"#" "$src" > "$ICD"
  grep -q "\"library_path\": \"$so\"" "$ICD" || fail "could not rewrite library_path in $src"
}

ld_path() { printf '%s%s' "$LIBDIR" "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; }

check_loadable() {
  local missing loader
  missing="$(LD_LIBRARY_PATH="$(ld_path)" ldd "$LIBDIR/libvulkan_lvp.so" 2>&1 | grep 'not found' || true)"
  [ -z "$missing" ] || fail "libvulkan_lvp.so has unresolved libraries: $(tr -s ' \t\n' ' ' <<<"$missing")"
  loader="$LIBDIR/libvulkan.so.1"
  [ -e "$loader" ] || loader="$( (ldconfig -p 2>/dev/null || true) | grep -o '/[^ ]*libvulkan\.so\.1$' || true)"
  [ -n "$loader" ] || fail "no Vulkan loader libvulkan.so.1 (neither system libvulkan1 nor a private copy)"
}

print_env() {
  local ld; ld="$(ld_path)"
  printf "export VK_DRIVER_FILES='%s'\n" "$ICD"
  printf "export VK_ICD_FILENAMES='%s'\n" "$ICD"
  printf "export LD_LIBRARY_PATH='%s'\n" "$ld"
  printf "export ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER='1'\n"
  printf "export WEBGPU_SW_DIR='%s'\n" "$DEST"
}

main() {
  parse_args "$@"
  pick_suites
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
  print_env
}

main "$@"
