"""The upstream suite on a fake PyTorch checkout (tests/fixtures/upstream): file
selection, the checkout/torch version check, PyTorch's own out-of-tree hooks, and
the outcomes on refdev (eligibility skips from PyTorch's decorators, missing-op
backend skips, skiplist skips through op_overrides)."""
import datetime as dt
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from torchconform.errors import UserError
from torchconform.suites import upstream
from support import child_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(ROOT, "tests", "fixtures", "upstream")
FILES = ["test_fake_ops", "test_fake_tensor_ops.py"]


def fake_checkout(tmp_path, commit=None, version="2.13.0a0"):
    src = tmp_path / "pytorch"
    shutil.copytree(os.path.join(FAKE, "test"), src / "test")
    (src / "version.txt").write_text(version + "\n")
    if commit:
        (src / ".git" / "refs" / "heads").mkdir(parents=True)
        (src / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (src / ".git" / "refs" / "heads" / "main").write_text(commit + "\n")
    return str(src)


def test_default_selection_is_the_device_generic_files():
    default = upstream.load_config()["selections"]["default"]
    assert default == ["test_ops", "test_binary_ufuncs", "test_unary_ufuncs", "test_reductions", "test_view_ops",
                       "test_indexing", "test_shape_ops", "test_sort_and_select", "test_tensor_creation_ops",
                       "test_type_promotion", "test_nn", "test_modules", "test_torch"]


def test_source_and_file_errors_are_user_errors(tmp_path, monkeypatch):
    monkeypatch.delenv(upstream.SRC_ENV, raising=False)
    with pytest.raises(UserError, match="pass --pytorch-src PATH or set TORCHCONFORM_PYTORCH_SRC"):
        upstream.pytest_args(None)
    with pytest.raises(UserError, match="has no test/ folder"):
        upstream.pytest_args(str(tmp_path))
    src = fake_checkout(tmp_path)
    with pytest.raises(UserError, match="no test file 'test_nope'"):
        upstream.pytest_args(src, files="test_nope", check_version=False)
    with pytest.raises(UserError, match="unknown upstream selection 'huge'"):
        upstream.pytest_args(src, selection="huge", check_version=False)
    monkeypatch.setenv(upstream.SRC_ENV, src)
    args = upstream.pytest_args(None, files=",".join(FILES), check_version=False)
    assert args[-2:] == [os.path.join(src, "test", "test_fake_ops.py"), os.path.join(src, "test", "test_fake_tensor_ops.py")]
    assert "--noconftest" in args and args[args.index("--rootdir") + 1] == src


def test_checkout_version_check(tmp_path):
    head = torch.version.git_version
    assert upstream.check_checkout(fake_checkout(tmp_path / "a", commit=head)) is None
    other = "0123456789abcdef0123456789abcdef01234567"
    message = upstream.check_checkout(fake_checkout(tmp_path / "b", commit=other))
    assert message and "is at commit 0123456789ab (2.13.0a0)" in message and head[:12] in message
    assert f"checkout {head}" in message
    message = upstream.check_checkout(fake_checkout(tmp_path / "c", version="2.11.0a0"))
    assert message and "is version 2.11.0a0" in message
    message = upstream.check_checkout(fake_checkout(tmp_path / "d"))
    assert message and "not a git checkout" in message


def test_skiplist_op_entries_become_pytorch_op_overrides(tmp_path):
    from torch.testing._internal.common_device_type import CPUTestBase

    from torchconform.skiplists.schema import load_skiplist
    from torchconform.suites.upstream.plugin import build_op_overrides

    path = tmp_path / "l.yaml"
    path.write_text("""\
backend: refdev
entries:
  - id: sin-f32
    match: {op: sin, dtype: float32, kind: test_fake_compare_cpu}
    mode: skip
    category: known_bug
    reason: sin is off by 1e-3 for large inputs
    issue: https://github.com/example/refdev/issues/21
    added: 2026-11-30
""")
    entries = load_skiplist(str(path)).entries
    overrides, delegated = build_op_overrides(entries)
    assert list(overrides) == ["sin"] and delegated == {"l.yaml::sin-f32"}
    info = overrides["sin"][0]
    assert info.test_name == "test_fake_compare_cpu" and info.dtypes == (torch.float32,)
    # PyTorch decides where it applies, exactly as for OpInfo's own skips.
    assert info.is_active("TestFakeCommon", "test_fake_compare_cpu", "refdev", torch.float32, {})
    assert not info.is_active("TestFakeCommon", "test_fake_compare_cpu", "refdev", torch.float64, {})
    assert hasattr(CPUTestBase, "set_test_configs")   # the hooks this torch offers


def _upstream_run(tmp_path_factory, workers: int):
    tmp = tmp_path_factory.mktemp("upstream")
    src = fake_checkout(tmp, commit=torch.version.git_version)
    listing = tmp / "refdev-upstream.yaml"
    listing.write_text(f"""\
backend: refdev
entries:
  - id: sin-precision
    match: {{op: sin, dtype: float32, kind: test_fake_compare_cpu}}
    mode: skip
    category: known_bug
    reason: sin differs from CPU beyond tolerance for large inputs
    issue: https://github.com/example/refdev/issues/21
    added: {dt.date.today()}
""")
    out = tmp / "out.jsonl"
    # Through the CLI, as a user runs it: the checkout and files travel in the environment.
    env = child_env(TORCHCONFORM_PYTORCH_SRC=src, TORCHCONFORM_UPSTREAM_FILES=",".join(FILES))
    proc = subprocess.run([sys.executable, "-m", "torchconform.cli.main", "run", "--suite", "upstream",
                           "--device", "refdev", "-n", str(workers), "--no-db", "--jsonl", str(out), "--",
                           "--tc-skiplist", str(listing)],
                          cwd=str(tmp), env=env, capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return proc, {r["test_id"]: r for r in rows if r.get("type") == "outcome"}


@pytest.fixture(scope="module")
def refdev_run(tmp_path_factory):
    return _upstream_run(tmp_path_factory, 0)


def test_parallel_upstream_run_classifies_every_test_as_the_serial_run(refdev_run, tmp_path_factory):
    # Under xdist the controller checks the device in a thread while the workers start;
    # the upstream plugin importing torch there at the same time broke the run (exit 3).
    proc, parallel = _upstream_run(tmp_path_factory, 2)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "INTERNALERROR" not in proc.stdout + proc.stderr and "doctor" not in proc.stderr
    _, serial = refdev_run
    run = json.loads(next(line for line in (tmp_path_factory.getbasetemp() / "upstream1" / "out.jsonl")
                          .read_text().splitlines()))["run"]
    # The PyTorch source that ran, beside the checkout the run was started from.
    assert run["pytorch_commit"] == torch.version.git_version and run["pytorch_branch"] == "main"
    assert run["pytorch_src"].endswith("pytorch")

    def key(r):
        return r["outcome"], r["kind"], r["missing_op"], r["skiplist_entry"], r["fallback_ops"]

    assert {t: key(r) for t, r in parallel.items()} == {t: key(r) for t, r in serial.items()}


def test_fake_upstream_outcomes_on_refdev(refdev_run):
    proc, got = refdev_run
    assert got, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "torchconform: warning" not in proc.stderr          # the checkout matches the installed torch
    assert all("REFDEV::" in tid for tid in got)                # one class name per file, never PRIVATEUSE1
    by_name = {tid.split("::")[-1]: r for tid, r in got.items()}
    assert set(by_name) == {
        "test_fake_compare_cpu_add_refdev_float32", "test_fake_compare_cpu_mul_refdev_float32",
        "test_fake_compare_cpu_cos_refdev_float32", "test_fake_compare_cpu_remainder_refdev_float32",
        "test_fake_compare_cpu_sin_refdev_float32", "test_fake_cuda_graphs_refdev", "test_fake_native_only_refdev",
        "test_fake_skipped_upstream_refdev", "test_fake_add_scalar_refdev", "test_fake_view_refdev",
        "test_fake_cpu_only_refdev", "test_fake_trunc_refdev_float32", "test_fake_trunc_refdev_float64",
        "test_fake_run_tests_globals_refdev"}

    def outcome(name):
        r = by_name[name]
        return r["outcome"], r["kind"], r["missing_op"] or r["skiplist_entry"]

    # PyTorch's own decorators: eligibility, whatever the device can do.
    assert outcome("test_fake_cuda_graphs_refdev")[0] == "skip_eligibility"
    assert outcome("test_fake_cpu_only_refdev")[0] == "skip_eligibility"
    assert outcome("test_fake_skipped_upstream_refdev")[0] == "skip_eligibility"
    # Missing operators: backend skips naming the overload the dispatcher named.
    from torchconform import refdev

    missing = set(refdev.describe("young-backend")["missing"])
    for name, op in (("test_fake_compare_cpu_cos_refdev_float32", "aten::cos.out"),
                     ("test_fake_compare_cpu_remainder_refdev_float32", "aten::remainder.Tensor_out"),
                     ("test_fake_trunc_refdev_float32", "aten::trunc.out"),
                     ("test_fake_trunc_refdev_float64", "aten::trunc.out")):
        assert outcome(name) == ("skip_backend", "missing_op", op) and op in missing
    # The skiplist entry reached the test through PyTorch's op_overrides.
    assert outcome("test_fake_compare_cpu_sin_refdev_float32") == ("skip_backend", "skiplist", "refdev-upstream.yaml::sin-precision")
    for name in ("test_fake_compare_cpu_add_refdev_float32", "test_fake_compare_cpu_mul_refdev_float32",
                 "test_fake_add_scalar_refdev", "test_fake_view_refdev", "test_fake_run_tests_globals_refdev"):
        assert outcome(name)[0] in ("pass", "pass_fallback"), (name, by_name[name]["message"])
    assert by_name["test_fake_compare_cpu_add_refdev_float32"]["op"] == "add"
    # assertEqual recorded tolerance tiers (suites/upstream/tiers.py): refdev runs the CPU's kernels
    assert by_name["test_fake_compare_cpu_add_refdev_float32"]["tier"] == "exact"
    assert by_name["test_fake_view_refdev"]["tier"] == "exact" and by_name["test_fake_cpu_only_refdev"]["tier"] == ""
