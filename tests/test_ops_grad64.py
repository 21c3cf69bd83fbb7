"""float64 gradients in the ops quick selection (issue 33, 4b): each differentiable op's
backward against CPU's in float64, which finds amax's gradient wrong where float64
computes as float32 (refdev young-backend) and the quick selection ran float32 only."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import OPS_SUITE, by_name, child_env, run_pytest  # noqa: E402


def test_quick_selection_checks_gradients_in_float64_and_full_in_every_dtype(monkeypatch):
    from torchconform.suites.ops.selection import allowed_dtypes

    monkeypatch.setenv("TORCHCONFORM_SELECTION", "quick")
    assert allowed_dtypes("compare_cpu_grad") == (torch.float32, torch.float64)
    assert torch.float64 not in allowed_dtypes("out")  # the other variants keep float32
    monkeypatch.setenv("TORCHCONFORM_SELECTION", "full")
    assert allowed_dtypes("compare_cpu_grad") is None


def test_amax_float64_gradient_is_wrong_under_float64_as_float32(tmp_path):
    """Samples made on CPU keep float64 bits on the device; refdev rounds amax's result
    through float32, so no input equals the maximum and the tie mask of amax's backward
    is empty: the gradient is off by far more than float32's precision."""
    args = [OPS_SUITE, "--tc-device", "refdev", "--tc-ops", "amax", "-k", "compare_cpu_grad",
            "--tc-samples-on", "cpu", "--tc-timeout", "240"]
    proc, _, outcomes = run_pytest(args, tmp_path, env=child_env(TORCHCONFORM_REFDEV_PROFILE="young-backend"))
    got = by_name(outcomes)
    f32, f64 = got["test_compare_cpu_grad_amax_refdev_float32"], got["test_compare_cpu_grad_amax_refdev_float64"]
    assert f32.outcome == "pass", (f32.message, proc.stdout[-1500:])
    assert f64.outcome == "fail" and f64.dtype == "float64", (f64.outcome, f64.message)
    # wrong math, not float32 rounding: the error is not a near miss
    assert f64.max_abs_err is None or math.isinf(f64.max_abs_err) or f64.max_abs_err > 0.1, f64.max_abs_err
    # the trait explains it (the rerun with the trait off passes): counted apart, never hidden
    assert f64.kind == "trait:float64_as_float32", (f64.kind, f64.message)
