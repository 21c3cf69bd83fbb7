#!/usr/bin/env bash
# torchconform nightly sweep, for any CI system (GitHub Actions: see
# ci/workflows/nightly.yml, which calls this script).
#
#   bash ci/nightly.sh shard INDEX COUNT   # run shard INDEX (0-based) of COUNT, export it
#   bash ci/nightly.sh merge FILE...       # merge exported shards into one build
#   bash ci/nightly.sh site                # generate the static site (GitHub Pages ready)
#   bash ci/nightly.sh all                 # one machine: every shard in turn, then the site
#
# Shards of one build share its name ($TC_BUILD).  When every shard writes to
# one database (PostgreSQL: TORCHCONFORM_DB=postgresql+psycopg://...) they merge
# by themselves and `merge` is not needed.  With a SQLite file per machine, each
# shard exports its outcomes as JUnit ($TC_OUT/shard-INDEX.xml) and `merge`
# ingests them all into the one build on the machine that publishes.
#
# Settings (environment):
#   TC_BUILD      build name shared by the shards (default nightly-<UTC date>)
#   TC_SUITES     suites to sweep, space separated (default "ops"; add "models" with the zoo extra)
#   TC_SELECTION  selection (default full)
#   TC_DEVICE     device under test (default refdev; Neuron: neuron)
#   TC_PROFILE    backend profile name or profile.yaml path (default: named like the device)
#   TC_WORKERS    local worker processes per shard (default 2; Neuron: one per NeuronCore)
#   TC_TIMEOUT    seconds per test / model before it is a timeout (default 600)
#   TC_OUT        folder for exports and the site (default tc-out)
#   TORCHCONFORM_DB  results store (default ./torchconform.db)
set -euo pipefail

TC_BUILD="${TC_BUILD:-nightly-$(date -u +%Y%m%d)}"
TC_SUITES="${TC_SUITES:-ops}"
TC_SELECTION="${TC_SELECTION:-full}"
TC_DEVICE="${TC_DEVICE:-refdev}"
TC_WORKERS="${TC_WORKERS:-2}"
TC_TIMEOUT="${TC_TIMEOUT:-600}"
TC_OUT="${TC_OUT:-tc-out}"
PYTHON="${PYTHON:-python}"
export TORCHCONFORM_DB="${TORCHCONFORM_DB:-torchconform.db}"
mkdir -p "$TC_OUT"

usage() {
    echo "usage: nightly.sh shard INDEX COUNT | merge FILE... | site | all" >&2
    exit 2
}

run_shard() {
    local index="$1" count="$2" suite status=0
    case "$index$count" in *[!0-9]*|"") usage ;; esac
    [ "$index" -lt "$count" ] || usage
    for suite in $TC_SUITES; do
        args=(--suite "$suite" --selection "$TC_SELECTION" --build "$TC_BUILD" --shards "$count" --shard "$index"
              --device "$TC_DEVICE" --workers "$TC_WORKERS" --timeout "$TC_TIMEOUT")
        [ -n "${TC_PROFILE:-}" ] && args+=(--profile "$TC_PROFILE")
        # Test failures are data, not a broken nightly; only a usage/input error (2) or worse stops here.
        "$PYTHON" -m torchconform sweep "${args[@]}" || status=$?
        if [ "$status" -gt 1 ]; then
            echo "torchconform: sweep of $suite shard $index/$count ended with status $status" >&2
            exit "$status"
        fi
        status=0
    done
    "$PYTHON" -m torchconform export --build "$TC_BUILD" --format junit --out "$TC_OUT/shard-$index.xml"
    "$PYTHON" -m torchconform summary --build "$TC_BUILD"
}

merge() {
    [ "$#" -ge 1 ] || usage
    "$PYTHON" -m torchconform ingest "$@" --build "$TC_BUILD" --append
    "$PYTHON" -m torchconform summary --build "$TC_BUILD"
}

site() {
    "$PYTHON" -m torchconform site --out "$TC_OUT/site" --github-pages
}

case "${1:-}" in
    shard) [ "$#" -eq 3 ] || usage; run_shard "$2" "$3" ;;
    merge) shift; merge "$@" ;;
    site) site ;;
    all) run_shard 0 1; site ;;
    *) usage ;;
esac
