#!/usr/bin/env bash
# A throwaway PostgreSQL server for the `postgres` tests (CI and local).
#
#   scripts/ci-postgres.sh start [STATE_DIR]   install Debian's postgresql if missing, initdb a fresh
#                                              cluster in STATE_DIR, start it on 127.0.0.1 (a free
#                                              port), create database winml_perf_test; the last line
#                                              of stdout is its URL (also in STATE_DIR/url)
#   scripts/ci-postgres.sh url   [STATE_DIR]   print the URL of the running server
#   scripts/ci-postgres.sh stop  [STATE_DIR]   stop the server and delete STATE_DIR
#
# STATE_DIR defaults to ${TMPDIR:-/tmp}/winml-perf-pg. Authentication is `trust` and the server only
# listens on loopback and a socket inside STATE_DIR: a throwaway for tests, never a real database.
# PostgreSQL refuses to run as root; as root the cluster runs as the `postgres` user (runuser).
set -euo pipefail

cmd="${1:-start}"
state="${2:-${TMPDIR:-/tmp}/winml-perf-pg}"
db="winml_perf_test"
role="winml"

die() { echo "ci-postgres: $*" >&2; exit 1; }

find_bindir() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return 0; fi
  return 1
}

install_postgres() {
  [ "$(id -u)" -eq 0 ] || die "PostgreSQL is not installed and this is not root; install it: sudo apt-get install -y postgresql"
  echo "ci-postgres: installing postgresql from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q postgresql >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q postgresql >/dev/null; }
}

# Run a command as the cluster's owner: ourselves, or `postgres` when we are root.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
  local bindir port
  bindir="$(find_bindir)" || { install_postgres; bindir="$(find_bindir)" || die "initdb not found after installing postgresql"; }
  if [ -f "$state/url" ] && "$bindir/pg_isready" -q -d "$(cat "$state/url")" -t 5; then
    cat "$state/url"; return 0   # already running (a second `start` is harmless)
  fi
  stop   # a stale state folder from a killed run
  rm -rf "$state"
  mkdir -p "$state"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || die "user 'postgres' is missing (the postgresql package creates it)"
    chown postgres: "$state"
    chmod 700 "$state"
  fi
  port="$(free_port)"
  as_owner "$bindir/initdb" -D "$state/data" -U "$role" --auth=trust --encoding=UTF8 --no-sync >"$state/initdb.log" 2>&1 \
    || { cat "$state/initdb.log" >&2; die "initdb failed"; }
  as_owner "$bindir/pg_ctl" -D "$state/data" -l "$state/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $state -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100" \
    start >/dev/null || { cat "$state/server.log" >&2; die "pg_ctl start failed"; }
  as_owner "$bindir/createdb" -h 127.0.0.1 -p "$port" -U "$role" "$db"
  echo "$bindir" >"$state/bindir"
  echo "postgresql://$role@127.0.0.1:$port/$db" | as_owner tee "$state/url" >/dev/null
  cat "$state/url"
}

stop() {
  [ -d "$state" ] || return 0
  if [ -f "$state/bindir" ] && [ -d "$state/data" ]; then
    as_owner "$(cat "$state/bindir")/pg_ctl" -D "$state/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$state"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  url) [ -f "$state/url" ] || die "no server in $state (run: $0 start)"; cat "$state/url" ;;
  *) die "unknown command '$cmd' (use start, url or stop)" ;;
esac
