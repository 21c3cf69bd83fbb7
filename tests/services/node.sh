#!/usr/bin/env bash
# Installs Node.js when it is missing: the search page's query parser (dashboard/static/query.js)
# is tested by running it under node (tests/test_site_query.py), without a browser.
set -euo pipefail

if ! command -v node >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends nodejs >/dev/null
    else
        echo "node.sh: node missing and cannot apt-get install it (not root); the query parser tests will skip" >&2
    fi
fi
