"""The ModuleInfo suite on refdev and on CPU: same classification as the ops suite."""
import json
import os
import subprocess
import sys

import pytest

from torchconform.suites import modules
from support import child_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PICK = ["nn.Linear", "nn.GELU", "nn.GroupNorm", "nn.MultiheadAttention"]


def run(tmp_path, device):
    out = tmp_path / f"{device}.jsonl"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *modules.pytest_args("quick", PICK), "--tc-device", device, "--tc-jsonl", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=child_env())
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    got = {r["name"]: r for r in rows if r.get("type") == "outcome"}
    assert got, proc.stdout[-3000:] + proc.stderr[-3000:]
    return got


def test_selection_arguments():
    args = modules.pytest_args("full", ["nn.Linear", "nn.GRU"])
    assert args[0].endswith(os.path.join("suites", "modules", "test_modules.py"))
    assert args[1:] == ["--tc-selection", "full", "--tc-ops", "nn.Linear,nn.GRU"]
    from torchconform.errors import UserError

    with pytest.raises(UserError, match="unknown modules selection 'most'"):
        modules.pytest_args("most")


def test_modules_on_refdev_forward_and_backward(tmp_path):
    got = run(tmp_path, "refdev")
    assert all(r["cls"] == "TestModuleREFDEV" and r["variant"] == "cpu_gpu_parity" for r in got.values())
    assert got["test_cpu_gpu_parity_nn_Linear_refdev_float32"]["outcome"] == "pass"
    gelu = got["test_cpu_gpu_parity_nn_GELU_refdev_float32"]
    # forward works, the backward needs an operator refdev lacks
    assert (gelu["outcome"], gelu["kind"], gelu["missing_op"]) == ("skip_backend", "missing_op", "aten::gelu_backward.grad_input")
    from torchconform import refdev

    assert "aten::gelu_backward.grad_input" in refdev.describe("young-backend")["missing"]
    # ModuleInfo's own skip for TestModule.test_cpu_gpu_parity applies: eligibility
    assert got["test_cpu_gpu_parity_nn_GroupNorm_refdev_float32"]["outcome"] == "skip_eligibility"
    assert got["test_cpu_gpu_parity_nn_MultiheadAttention_train_mode_refdev_float32"]["outcome"] == "skip_eligibility"
    mha = got["test_cpu_gpu_parity_nn_MultiheadAttention_eval_mode_refdev_float32"]
    assert (mha["outcome"], mha["kind"]) == ("skip_backend", "missing_op")


def test_modules_on_cpu_have_no_backend_skips(tmp_path):
    got = run(tmp_path, "cpu")
    assert len(got) == 5
    assert not [r for r in got.values() if r["outcome"] == "skip_backend"]
    assert got["test_cpu_gpu_parity_nn_GELU_cpu_float32"]["outcome"] == "pass"
