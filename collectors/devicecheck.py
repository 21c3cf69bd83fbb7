"""What a test did to the device under test, read around it from the backend's
device module (``torch.<device>``) and PyTorch's dispatcher only, so that it holds
for any backend, not only refdev.

- ``watch()``: did the test touch the device at all?  A passing test that did not
  is ``pass`` with kind ``host_only``: instantiated for the device, it ran on the
  host (only CPU tensors) and says nothing about the device.  Asked only of the
  PrivateUse1 backend or the accelerator under test, never of the CPU.
- ``memory()`` / ``leak(before)``: did a passing test leave device memory
  allocated?  A leak is ``error``, naming the operators that leaked during this
  test where the device module counts them (``leak_counts()``, refdev's does).

The pytest plugin's worker side (collectors/worker.py) asks both around every
test; the model zoo (suites/models/check.py) asks ``leak`` around each model run.
How each is decided and what it costs: docs/classification.md.
"""
from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass, field

# Cumulative allocation requests, in torch.cuda.memory_stats' vocabulary (never
# lowered by a free or by reset_peak_memory_stats); refdev reports the same key.
ALLOCATIONS = "allocation.all.allocated"


@dataclass
class Touch:
    """Whether the watched code touched the device: True, False, or None (cannot tell)."""
    touched: bool | None = None
    how: str = ""          # the evidence behind touched=False, for the outcome's message


@dataclass
class Memory:
    """The device's memory before a test."""
    allocated: int                                # bytes, all device indices
    leaks: dict = field(default_factory=dict)     # the device module's leak_counts() then


# What processes a test started said of the device (the distributed suite's ranks run
# the test's work; the test process itself never touches the device): watch() clears
# it when a test starts and reads it when it ends.
_elsewhere: list[bool] = []


def report_touch_elsewhere(touched: bool | None) -> None:
    """For a test whose work ran in other processes: whether they touched the device
    (each measured its own with ``DeviceCheck.watch``; None: they could not tell)."""
    if touched is not None:
        _elsewhere.append(bool(touched))


def _with_elsewhere(touch: Touch) -> None:
    if _elsewhere:
        touch.touched = any(_elsewhere) or bool(touch.touched)
        if not touch.touched:
            touch.how += " (nor in the processes the test started)"
        _elsewhere.clear()


