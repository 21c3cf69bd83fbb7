#!/usr/bin/env bash
# Installs what the dashboard's browser tests need, only when it is missing:
# Debian's chromium (system package; Playwright's own browser download cannot
# run here) and Playwright for Python in $VENV.  Idempotent; safe to rerun.
set -euo pipefail
VENV="${VENV:-.venv}"

if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
    else
        echo "chromium.sh: chromium missing and cannot apt-get install it (not root); browser tests will skip" >&2
    fi
fi

if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -c "import playwright" >/dev/null 2>&1; then
    # Only the Python driver; never `playwright install` (it downloads a browser).
    "$VENV/bin/python" -m pip install -q "playwright>=1.40"
fi
