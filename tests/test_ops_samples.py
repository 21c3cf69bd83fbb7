"""The ops suite's samples (issue 29): the CPU reference of factory operators runs on
CPU, a missing operator that blocks sample creation says so, and ``--tc-samples-on cpu``
measures the operator itself on a device without random-number operators."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import OPS_SUITE, by_name, child_env, run_pytest  # noqa: E402

# A young backend without arange/linspace kernels and without the random fills that
# make_tensor uses (floats: uniform_; integers: random_.from).
PROFILE = """name: no-factories-no-random
description: test profile (tests/test_ops_samples.py)
missing:
  ops: [aten::arange, aten::linspace, aten::uniform_, aten::random_, aten::normal_]
"""
FACTORY_OPS = ("arange", "linspace", "full", "zeros_like", "full_like", "to")


@pytest.fixture
def refdev_name():
    from torchconform import refdev
    return refdev.load()


@pytest.fixture
def refdev_profile(monkeypatch):
    """The refdev backend profile as the suite's active profile (suites.common caches it)."""
    from torchconform.suites.common import active_profile

    monkeypatch.setenv("TORCHCONFORM_PROFILE", "refdev")
    active_profile.cache_clear()
    yield active_profile()
    active_profile.cache_clear()


# -- the CPU copy ------------------------------------------------------------------------
def test_cpu_copy_renames_every_device_argument(refdev_name):
    from torch.testing._internal.opinfo.core import SampleInput

    from torchconform.suites.ops.samples import cpu_copy

    dev = f"{refdev_name}:0"
    x = torch.ones(2, device=dev)
    sample = SampleInput(x, args=(dev, [torch.device(dev), x], torch.Size([2])),
                         kwargs={"device": dev, "dtype": torch.float32, "reduction": "mean",
                                 "other": torch.device(refdev_name), "name": f"{refdev_name}x"})
    cpu = cpu_copy(sample, dev)
    assert cpu.input.device.type == "cpu" and torch.equal(cpu.input, torch.ones(2))
    assert cpu.args[0] == "cpu" and cpu.args[1][0] == torch.device("cpu") and cpu.args[1][1].device.type == "cpu"
    assert isinstance(cpu.args[2], torch.Size)
    assert cpu.kwargs["device"] == "cpu" and cpu.kwargs["other"] == torch.device("cpu")
    # what does not name the device stays as it was
    assert cpu.kwargs["reduction"] == "mean" and cpu.kwargs["name"] == f"{refdev_name}x"
    assert cpu.kwargs["dtype"] is torch.float32
    # the device sample is untouched
    assert sample.kwargs["device"] == dev and sample.input.device.type == refdev_name


def test_copies_of_grad_samples_are_fresh_leaves(refdev_name):
    from torch.testing._internal.opinfo.core import SampleInput

    from torchconform.suites.ops.samples import cpu_copy, moved

    made = SampleInput(torch.randn(3, requires_grad=True), args=(torch.arange(3),), kwargs={"device": "cpu"})
    dev = moved(made, f"{refdev_name}:0", "cpu", leaf=True)
    assert dev.input.device.type == refdev_name and dev.input.requires_grad and dev.input.is_leaf
    assert not dev.args[0].requires_grad and dev.kwargs["device"] == f"{refdev_name}:0"
    back = cpu_copy(dev, f"{refdev_name}:0", leaf=True)
    assert back.input.requires_grad and back.input.is_leaf and torch.equal(back.input.detach(), made.input.detach())
    # a CPU copy never shares memory with what it copies (in-place operators)
    again = moved(made, "cpu", "cpu")
    again.input.add_(1)
    assert not torch.equal(again.input, made.input.detach())


