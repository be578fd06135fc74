#!/usr/bin/env bash
# PostgreSQL server binaries for the spend journal's contract tests and benchmark.
#
#   scripts/ci_postgres.sh install   apt-get install -y postgresql, unless initdb is already there
#   scripts/ci_postgres.sh check     print where initdb/pg_ctl are; exit 1 if they are missing
#
# Only the binaries are installed: no cluster is created or started here (the Debian package's own
# cluster is not used either). The tests start a throwaway cluster on 127.0.0.1 and stop it
# (tests/pg.py); as root the server runs as the `postgres` OS user the package creates.
set -euo pipefail

find_initdb() {
  local found
  found=$(ls -1d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$found" ]; then
    found=$(command -v initdb 2>/dev/null || true)
  fi
  [ -n "$found" ] && [ -x "$(dirname "$found")/pg_ctl" ] && echo "$found"
}

case "${1:-}" in
  install)
    if initdb=$(find_initdb); then
      echo "PostgreSQL server binaries present: $(dirname "$initdb")"
      exit 0
    fi
    if [ "$(id -u)" -eq 0 ]; then
      sudo=""
    elif command -v sudo >/dev/null 2>&1; then
      sudo="sudo"
    else
      echo "PostgreSQL server binaries missing and not root (no sudo): install the 'postgresql' package" >&2
      exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends postgresql
    if ! initdb=$(find_initdb); then
      echo "apt-get installed postgresql but initdb/pg_ctl are still missing" >&2
      exit 1
    fi
    echo "PostgreSQL server binaries installed: $(dirname "$initdb")"
    ;;
  check)
    if initdb=$(find_initdb); then
      echo "$(dirname "$initdb")"
    else
      echo "PostgreSQL server binaries (initdb, pg_ctl) missing: run scripts/ci_postgres.sh install" >&2
      exit 1
    fi
    ;;
  *)
    echo "usage: $0 install|check" >&2
    exit 2
    ;;
esac
