"""Which operators a test asked of the device, and how the dispatcher served each.

A RecordFunction observer (``csrc/devops.cpp``, compiled on first use like refdev)
notes every operator called with a tensor of the device type (or a factory's
``device=`` naming it), at any depth.  Each is then looked up once in the
dispatcher's table for the device's key (torchconform/core/dispatch.py, the dispatcher's own
order): its own kernel, the autograd key's, a composite (looked through: its inner
calls are recorded too), or the **backend fallback**, PyTorch's boxed CPU fallback
that a PrivateUse1 backend registers for its whole key.  An operator served by that
fallback is fallback evidence for the test, whatever the backend: a passing test
that used one is ``pass_fallback`` naming it.  So is an operator inside whose call
``aten::_to_cpu`` ran (``Seen.via_cpu``): ``at::native::cpu_fallback`` moves its
arguments with it, and a kernel the backend registered may call that fallback itself
(torch-opencl's ``add.out``), which the dispatch table cannot show.

It also says whether the test touched the device at all (any operator recorded),
for backends without an allocation counter, and names the operator behind two
errors a boxed fallback or a borrowed CPU kernel raise without naming the device:
``Could not run 'aten::X' with arguments from the 'CPU' backend`` (the fallback had
no CPU kernel to call) and ``DispatchStub: missing kernel for <device>``.

An observer never changes what runs (docs/classification.md: "which evidence each
record carries"); it costs the boxing of each call's arguments while a test runs
(bench/dispatchwatch.py).
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from torchconform.core.dispatch import FALLBACK, device_keys
from torchconform.refdev import build
from torchconform.core.dispatch import classify

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "devops.cpp")


def recorder():
    """The compiled observer, built once per torch and compiler; None where it cannot be
    built (no compiler): then nothing is recorded and nothing is claimed."""
    return build.optional_extension(SOURCE, "devops", "the dispatcher observer of device operators")


@dataclass
class Seen:
    """What one watched block asked of the device (filled when the block ends)."""
    ops: set = field(default_factory=set)     # aten::name.overload, every depth
    raised: str = ""                           # the innermost one an exception ended (the latest)
    via_cpu: set = field(default_factory=set)  # those an aten::_to_cpu ran inside (a CPU fallback)
    fallback: list = field(default_factory=list)  # those the backend fallback served or via_cpu, sorted
    recorded: bool = False                     # False: nothing could be recorded


class DispatchWatch:
    """One device type's observer plus a cache of how the dispatcher serves each operator."""

    def __init__(self, device_type: str, native=None):
        self.device_type = device_type
        self.keys = device_keys(device_type)
        self._native = native if native is not None else recorder()
        self._served: dict[str, str] = {}

    @property
    def available(self) -> bool:
        return self._native is not None

    @property
    def has_backend_fallback(self) -> bool:
        return self.keys.backend_fallback

    def status(self, op: str) -> str:
        """The census status of ``op`` on this device (native, autograd, composite,
        fallback, missing, unavailable), read from the dispatcher once."""
        st = self._served.get(op)
        if st is None:
            try:
                st = classify([op], self.keys)[0].status
            except Exception:  # noqa: BLE001 - an operator the dispatcher does not know
                st = ""
            self._served[op] = st
        return st

    def served_by_fallback(self, op: str) -> bool:
        return self.keys.backend_fallback and self.status(op) == FALLBACK

    @contextlib.contextmanager
    def watch(self):
        """Record the block.  Watches nest (a probe watching its own calls inside a test
        the plugin watches): the observer runs one recording at a time, so an inner watch
        pauses the outer one and hands it what it recorded, and the outer still sees every
        operator its block asked of the device."""
        seen = Seen()
        if self._native is None:
            yield seen
            return
        outer = _RUNNING[-1] if _RUNNING else None
        if outer is not None:
            outer.take(*outer.native.stop())
        frame = _Recording(self._native, self.device_type)
        try:
            self._native.start(self.device_type)
        except BaseException:
            if outer is not None:
                outer.native.start(outer.device_type)
            raise
        _RUNNING.append(frame)
        try:
            yield seen
        finally:
            frame.take(*self._native.stop())
            _RUNNING.pop()
            if outer is not None:
                if outer.device_type == frame.device_type:
                    outer.take(frame.ops, frame.raised, frame.via_cpu)
                outer.native.start(outer.device_type)
            seen.ops, seen.raised, seen.via_cpu, seen.recorded = frame.ops, frame.raised, frame.via_cpu, True
            served = {op for op in seen.ops if self.served_by_fallback(op)} if self.keys.backend_fallback else set()
            seen.fallback = sorted(served | seen.via_cpu)


@dataclass
class _Recording:
    """A running watch: what it recorded before an inner watch paused it."""
    native: object
    device_type: str
    ops: set = field(default_factory=set)
    raised: str = ""
    via_cpu: set = field(default_factory=set)

    def take(self, ops, raised: str, via_cpu=()) -> None:
        self.ops.update(ops)
        self.raised = raised or self.raised   # the latest exception's operator
        self.via_cpu.update(via_cpu)


_RUNNING: list[_Recording] = []   # the watches running now, innermost last
_HOST_PHASES = [0]                  # host_phase blocks open now (they nest)


@contextlib.contextmanager
def host_phase():
    """A block that runs on CPU only (a test's CPU reference and its comparison): the
    running watch stops observing for the block, so its CPU calls are not boxed for an
    observer that would only discard them (bench/runner_overhead.py --dispatch-watch).
    Nothing the block asks of the device would be recorded: only wrap code that cannot
    touch it.  No watch running: nothing happens."""
    frame = _RUNNING[-1] if _RUNNING else None
    pause = getattr(frame.native, "pause", None) if frame is not None else None
    if pause is None:
        yield
        return
    _HOST_PHASES[0] += 1
    if _HOST_PHASES[0] == 1:
        pause()
    try:
        yield
    finally:
        _HOST_PHASES[0] -= 1
        if _HOST_PHASES[0] == 0 and _RUNNING and _RUNNING[-1] is frame:
            frame.native.resume()
