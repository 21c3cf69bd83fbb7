"""The ops suite's error-input variant (issue 33, 4b): OpInfo's error inputs on the device,
each held to what CPU does with its twin.  The rule on small fake operators (``meta``
standing in for the device), then the acceptance case on refdev young-backend: ``cat``
with an ``out=`` that is one of its inputs, which CPU rejects."""
from __future__ import annotations

import sys
import unittest
from pathlib import Path

import pytest
import torch
from torch.testing._internal.opinfo.core import ErrorInput, SampleInput

from torchconform.suites.ops import error_inputs

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import OPS_SUITE, by_name, child_env, run_pytest  # noqa: E402


class FakeOp:
    """An OpInfo-shaped operator: ``behaviour(device_type)`` says what the kernel does
    with a bad input on that device: 'reject' (ValueError), 'accept', 'other' (TypeError),
    'missing' (the dispatcher's missing-operator error)."""

    name = "fake"

    def __init__(self, device_behaviour: str, cpu_behaviour: str = "reject", n: int = 2):
        self.behaviour = {"cpu": cpu_behaviour, "meta": device_behaviour}
        self.n = n

    def error_inputs(self, device):
        for i in range(self.n):
            x = torch.zeros(0, device=device)
            yield ErrorInput(SampleInput([x, torch.ones(2, device=device)], kwargs={"out": x}),
                             error_type=ValueError, error_regex=f"bad input {i}")

    def __call__(self, inputs, out=None):
        what = self.behaviour[inputs[0].device.type]
        if what == "reject":
            raise ValueError("bad input")
        if what == "other":
            raise TypeError("not the expected error")
        if what == "missing":
            raise NotImplementedError("Could not run 'aten::fake' with arguments from the 'meta' backend.")
        return out


def _refusal(exc):
    return "Could not run" in str(exc)


def _run(op):
    return error_inputs.check(op, "meta", op.name, _refusal)


def test_the_expected_error_on_the_device_passes():
    got = _run(FakeOp("reject"))
    assert (got.applied, got.problems, got.blocked) == (2, [], None)
    error_inputs.verdict(got)  # returns: a pass


def test_an_input_the_device_accepts_fails_naming_it_and_the_aliasing():
    got = _run(FakeOp("accept"))
    with pytest.raises(AssertionError) as caught:
        error_inputs.verdict(got)
    text = str(caught.value)
    assert text.startswith("2 of 2 error inputs: accepted an input CPU rejects: fake(")
    assert "out=Tensor[0] float32 (the same tensor as input[0])" in text
    assert "(CPU: ValueError: bad input)" in text


def test_another_error_type_fails_with_both_types():
    got = _run(FakeOp("other"))
    assert got.problems and got.problems[0].startswith("raised TypeError where CPU raises ValueError: fake(")


def test_a_missing_operator_is_the_backend_refusal_not_an_answer():
    # NotImplementedError is a RuntimeError: were the refusal not asked first, an expected
    # RuntimeError would let a missing operator pass
    op = FakeOp("missing")
    got = _run(op)
    assert got.problems == [] and isinstance(got.blocked, NotImplementedError)
    with pytest.raises(NotImplementedError):
        error_inputs.verdict(got)


def test_an_input_cpu_accepts_does_not_apply():
    got = _run(FakeOp("accept", cpu_behaviour="accept"))
    assert (got.applied, got.not_rejected_on_cpu) == (0, 2)
    with pytest.raises(unittest.SkipTest, match="no error input applies on CPU"):
        error_inputs.verdict(got)


def test_device_inputs_pair_with_cpu_twins_by_expectation():
    class DeviceOnly(FakeOp):
        def error_inputs(self, device):
            yield from super().error_inputs(device)
            if device != "cpu":  # a device-type branch CPU never sees
                yield ErrorInput(SampleInput([torch.zeros(1, device=device)]), error_regex="device only")

    pairs, unpaired = error_inputs.paired(DeviceOnly("reject"), "meta")
    assert unpaired == 1 and len(pairs) == 2
    assert [(d.error_regex, c.error_regex) for d, c in pairs] == [("bad input 0", "bad input 0"),
                                                                  ("bad input 1", "bad input 1")]
    assert {c.sample_input.input[0].device.type for _, c in pairs} == {"cpu"}


def test_quick_selection_instantiates_error_inputs_for_ops_that_have_them(monkeypatch):
    from torch.testing._internal.common_methods_invocations import op_db

    from torchconform.suites.ops.selection import VARIANTS, select_ops

    monkeypatch.setenv("TORCHCONFORM_SELECTION", "quick")
    monkeypatch.delenv("TORCHCONFORM_OPS", raising=False)
    names = {op.name for op in select_ops(op_db) if error_inputs.has_error_inputs(op)}
    assert "error_inputs" in VARIANTS and {"cat", "gather", "index_select"} <= names
    assert "abs" not in names  # no error inputs: no test at all rather than a skip


def test_refdev_rejects_cat_with_an_overlapping_out_as_cpu_does(tmp_path):
    """Before refdev gave one CPU alias per device tensor, ``torch.cat((x, y), out=x)`` with
    an empty ``x`` was accepted on refdev (two aliases of x looked like two tensors)."""
    args = [OPS_SUITE, "--tc-device", "refdev", "--tc-ops", "cat", "-k", "error_inputs", "--tc-timeout", "240"]
    proc, _, outcomes = run_pytest(args, tmp_path, env=child_env(TORCHCONFORM_REFDEV_PROFILE="young-backend"))
    got = by_name(outcomes)["test_error_inputs_cat_refdev"]
    assert (got.outcome, got.op, got.variant, got.dtype) == ("pass", "cat", "error_inputs", ""), \
        (got.outcome, got.message, proc.stdout[-1500:])
