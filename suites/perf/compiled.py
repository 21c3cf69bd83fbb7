"""The perf suite's compiled variant: the same forward call as the eager timing, through
``torch.compile`` (docs/perf.md, "Compiled variant").

* **Which variants** (:func:`variants`): ``TORCHCONFORM_PERF_VARIANTS``, comma-separated
  ``eager`` and ``compiled`` (default both).  A compile per operator and side costs a few tenths
  of a second on refdev: about 1.5 minutes for the quick selection (figures in docs/perf.md);
  ``TORCHCONFORM_PERF_VARIANTS=eager`` leaves it out.
* **The call** (:func:`compiled_call`): a small function calling the OpInfo operator on the
  representative sample, compiled with the backend profile's ``compile_backend`` (the one the
  ops suite's ``compile_compare_cpu`` and the traits suite's compile probes use; refdev:
  ``refdev``, ``aot_eager`` underneath) and ``dynamic=False``.  The CPU side compiles the same
  function with the same backend where it is one of torch's own (:data:`CPU_BACKENDS`: inductor,
  aot_eager...), so the device/CPU ratio compares the device with CPU under one compiler; a
  device's own backend (refdev, neuron) may not take CPU tensors, so there the CPU side uses
  ``aot_eager`` (:func:`cpu_backend`).
* **Fresh compiles**: dynamo's caches are cleared (``torch._dynamo.reset()``) before the
  timing and after it, and each side compiles its own graph (the device and the CPU inputs fail
  each other's guards), so both first calls really compile: ``first`` is compile + first result.
* **Readings**: as the eager variant's (measure.time_pair): synchronized before every reading
  and after the call inside it; first calls, then N interleaved warm calls per side.
* **Placeholders**: a compile backend that says it returned placeholders instead of running
  (the profile's ``not_executed_patterns``) ran nothing: the test is skip_backend/not_executed.
* Forward only: the backward is not timed compiled.
"""
from __future__ import annotations

import unittest
import warnings

from torchconform import settings
from torchconform.core.classify import NOT_EXECUTED_PREFIX
from torchconform.core.perf import COMPILED, FORWARD, VARIANTS
from torchconform.errors import UserError
from torchconform.suites.common import fresh_compiles
from torchconform.suites.perf.measure import describe, time_pair

VARIANTS_ENV = "TORCHCONFORM_PERF_VARIANTS"
# torch's own compile backends, which compile CPU tensors too.
CPU_BACKENDS = ("inductor", "aot_eager", "eager", "aot_eager_decomp_partition", "aot_inductor")
CPU_FALLBACK_BACKEND = "aot_eager"


def variants() -> tuple[str, ...]:
    """The variants the suite times (``TORCHCONFORM_PERF_VARIANTS``), in VARIANTS' order."""
    raw = settings.get(VARIANTS_ENV) or ""
    wanted = {v.strip() for v in raw.split(",") if v.strip()}
    unknown = sorted(wanted - set(VARIANTS))
    if unknown or not wanted:
        raise UserError(f"{VARIANTS_ENV}={raw!r} names no perf variant ({', '.join(unknown) or 'empty'}); "
                        f"set it to a comma-separated list of {', '.join(VARIANTS)} (default {settings.default(VARIANTS_ENV)})")
    return tuple(v for v in VARIANTS if v in wanted)


def cpu_backend(backend: str) -> str:
    """The backend the CPU side compiles with: the device's where it is one of torch's own."""
    return backend if backend in CPU_BACKENDS else CPU_FALLBACK_BACKEND


def compiled_call(op, backend: str):
    """``torch.compile`` of a function calling ``op`` (one per call: no cache shared with
    another operator's timing)."""
    import torch

    def call(*args, **kwargs):
        return op(*args, **kwargs)

    return torch.compile(call, backend=backend, dynamic=False)


def _first_checked(fn, profile):
    """``fn`` whose first call's warnings are checked for the profile's not-executed patterns
    (a skip) and re-emitted otherwise (fallback evidence is kept); later calls run bare."""
    state = {"first": True}

    def run():
        if not state["first"]:
            return fn()
        state["first"] = False
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fn()
        for w in caught:
            if profile is not None and profile.matches_not_executed(str(w.message)):
                raise unittest.SkipTest(f"{NOT_EXECUTED_PREFIX} {w.message}")
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return out
    return run


def compiled_row(op_name: str, dtype: str, op, dev_sample, cpu_sample, sync, calls: int, backend: str,
                 profile=None) -> tuple[dict, dict]:
    """(row, compile counts) of the compiled forward call on both sides; the counts:
    ``graphs``, ``graph_breaks``, ``recompiles`` over both sides' compiles."""
    with fresh_compiles() as counters:
        dev_fn = compiled_call(op, backend)
        cpu_fn = compiled_call(op, cpu_backend(backend))
        dev_s, cpu_s = dev_sample, cpu_sample
        row = time_pair(_first_checked(lambda: dev_fn(dev_s.input, *dev_s.args, **dev_s.kwargs), profile),
                        _first_checked(lambda: cpu_fn(cpu_s.input, *cpu_s.args, **cpu_s.kwargs), None), sync, calls)
        counts = {"graphs": counters["stats"]["unique_graphs"], "graph_breaks": sum(counters["graph_break"].values()),
                  "recompiles": len(counters["recompiles"])}
    return {"op": op_name, "dtype": dtype, "direction": FORWARD, "variant": COMPILED,
            "sample": describe(dev_sample), **row}, counts
