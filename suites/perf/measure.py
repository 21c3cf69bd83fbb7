"""How the perf suite times one operator: the representative sample, the readings, the rows.

* **Sample** (:func:`representative`): of the first :data:`SAMPLE_WINDOW` OpInfo samples
  (made as the ops suite makes them, ``--tc-samples-on``), the one with the most elements
  over all its tensors (input, args, kwargs); the earliest wins a tie.  OpInfo's samples are
  small, so most operators run for microseconds: the comparison's floor is for them.
* **Readings** (:func:`time_pair`): the device is synchronized (the backend's
  ``torch.<device>.synchronize``) before every reading and inside it after the call, so a
  reading is the time to the result.  First the device's first call, then the CPU's (time
  to first result, each with its one-off costs); then ``calls`` warm calls per side,
  interleaved device, CPU, device, CPU... so that load on the machine falls on both sides
  alike.  The cyclic garbage collector is paused meanwhile.
* **Backward** (ops that support autograd, in a dtype with a gradient): the forward runs
  once on a sample made with ``requires_grad``; a reading is ``torch.autograd.grad`` of its
  outputs with all-ones output gradients (graph retained), so it times the backward alone.

* **Threads** (:func:`intra_op_threads`): torch's intra-op thread pool is set to
  ``TORCHCONFORM_PERF_THREADS`` (default 1) for the test.  On a shared machine a
  multi-threaded CPU kernel's time swings with the other processes' load far more than a
  single thread's (seen: conv2d's warm minimum 0.15 ms in one run, 8.9 ms in the next), and
  the CPU side is the reference every ratio divides by.

``TORCHCONFORM_PERF_CALLS`` (default 5) sets the warm calls per side.
"""
from __future__ import annotations

import statistics
import time
from contextlib import contextmanager

import torch

from torchconform.core.perf import BACKWARD, FORWARD
from torchconform import settings
from torchconform.suites.ops.samples import tensors_in
from torchconform.gcpause import no_cyclic_gc

CALLS_ENV = "TORCHCONFORM_PERF_CALLS"
DEFAULT_CALLS = 5
THREADS_ENV = "TORCHCONFORM_PERF_THREADS"
DEFAULT_THREADS = 1
SAMPLE_WINDOW = 8


def warm_calls() -> int:
    return _count(CALLS_ENV, "a call count", 1000)


def _count(env: str, what: str, top: int) -> int:
    return settings.get_int(env, 1, top, what=what)


@contextmanager
def intra_op_threads():
    """torch's intra-op threads set to ``TORCHCONFORM_PERF_THREADS`` (default 1) inside the block."""
    wanted = _count(THREADS_ENV, "a thread count", 1024)
    before = torch.get_num_threads()
    torch.set_num_threads(wanted)
    try:
        yield wanted
    finally:
        torch.set_num_threads(before)


def sample_size(sample) -> int:
    """Elements over every tensor of a sample (input, args, kwargs)."""
    return sum(t.numel() for t in tensors_in([sample.input, sample.args, sample.kwargs]))


def representative(samples, window: int = SAMPLE_WINDOW):
    """(index, sample) of the largest of the first ``window`` samples (earliest on a tie);
    (None, None) when there are none."""
    best, best_i, best_n = None, None, -1
    for i, sample in enumerate(samples):
        if i >= window:
            break
        n = sample_size(sample)
        if n > best_n:
            best, best_i, best_n = sample, i, n
    return best_i, best


def describe(sample) -> str:
    """A short account of the sample: the input's shape and the other tensors' shapes."""
    shapes = ["x".join(str(d) for d in t.shape) or "scalar" for t in tensors_in([sample.input, sample.args, sample.kwargs])]
    return " ".join(f"[{s}]" for s in shapes[:6]) + (f" +{len(shapes) - 6} tensors" if len(shapes) > 6 else "")


def device_sync(device: str):
    """The backend's ``synchronize`` (``torch.<device>.synchronize``); a no-op for CPU."""
    kind = torch.device(device).type
    if kind == "cpu":
        return lambda: None
    sync = getattr(getattr(torch, kind, None), "synchronize", None)
    return sync if callable(sync) else (lambda: None)


def _reading(fn, sync) -> float:
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def _stats(first: float, warm: list[float], side: str) -> dict:
    return {f"{side}_first": first, f"{side}_min": min(warm), f"{side}_median": statistics.median(warm),
            f"{side}_max": max(warm)}


def time_pair(dev_fn, cpu_fn, sync, calls: int) -> dict:
    """First call and ``calls`` interleaved warm calls of both sides (see the module doc)."""
    with no_cyclic_gc():
        dev_first = _reading(dev_fn, sync)
        cpu_first = _reading(cpu_fn, _no_sync)
        dev, cpu = [], []
        for _ in range(calls):
            dev.append(_reading(dev_fn, sync))
            cpu.append(_reading(cpu_fn, _no_sync))
    return {**_stats(dev_first, dev, "dev"), **_stats(cpu_first, cpu, "cpu"), "calls": calls}


def _no_sync():
    return None


def call_of(op, sample):
    return lambda: op(sample.input, *sample.args, **sample.kwargs)


def forward_row(op_name: str, dtype: str, op, dev_sample, cpu_sample, sync, calls: int) -> dict:
    row = time_pair(call_of(op, dev_sample), call_of(op, cpu_sample), sync, calls)
    return {"op": op_name, "dtype": dtype, "direction": FORWARD, "sample": describe(dev_sample), **row}


def _grad_call(op, sample):
    """A function running the backward of ``op`` on ``sample`` (forward done once here), or
    None when no output or input takes part in autograd."""
    inputs = [t for t in tensors_in([sample.input, sample.args, sample.kwargs]) if t.requires_grad and t.is_leaf]
    if not inputs:
        return None
    result = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
    outputs = [t for t in tensors_in(result) if t.requires_grad]
    if not outputs:
        return None
    grads = [torch.ones_like(t) for t in outputs]
    return lambda: torch.autograd.grad(outputs, inputs, grads, retain_graph=True, allow_unused=True)


def backward_row(op_name: str, dtype: str, op, dev_sample, cpu_sample, sync, calls: int) -> dict | None:
    """The backward's row, or None when the sample has nothing to differentiate (on CPU)."""
    cpu_fn = _grad_call(op, cpu_sample)
    if cpu_fn is None:
        return None
    dev_fn = _grad_call(op, dev_sample)
    if dev_fn is None:
        return None
    row = time_pair(dev_fn, cpu_fn, sync, calls)
    return {"op": op_name, "dtype": dtype, "direction": BACKWARD, "sample": describe(dev_sample), **row}
