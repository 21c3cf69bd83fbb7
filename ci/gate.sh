#!/usr/bin/env bash
# torchconform per-build CI gate, for any CI system (GitHub Actions: see
# ci/workflows/gate.yml, which calls this script).
#
#   TC_BUILD=my-backend-1234 TC_BRANCH=main bash ci/gate.sh
#
# 1. runs the quick selection on the device under test, streaming every outcome
#    into the results store ($TORCHCONFORM_DB, default ./torchconform.db);
# 2. gates the build against the newest earlier build of the baseline branch
#    (flaky confirmation included): Markdown summary, JUnit of the verdicts;
# 3. generates the static coverage site.
# Exit status: the gate's: 0 passed, 1 failed, 2 usage or input error.
#
# Settings (environment):
#   TC_BUILD      build name, unique per CI run (required)
#   TC_BRANCH     branch being built (default: git's current branch)
#   TC_BASELINE   baseline: latest:BRANCH, latest or a build name (default latest:$TC_BRANCH;
#                 for a pull request use latest:<target branch>)
#   TC_DEVICE     device under test (default refdev; Neuron: neuron)
#   TC_PROFILE    backend profile name or profile.yaml path (default: named like the device)
#   TC_BACKEND_MODULE  module that registers the backend (Neuron: torch_neuronx; default: the profile's)
#   TC_SUITE / TC_SELECTION   what `torchconform run` runs (default ops / quick)
#   TC_OPS        comma-separated OpInfo names to restrict the suite to (default: all of the selection)
#   TC_TESTS      instead of a torchconform suite, pytest paths to run with the plugin
#   TC_JOBS       parallel workers (default 2; Neuron: one per NeuronCore)
#   TC_CONFIG     gate config (default: the shipped ci/gate.yaml)
#   TC_RERUNS     flaky-confirmation reruns per failing test (default: from the config)
#   TC_OUT        folder for the summary, JUnit files and site (default tc-out)
#   TC_SITE       1 (default) to build the site, 0 to skip it
set -euo pipefail

: "${TC_BUILD:?set TC_BUILD to a unique build name, e.g. <project>-<CI run number>}"
TC_BRANCH="${TC_BRANCH:-$(git rev-parse --abbrev-ref HEAD 2>/dev/null || true)}"
TC_BASELINE="${TC_BASELINE:-latest${TC_BRANCH:+:$TC_BRANCH}}"
TC_DEVICE="${TC_DEVICE:-refdev}"
TC_SUITE="${TC_SUITE:-ops}"
TC_SELECTION="${TC_SELECTION:-quick}"
TC_JOBS="${TC_JOBS:-2}"
TC_OUT="${TC_OUT:-tc-out}"
TC_SITE="${TC_SITE:-1}"
PYTHON="${PYTHON:-python}"
export TORCHCONFORM_DB="${TORCHCONFORM_DB:-torchconform.db}"
mkdir -p "$TC_OUT"

device_args=(--tc-device "$TC_DEVICE")
[ -n "${TC_PROFILE:-}" ] && device_args+=(--tc-profile "$TC_PROFILE")
[ -n "${TC_BACKEND_MODULE:-}" ] && device_args+=(--tc-backend-module "$TC_BACKEND_MODULE")

echo "::group::torchconform: run $TC_BUILD on $TC_DEVICE"
set +e
if [ -n "${TC_TESTS:-}" ]; then
    # shellcheck disable=SC2086  # TC_TESTS is a list of paths
    "$PYTHON" -m pytest -p no:cacheprovider ${TC_JOBS:+-n "$TC_JOBS"} $TC_TESTS "${device_args[@]}" \
        --tc-build "$TC_BUILD" --tc-db "$TORCHCONFORM_DB" --tc-junit "$TC_OUT/junit.xml"
else
    run_args=(--suite "$TC_SUITE" --selection "$TC_SELECTION" --device "$TC_DEVICE" --build "$TC_BUILD"
              -n "$TC_JOBS" --junit "$TC_OUT/junit.xml")
    [ -n "${TC_PROFILE:-}" ] && run_args+=(--profile "$TC_PROFILE")
    [ -n "${TC_BACKEND_MODULE:-}" ] && run_args+=(--backend-module "$TC_BACKEND_MODULE")
    [ -n "${TC_OPS:-}" ] && run_args+=(--ops "$TC_OPS")
    "$PYTHON" -m torchconform run "${run_args[@]}"
fi
run_status=$?
set -e
echo "::endgroup::"
# pytest: 0 all passed, 1 some tests failed (the gate judges those); anything
# else (interrupted, internal error, usage error, no tests) is not a build to gate.
if [ "$run_status" -gt 1 ]; then
    echo "torchconform: the run ended with status $run_status (not a test failure); not gating" >&2
    exit 2
fi

gate_args=(--build "$TC_BUILD" --baseline "$TC_BASELINE" --summary "$TC_OUT/gate.md"
           --junit "$TC_OUT/gate-junit.xml" --allow-no-baseline)
[ -n "$TC_BRANCH" ] && gate_args+=(--branch "$TC_BRANCH")
[ -n "${TC_CONFIG:-}" ] && gate_args+=(--config "$TC_CONFIG")
[ -n "${TC_RERUNS:-}" ] && gate_args+=(--reruns "$TC_RERUNS")
set +e
"$PYTHON" -m torchconform gate "${gate_args[@]}"
gate_status=$?
set -e

if [ "$TC_SITE" = "1" ]; then
    # The site is a report, not a verdict: a failure here must not hide the gate's.
    "$PYTHON" -m torchconform site --out "$TC_OUT/site" || echo "torchconform: site generation failed" >&2
fi
exit "$gate_status"