@pytest.mark.parametrize("name", FACTORY_OPS)
def test_cpu_reference_of_factories_touches_no_device_tensor(refdev_name, name):
    """Every operator the CPU reference runs sees and makes CPU tensors only."""
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    from torchconform.suites.ops.samples import check_reference_on_cpu, cpu_copy, device_samples

    class Devices(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves((args, kwargs, out)):
                if isinstance(t, torch.Tensor):
                    self.seen.add((t.device.type, str(func)))
            return out

    op = next(o for o in op_db if o.name == name and not o.variant_test_name)
    dev = f"{refdev_name}:0"
    samples = list(device_samples(op, dev, torch.float32))
    assert samples
    named = 0
    for sample in samples:
        named += any(v == dev or v == torch.device(dev) for v in (*sample.args, *sample.kwargs.values()))
        cpu = cpu_copy(sample, dev)
        with Devices() as mode:
            result = op(cpu.input, *cpu.args, **cpu.kwargs)
        check_reference_on_cpu(result, name)
        assert {d for d, _ in mode.seen} <= {"cpu"}, sorted(mode.seen)
    if name in ("arange", "linspace", "full", "to"):
        assert named, f"{name}'s samples no longer name the device: the test lost its point"


def test_reference_on_the_device_is_said_loudly(refdev_name):
    from torchconform.suites.ops.samples import check_reference_on_cpu

    check_reference_on_cpu([torch.ones(1), None], "arange")
    with pytest.raises(AssertionError, match=rf"CPU reference of arange returned a tensor on {refdev_name}"):
        check_reference_on_cpu((torch.ones(1), torch.ones(1, device=refdev_name)), "arange")


def test_a_device_failure_is_never_a_cpu_failure(refdev_profile):
    from torchconform.suites.ops.samples import device_failure_verdict

    on_device = NotImplementedError("Could not run 'aten::arange.start_out' with arguments from the 'refdev' backend. "
                                    "This could be because the operator doesn't exist for this backend")
    verdict = device_failure_verdict(on_device)
    assert (verdict.kind, verdict.missing_op) == ("missing_op", "aten::arange.start_out")
    on_cpu = NotImplementedError("Could not run 'aten::foo' with arguments from the 'CPU' backend.")
    assert device_failure_verdict(on_cpu) is None
    assert device_failure_verdict(RuntimeError("result type Float can't be cast to Long")) is None


def test_samples_on_must_name_a_place(monkeypatch):
    from torchconform.errors import UserError
    from torchconform.suites.ops.samples import samples_on

    monkeypatch.delenv("TORCHCONFORM_SAMPLES_ON", raising=False)
    assert samples_on() == "device"
    monkeypatch.setenv("TORCHCONFORM_SAMPLES_ON", "CPU")
    assert samples_on() == "cpu"
    monkeypatch.setenv("TORCHCONFORM_SAMPLES_ON", "host")
    with pytest.raises(UserError, match="use device .* or cpu"):
        samples_on()


# -- end to end on refdev -------------------------------------------------------------------
def _run(tmp_path, *extra, name):
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE)
    args = [OPS_SUITE, "--tc-device", "refdev", "--tc-ops", "add,arange", "--tc-timeout", "300",
            "-k", "compare_cpu_ and float32 and not grad", *extra]
    _, run, outcomes = run_pytest(args, tmp_path, jsonl=name, env=child_env(TORCHCONFORM_REFDEV_PROFILE=profile))
    assert run["device"] == "refdev"
    return by_name(outcomes)


def test_samples_made_on_the_device(tmp_path):
    got = _run(tmp_path, name="device.jsonl")
    # arange's samples are Python numbers: the device's arange is what fails, and its CPU
    # reference (on CPU) did not (before issue 29 it ran on the device and passed vacuously)
    arange = got["test_compare_cpu_arange_refdev_float32"]
    assert (arange.outcome, arange.kind, arange.missing_op) == ("skip_backend", "missing_op", "aten::arange.start_out")
    assert not arange.message.startswith("sample creation:"), arange.message
    # add works on the device, but its samples cannot be made there
    add = got["test_compare_cpu_add_refdev_float32"]
    assert (add.outcome, add.kind, add.missing_op, add.op) == ("skip_backend", "missing_op", "aten::uniform_", "add")
    assert add.message.startswith("sample creation: Could not run 'aten::uniform_'"), add.message
    assert "--tc-samples-on cpu" in add.message


def test_samples_made_on_cpu_measure_the_operator(tmp_path):
    got = _run(tmp_path, "--tc-samples-on", "cpu", name="cpu.jsonl")
    add = got["test_compare_cpu_add_refdev_float32"]
    assert (add.outcome, add.kind) == ("pass", ""), add.message
    arange = got["test_compare_cpu_arange_refdev_float32"]
    assert (arange.outcome, arange.missing_op) == ("skip_backend", "aten::arange.start_out")


def test_samples_on_option_checked(tmp_path):
    proc, _, _ = run_pytest([OPS_SUITE, "--tc-device", "refdev", "--tc-samples-on", "host", "--co"], tmp_path,
                            check_rc=None)
    assert proc.returncode == 4
    assert "--tc-samples-on 'host' is not a place to make samples; use device (the default) or cpu" in proc.stderr
