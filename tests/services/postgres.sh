#!/usr/bin/env bash
# PostgreSQL for the store's tests: Debian's server binaries and psycopg in $VENV.
# Idempotent: installs only what is missing.  The tests start their own
# throwaway server (tests/pg.py); this script only makes the binaries exist.
set -euo pipefail
VENV="${VENV:-.venv}"

have_server() {
    command -v initdb >/dev/null 2>&1 && return 0
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

if ! have_server; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq postgresql >/dev/null
    else
        echo "postgres.sh: PostgreSQL server binaries missing and not root; store tests will skip PostgreSQL outside CI" >&2
    fi
fi

if ! "$VENV/bin/python" -c "import psycopg" >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip install -q "psycopg[binary]>=3.1"
fi
