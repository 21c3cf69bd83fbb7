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

Fallback evidence from the dispatcher (collectors/dispatchwatch.py) rides along:
where the backend registers a boxed CPU fallback, or offers no allocation counter,
a RecordFunction observer records which operators the test asked of the device
(``Touch.seen``), which also decides host_only without a counter.
"""
from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass, field

from torchconform import settings as tc_settings

# Cumulative allocation requests, in torch.cuda.memory_stats' vocabulary (never
# lowered by a free or by reset_peak_memory_stats); refdev reports the same key.
ALLOCATIONS = "allocation.all.allocated"
# "0": no dispatcher observer (no fallback evidence from the dispatcher, host_only
# undecided without an allocation counter); "always": the observer even where the
# allocation counter decides and no boxed fallback exists.  For measuring the observer.
DISPATCH_WATCH_ENV = "TORCHCONFORM_DISPATCH_WATCH"


@dataclass
class Touch:
    """Whether the watched code touched the device: True, False, or None (cannot tell)."""
    touched: bool | None = None
    how: str = ""          # the evidence behind touched=False, for the outcome's message
    seen: object = None    # dispatchwatch.Seen: the operators asked of the device, when observed


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

    def __init__(self, device_type: str, tracked: bool = False):
        """``tracked``: the backend's own tracking API reports its fallbacks
        (collectors/tracking.py): no dispatcher observer then, unless asked for ("always")."""
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
        # The dispatcher's observer: where a boxed CPU fallback may serve the device (its
        # evidence), and where no counter says whether the device was touched.
        self._dispatch = None
        mode = tc_settings.get(DISPATCH_WATCH_ENV)
        if under_test and mode != "0" and (not tracked or mode == "always"):
            # the observer is a C++ extension, built and loaded only when a run watches the dispatcher
            from torchconform.collectors.dispatchwatch import DispatchWatch

            watch = DispatchWatch(device_type)
            wanted = not tracked and (watch.has_backend_fallback or self._stats is None)
            if watch.available and (wanted or mode == "always"):
                self._dispatch = watch

    @property
    def dispatch(self):
        """The dispatchwatch.DispatchWatch in use, or None."""
        return self._dispatch

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
        observed = self._dispatch.watch() if self._dispatch is not None else contextlib.nullcontext()
        # Any device tensor, however small and even if freed at once, is an allocation
        # request; a test of the device that allocates nothing on it would have to work
        # only in place on tensors made before it started.
        before = self._allocations() if self._stats is not None else None
        try:
            with observed as seen:
                touch.seen = seen
                yield touch
        finally:
            if self._stats is not None:
                after = self._allocations()
                if before is not None and after is not None:
                    touch.touched = after != before
                    touch.how = f"no {self.device_type} allocation during the test"
            elif touch.seen is not None and touch.seen.recorded:
                touch.touched = bool(touch.seen.ops)
                touch.how = f"no operator saw a {self.device_type} tensor during the test"
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
