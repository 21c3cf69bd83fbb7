"""Dispatcher watches nest (collectors/dispatchwatch.py): the observer runs one
recording at a time, so a probe that watches its own calls inside a test the plugin
watches pauses the plugin's watch; both must see what their blocks asked."""
from __future__ import annotations

import pytest

from torchconform.collectors.dispatchwatch import DispatchWatch


class OneRecording:
    """The observer's contract (collectors/csrc/devops.cpp): one recording at a time,
    stop() ends it and returns (operators, the latest one an exception ended)."""

    def __init__(self):
        self.active = None
        self.starts = 0

    def start(self, device):
        if self.active is not None:
            raise RuntimeError("a device operator recording is already running")
        self.active, self.raised = set(), ""
        self.starts += 1

    def stop(self):
        if self.active is None:
            raise RuntimeError("no device operator recording is running")
        ops, self.active = self.active, None
        return sorted(ops), self.raised

    def call(self, op, raises=False):
        if self.active is not None:
            self.active.add(op)
            if raises:
                self.raised = op


def test_an_inner_watch_pauses_the_outer_and_hands_it_what_it_saw():
    native = OneRecording()
    outer_watch, inner_watch = DispatchWatch("cpu", native=native), DispatchWatch("cpu", native=native)
    with outer_watch.watch() as outer:
        native.call("aten::add.Tensor")
        with inner_watch.watch() as inner:
            native.call("aten::cumsum.out", raises=True)
            with inner_watch.watch() as innermost:
                native.call("aten::sort")
        native.call("aten::mul.Tensor")
    assert innermost.ops == {"aten::sort"}
    assert inner.ops == {"aten::cumsum.out", "aten::sort"} and inner.raised == "aten::cumsum.out"
    assert outer.ops == {"aten::add.Tensor", "aten::cumsum.out", "aten::sort", "aten::mul.Tensor"}
    assert outer.raised == "aten::cumsum.out"
    assert native.active is None and native.starts == 5    # 3 watches, 2 resumptions


def test_an_inner_watch_that_raises_still_resumes_the_outer():
    native = OneRecording()
    watch = DispatchWatch("cpu", native=native)
    with watch.watch() as outer:
        with pytest.raises(ValueError):
            with watch.watch():
                native.call("aten::nonzero")
                raise ValueError("the probe's own error")
        native.call("aten::abs")
    assert outer.ops == {"aten::nonzero", "aten::abs"} and native.active is None


def test_real_observer_nests_on_refdev():
    """The compiled observer on refdev (young-backend in this process): same contract."""
    import torch

    from torchconform import refdev

    name = refdev.load()
    watch = DispatchWatch(name)
    if not watch.available:
        pytest.skip("no C++ compiler to build the observer")
    x = torch.ones(3, device=name)
    with watch.watch() as outer:
        x.abs()
        with watch.watch() as inner:
            torch.neg(x)
        x.sum()
    assert "aten::neg" in inner.ops and "aten::abs" not in inner.ops
    assert {"aten::abs", "aten::neg", "aten::sum"} <= outer.ops
