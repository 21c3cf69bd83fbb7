#!/usr/bin/env bash
# Installs what the model-zoo and sweep tests need, only when it is missing:
# transformers (extra `zoo`) and Ray (extra `ray`, for the Ray engine test).
# Neither depends on torch, so the local CPU torch stays as it is; pip is told
# to keep it anyway.  Idempotent; safe to rerun.
set -euo pipefail
VENV="${VENV:-.venv}"
PY="$VENV/bin/python"
[ -x "$PY" ] || exit 0

TORCH_PIN="torch==$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || echo 2.13.0)"

if ! "$PY" -c "import transformers" >/dev/null 2>&1; then
    "$PY" -m pip install -q "transformers>=4.45" "$TORCH_PIN"
fi
if ! "$PY" -c "import ray" >/dev/null 2>&1; then
    "$PY" -m pip install -q "ray[default]>=2.9" "$TORCH_PIN"
fi
