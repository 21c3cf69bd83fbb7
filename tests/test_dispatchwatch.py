"""The dispatcher observer (collectors/dispatchwatch.py): which operators a test asked
of the device, how the dispatcher served each, and the two errors it names.  On
refdev in this process; the boxed-fallback end to end is tests/test_fallback_truth.py."""
from __future__ import annotations

import pytest

from torchconform.core.classify import (
    MISSING_OP_PREFIX, Verdict, classify_text, refine_by_device_ops,
)
from torchconform.collectors.dispatchwatch import DispatchWatch, Seen


@pytest.fixture(scope="module")
def watch():
    from torchconform import refdev

    refdev.load()
    w = DispatchWatch("refdev")
    if not w.available:
        pytest.skip("no C++ compiler to build the observer")
    return w


def test_records_what_was_called_with_device_tensors_only(watch):
    import torch

    with watch.watch() as seen:
        x = torch.ones(3, device="refdev")
        (x + 1).abs()
        torch.arange(4, device="refdev")          # a factory: no tensor argument, device= only
        torch.ones(3) * 2                          # CPU work in the same test
    assert seen.recorded
    assert {"aten::ones", "aten::add.Tensor", "aten::abs", "aten::arange"} <= seen.ops
    assert "aten::mul.Tensor" not in seen.ops
    with watch.watch() as cpu_only:
        torch.ones(3) * 2
    assert cpu_only.recorded and cpu_only.ops == set()


def test_a_host_phase_is_not_observed_and_the_watch_goes_on_after_it(watch):
    # suites/common.py wraps a test's CPU reference and comparison in host_phase, so that
    # the observer boxes no arguments there; device calls before and after still count.
    import torch

    from torchconform.collectors.dispatchwatch import host_phase

    with host_phase():                             # no watch running: nothing to pause
        torch.ones(1) + 1
    with watch.watch() as seen:
        x = torch.ones(3, device="refdev")
        with host_phase():
            with host_phase():                     # nested: the outer block resumes
                x.neg()                            # inside a host phase: not observed
            x.abs()
        x.sin()
    assert "aten::ones" in seen.ops and "aten::sin" in seen.ops
    assert "aten::neg" not in seen.ops and "aten::abs" not in seen.ops
    with watch.watch() as again:                   # the callback was switched back on
        x.neg()
    assert "aten::neg" in again.ops


def test_names_the_innermost_device_call_an_exception_ended(watch):
    import torch

    x = torch.ones(2, device="refdev")
    with watch.watch() as seen:
        try:
            torch.nn.functional.relu(x)   # fine
            x.cos()                       # young-backend lacks cos.out: cos's call raises
        except NotImplementedError:
            pass
    assert seen.raised == "aten::cos", seen


def test_compiled_code_runs_compiled_under_the_observer(watch):
    # A dispatch mode (the old probe) made dynamo fail or skip frames on some backends;
    # an observer leaves dynamo alone: the same graphs compile, the same values come out.
    import torch
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter

    def f(a):
        return torch.sin(a) * 2 + a

    x = torch.arange(4.0, device="refdev")
    torch._dynamo.reset()
    plain = CompileCounter()
    expected = torch.compile(f, backend=plain)(x).cpu()
    torch._dynamo.reset()
    observed = CompileCounter()
    with watch.watch() as seen:
        got = torch.compile(f, backend=observed)(x).cpu()
    assert observed.frame_count == plain.frame_count == 1 and observed.op_count == plain.op_count
    assert torch.equal(got, expected) and "aten::sin" in seen.ops


def test_default_refdev_has_no_backend_fallback(watch):
    # refdev's own fallback registers one counted kernel per operator (its counters are
    # the evidence there); the dispatcher's evidence is for a boxed fallback of the key.
    assert watch.has_backend_fallback is False
    assert watch.status("aten::add.out") == "native"
    assert watch.served_by_fallback("aten::sin.out") is False


# -- refining a verdict with what was seen (no device needed) ----------------------------
CPU_ERROR = ("NotImplementedError: Could not run 'aten::_thnn_fused_gru_cell' with arguments from the "
             "'CPU' backend. This could be because the operator doesn't exist for this backend")


def _seen(*ops, raised=""):
    return Seen(ops=set(ops), raised=raised, recorded=True)


def test_a_cpu_kernel_missing_inside_the_fallback_is_the_devices_missing_operator():
    fail = Verdict("fail", message="NotImplementedError: ...")
    got = refine_by_device_ops(fail, CPU_ERROR, "tvk", _seen("aten::_thnn_fused_gru_cell"),
                               lambda op: op == "aten::_thnn_fused_gru_cell")
    assert (got.outcome, got.kind, got.missing_op) == ("skip_backend", "missing_op", "aten::_thnn_fused_gru_cell")
    assert got.message.startswith(MISSING_OP_PREFIX + " aten::_thnn_fused_gru_cell ")
    # the stored message alone classifies the same (JUnit ingest, a re-read)
    again = classify_text(got.message, None, status="failure")
    assert (again.outcome, again.kind, again.missing_op) == (got.outcome, got.kind, got.missing_op)


def test_the_same_error_stays_a_failure_when_the_device_never_asked_for_the_operator():
    fail = Verdict("fail", message="x")
    # only the CPU reference called it (not seen on the device) ...
    assert refine_by_device_ops(fail, CPU_ERROR, "tvk", _seen("aten::add.Tensor"), lambda op: True) is fail
    # ... or the device has its own kernel for it (not served by the fallback)
    assert refine_by_device_ops(fail, CPU_ERROR, "tvk", _seen("aten::_thnn_fused_gru_cell"),
                                lambda op: False) is fail
    # nothing recorded: nothing claimed
    assert refine_by_device_ops(fail, CPU_ERROR, "tvk", Seen(), lambda op: True) is fail
    # passes and skips are never touched
    skip = Verdict("skip_eligibility", message=CPU_ERROR)
    assert refine_by_device_ops(skip, CPU_ERROR, "tvk", _seen("aten::_thnn_fused_gru_cell"), lambda op: True) is skip


def test_a_dispatch_stub_without_the_devices_kernel_names_the_operator_that_raised():
    text = "RuntimeError: DispatchStub: missing kernel for refdev"
    got = refine_by_device_ops(Verdict("fail"), text, "refdev", _seen("aten::ldexp.out", raised="aten::ldexp.out"),
                               lambda op: False)
    assert (got.kind, got.missing_op) == ("missing_op", "aten::ldexp.out")
    assert classify_text(got.message).missing_op == "aten::ldexp.out"
    # another device's stub, or no operator known: unchanged
    assert refine_by_device_ops(Verdict("fail"), text, "other", _seen(raised="aten::x"), lambda op: False).outcome == "fail"
    assert refine_by_device_ops(Verdict("fail"), text, "refdev", _seen(), lambda op: False).outcome == "fail"
