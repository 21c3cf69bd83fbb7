#!/usr/bin/env bash
# The CUDA check of a real GPU (issue 29): ops quick, modules quick, traits and the
# census against `cuda`, one build, figures printed; run from the repository root on
# a machine with a GPU and a CUDA build of torch.  Its Python packages that the
# machine lacks may come as wheels in .whl/ (no network there: see docs/backends.md).
#   OUT=/some/folder [STEPS="ops modules"] bash bench/gpu_check.sh [workers]
set -uo pipefail
OUT=${OUT:-/tmp/gpu-check}
WORKERS=${1:-8}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/tc-site .whl/*.whl \
    || { echo "gpu_check: installing .whl/ failed"; exit 2; }
  export PYTHONPATH=/tmp/tc-site${PYTHONPATH:+:$PYTHONPATH}
fi
# From a folder of its own: in the repository root, its torchconform/ folder would
# shadow the installed package; the run logs land here too.
WORK=${WORK:-/tmp/gpu-check-work}
mkdir -p "$WORK" && cd "$WORK" || exit 2
$PY - <<'EOF' || exit 2
import torch
assert torch.cuda.is_available(), "no CUDA device visible to torch"
print(f"gpu_check: torch {torch.__version__}, {torch.cuda.get_device_name(0)}, {torch.cuda.device_count()} device(s)")
EOF
DB="$OUT/cuda.db"
BUILD="cuda-$(date -u +%Y%m%d-%H%M)"
export TORCHCONFORM_DB="$DB" PYTHONUNBUFFERED=1
STEPS=${STEPS:-ops modules traits census summary}   # a rerun may take fewer
step() {  # name, time limit (s), command...
  local name=$1 limit=$2; shift 2
  case " $STEPS " in *" $name "*) ;; *) return 0 ;; esac
  local t0=$SECONDS
  timeout "$limit" "$@" > "$WORK/$name.txt" 2>&1
  local rc=$?
  printf 'gpu_check: %-8s exit %s  %4d s\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$OUT/steps.log"
  tail -n 30 "$WORK/$name.txt" | tee -a "$OUT/steps.log"
}
step ops     ${OPS_LIMIT:-240} $PY -m torchconform run --suite ops --selection quick --device cuda --build "$BUILD" -n "$WORKERS"
step modules ${MODULES_LIMIT:-180} $PY -m torchconform run --suite modules --selection quick --device cuda --build "$BUILD" -n "$WORKERS"
step traits  ${TRAITS_LIMIT:-120} $PY -m torchconform run --suite traits --device cuda --build "$BUILD" -n 0
step census  ${CENSUS_LIMIT:-90} $PY -m torchconform census --build "$BUILD" --device cuda --diff-only
step summary 60 $PY -m torchconform summary --build "$BUILD"
$PY -m torchconform summary --build "$BUILD" --json > "$OUT/summary.json" 2>&1
$PY -m torchconform census --build "$BUILD" --json > "$OUT/census.json" 2>/dev/null
tar -czf "$OUT/runs.tar.gz" -C "$WORK" . 2>/dev/null
echo "gpu_check: build $BUILD stored in $DB; step outputs and run logs in $OUT/runs.tar.gz"