class DeviceCheck:
    """Both questions for one device type; resolved once (getattr), cheap per test."""

    def __init__(self, device_type: str):
        import torch

        self.device_type = device_type
        mod = None if device_type == "cpu" else getattr(torch, device_type, None)
        self.module = mod
        try:
            count = int(mod.device_count()) if hasattr(mod, "device_count") else 1
        except Exception:
            count = 1
        self._indices = range(count)
        self._allocated = getattr(mod, "memory_allocated", None)
        self._leak_counts = getattr(mod, "leak_counts", None)
        under_test = mod is not None and _is_accelerator(torch, device_type)
        self._stats = getattr(mod, "memory_stats", None) if under_test else None
        if self._stats is not None and self._allocations() is None:
            self._stats = None      # stats without the cumulative counter: count nothing with them
        # Without the counter: PyTorch's dispatcher tells (see _probe_class).
        self._probe = _probe_class() if under_test and self._stats is None else None

    # -- host_only ------------------------------------------------------------------
    def _allocations(self) -> int | None:
        try:
            total = 0
            for i in self._indices:
                stats = self._stats(i)
                if stats:   # empty: the allocator has not started (CUDA before first use)
                    if ALLOCATIONS not in stats:
                        return None
                    total += int(stats[ALLOCATIONS])
            return total
        except Exception:
            return None

    @contextlib.contextmanager
    def watch(self):
        """Around a test body; the yielded Touch is filled in on exit."""
        touch = Touch()
        _elsewhere.clear()
        if self._stats is not None:
            # Any device tensor, however small and even if freed at once, is an
            # allocation request; a test of the device that allocates nothing on it
            # would have to work only in place on tensors made before it started.
            before = self._allocations()
            try:
                yield touch
            finally:
                after = self._allocations()
                if before is not None and after is not None:
                    touch.touched = after != before
                    touch.how = f"no {self.device_type} allocation during the test"
                _with_elsewhere(touch)
        elif self._probe is not None:
            probe = self._probe(self.device_type)
            try:
                with probe:
                    yield touch
            finally:
                touch.touched = probe.seen
                touch.how = f"no operator saw a {self.device_type} tensor during the test"
                _with_elsewhere(touch)
        else:
            try:
                yield touch
            finally:
                _with_elsewhere(touch)

    # -- leaks --------------------------------------------------------------------------
    def _total(self) -> int | None:
        if self._allocated is None:
            return None
        try:
            return sum(int(self._allocated(i)) for i in self._indices)
        except Exception:
            return None

    def _leaks(self) -> dict:
        try:
            return dict(self._leak_counts()) if self._leak_counts is not None else {}
        except Exception:
            return {}

    def memory(self) -> Memory | None:
        """Before a test; None where the device is not checked (CPU, no memory_allocated)."""
        if self.module is None:
            return None
        allocated = self._total()
        return None if allocated is None else Memory(allocated, self._leaks())

    def leak(self, before: Memory) -> str:
        """After a passing test: "" or the error message of its leak."""
        after = self._total()
        # Only when memory grew, cheapest first: cycles may hold tensors until collected,
        # and those a test just made are young (collecting generations 0-1 takes ~0.3 ms
        # and is nearly always enough); compiled graphs may hold constants on purpose,
        # and a full collection takes ~250 ms with torch loaded: only for a likely leak.
        for settle in (_young_collection, _full_collection):
            if after is None or after <= before.allocated:
                return ""
            settle()
            after = self._total()
        if after is None or after <= before.allocated:
            return ""
        message = (f"device memory leak: {after - before.allocated} bytes of {self.device_type} memory still "
                   f"allocated after the test ({before.allocated} before)")
        # The device's counts cover the whole process: this test's leaks are the difference.
        now = self._leaks()
        ops = {op: n - before.leaks.get(op, 0) for op, n in now.items() if n > before.leaks.get(op, 0)}
        if ops:
            message += "; leaking operators: " + ", ".join(f"{op} x{n}" for op, n in sorted(ops.items()))
        return message


def _young_collection() -> None:
    gc.collect(1)


def _full_collection() -> None:
    import torch._dynamo

    torch._dynamo.reset()
    gc.collect()


def _is_accelerator(torch, device_type: str) -> bool:
    """The PrivateUse1 backend or the accelerator of this machine (cuda, xpu, mps...)."""
    if device_type == "cpu":
        return False
    if device_type == torch._C._get_privateuse1_backend_name():
        return True
    try:
        current = torch.accelerator.current_accelerator()
    except Exception:  # a torch without torch.accelerator
        return False
    return current is not None and current.type == device_type


_PROBE = None


def _probe_class():
    """A dispatch mode that notes whether any operator had a tensor of the device
    among its arguments or results (factories, copies, in-place ops included).
    Defined on first use: this module is imported where torch must not be yet."""
    global _PROBE
    if _PROBE is None:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        class DeviceSeen(TorchDispatchMode):
            def __init__(self, device_type):
                super().__init__()
                self.device_type = device_type
                self.seen = False

            @classmethod
            def ignore_compile_internals(cls):
                # Otherwise dynamo skips every frame while the mode is active, and a
                # compiled test would run eagerly: the probe must not change the test.
                return True

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if not self.seen:
                    self.seen = any(isinstance(t, torch.Tensor) and t.device.type == self.device_type
                                    for t in tree_leaves((args, kwargs, out)))
                return out

        _PROBE = DeviceSeen
    return _PROBE
