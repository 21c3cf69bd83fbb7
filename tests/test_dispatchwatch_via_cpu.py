"""A kernel the backend registered that computes through the CPU fallback itself
(torch-opencl's add.out calls at::native::cpu_fallback): the dispatch table calls it a
kernel, but the observer (collectors/csrc/devops.cpp) sees aten::_to_cpu entered inside
its call and names it as fallback evidence (Seen.via_cpu, Seen.fallback).  On refdev in
this process, with kernels registered from Python for a namespace of this test's own."""
from __future__ import annotations

import pytest

from torchconform.core.classify import MISSING_OP_PREFIX, Verdict, refine_by_device_ops
from torchconform.collectors.dispatchwatch import DispatchWatch, Seen


@pytest.fixture(scope="module")
def dev():
    import torch

    from torchconform import refdev

    name = refdev.load()
    lib = torch.library.Library("tcviacpu", "DEF")
    lib.define("via_cpu(Tensor x) -> Tensor")
    lib.define("outer(Tensor x) -> Tensor")
    lib.define("on_device(Tensor x) -> Tensor")
    lib.define("no_cpu_kernel(Tensor x) -> Tensor")

    def via_cpu(x):                      # what cpu_fallback does: arguments to CPU, compute, result back
        (c,) = torch._to_cpu([x])
        return (c * 2).to(x.device)

    def outer(x):                        # a device kernel that calls one that falls back
        return torch.ops.tcviacpu.via_cpu(x) + 1

    def no_cpu_kernel(x):                # the fallback found no CPU kernel to call
        torch._to_cpu([x])
        raise NotImplementedError("Could not run 'tcviacpu::no_cpu_kernel' with arguments from the 'CPU' backend.")

    lib.impl("via_cpu", via_cpu, "PrivateUse1")
    lib.impl("outer", outer, "PrivateUse1")
    lib.impl("on_device", lambda x: x.abs(), "PrivateUse1")
    lib.impl("no_cpu_kernel", no_cpu_kernel, "PrivateUse1")
    watch = DispatchWatch(name)
    if not watch.available:
        pytest.skip("no C++ compiler to build the observer")
    yield name, watch
    del lib


def test_a_kernel_that_calls_the_cpu_fallback_is_named(dev):
    import torch

    name, watch = dev
    x = torch.ones(3, device=name)
    with watch.watch() as seen:
        y = torch.ops.tcviacpu.via_cpu(x)
        torch.ops.tcviacpu.on_device(y)
    assert torch.equal(y.cpu(), torch.full((3,), 2.0))
    assert {"tcviacpu::via_cpu", "tcviacpu::on_device", "aten::_to_cpu"} <= seen.ops
    assert seen.via_cpu == {"tcviacpu::via_cpu"}
    assert seen.fallback == ["tcviacpu::via_cpu"]
    with watch.watch() as native_only:
        torch.ops.tcviacpu.on_device(x)
    assert native_only.via_cpu == set() and native_only.fallback == []


def test_only_the_innermost_device_call_is_named(dev):
    import torch

    name, watch = dev
    with watch.watch() as seen:
        torch.ops.tcviacpu.outer(torch.ones(2, device=name))
    assert {"tcviacpu::outer", "tcviacpu::via_cpu"} <= seen.ops
    assert seen.via_cpu == {"tcviacpu::via_cpu"}


def test_cpu_work_of_the_test_itself_is_no_evidence(dev):
    import torch

    _, watch = dev
    with watch.watch() as seen:
        torch.ones(2) * 2                        # CPU only
        torch._to_cpu([torch.ones(2)])          # CPU tensors: not a device call at all
    assert seen.via_cpu == set() and seen.fallback == []


def test_nested_watches_hand_the_outer_what_fell_back(dev):
    import torch

    name, watch = dev
    x = torch.ones(2, device=name)
    with watch.watch() as outer:
        with watch.watch() as inner:
            torch.ops.tcviacpu.via_cpu(x)
        torch.ops.tcviacpu.on_device(x)
    assert inner.via_cpu == {"tcviacpu::via_cpu"} and outer.via_cpu == {"tcviacpu::via_cpu"}


def test_a_fallback_without_a_cpu_kernel_inside_a_registered_kernel_is_the_missing_operator(dev):
    import torch

    name, watch = dev
    with watch.watch() as seen:
        try:
            torch.ops.tcviacpu.no_cpu_kernel(torch.ones(2, device=name))
        except NotImplementedError as exc:
            text = str(exc)
    assert seen.via_cpu == {"tcviacpu::no_cpu_kernel"}
    got = refine_by_device_ops(Verdict("fail"), text, name, seen, lambda op: False)   # the table shows a kernel
    assert (got.outcome, got.kind, got.missing_op) == ("skip_backend", "missing_op", "tcviacpu::no_cpu_kernel")
    assert got.message.startswith(MISSING_OP_PREFIX)


def test_refine_needs_the_operator_on_the_device():
    text = "NotImplementedError: Could not run 'aten::x' with arguments from the 'CPU' backend."
    seen = Seen(ops={"aten::y"}, via_cpu={"aten::y"}, recorded=True)
    assert refine_by_device_ops(Verdict("fail"), text, "d", seen, lambda op: False).outcome == "fail"
