"""Probes of compiled execution with the profile's compile backend: copies of
non-contiguous inputs, recompiles as shapes vary, placeholder outputs, and the
compiler's own fallback to the uncompiled graph."""
from __future__ import annotations

import statistics
import time

import torch

from torchconform.core.traitnotes import not_measurable
from torchconform.suites.common import active_profile, fresh_compiles
from torchconform.suites.traits import backend

SHAPES = (8, 12, 16, 24, 32, 48)     # rows of a (n, 16) input
# dynamo needs one recompile to see a size vary (automatic dynamic shapes): the
# first two shapes are its warm-up, the rest say whether new shapes still recompile.
WARMUP_SHAPES = 2
WARM_CALLS = 5


def _pointwise(x):
    return x * 2 + 1


def _allocated_bytes(fn, arg) -> int:
    """Bytes allocated (host and device, as the profiler's memory events report them) by one call."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn(arg)
        backend.synchronize()
    return sum(max(e.self_cpu_memory_usage, 0) + max(e.self_device_memory_usage, 0) for e in prof.events())


def measure_noncontiguous_copy() -> dict:
    """Bytes a warm compiled call allocates for a non-contiguous input beyond what the
    same call allocates for a contiguous one of the same shape: the input copies."""
    dev = backend.device()
    # inputs made on CPU and copied: a backend without normal_ is still measured (copies only)
    contiguous = torch.randn(64, 32).to(dev)
    strided = torch.randn(32, 64).to(dev).t()      # same shape and bytes, transposed strides
    with fresh_compiles():
        fn = torch.compile(_pointwise, backend=backend.compile_backend())
        for arg in (contiguous, contiguous, strided, strided):   # compile both layouts, then warm
            fn(arg)
        try:
            extra = [_allocated_bytes(fn, strided) - _allocated_bytes(fn, contiguous) for _ in range(3)]
        except RuntimeError as exc:      # no profiler on this build of torch / backend
            return {"values": not_measurable(f"profiler memory events unavailable ({exc})", copies=None,
                                             bytes_per_call=None), "evidence": {}}
    per_call = max(min(extra), 0)      # the least over three calls: allocator noise only adds
    return {"values": {"copies": per_call > 0, "bytes_per_call": per_call, "measurable": True},
            "evidence": {"input_bytes": strided.numel() * strided.element_size(), "shape": [64, 32],
                         "samples": extra, "how": "profiler memory, non-contiguous minus contiguous"}}


def _timed(fn, arg) -> float:
    start = time.perf_counter()
    fn(arg)
    backend.synchronize()
    return time.perf_counter() - start


def _graphs(counters) -> int:
    return int(counters["stats"]["unique_graphs"])


def _bucket(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _cache_counters(counters) -> dict:
    """Compile-cache counters the backend exposes through dynamo's counters (inductor's FX graph cache)."""
    found = {k: int(v) for k, v in counters.get("inductor", {}).items() if "cache" in k}
    return found or {"exposed": False}


def measure_static_shapes() -> dict:
    """Compiles over a sweep of shapes (default dynamic setting), and with inputs padded to power-of-two buckets."""
    dev = backend.device()
    inputs = [torch.randn(n, 16).to(dev) for n in SHAPES]     # made on CPU: no device normal_ needed
    with fresh_compiles() as counters:
        fn = torch.compile(_pointwise, backend=backend.compile_backend())
        cold = _timed(fn, inputs[0])
        per_shape = [_graphs(counters)]
        for x in inputs[1:]:
            _timed(fn, x)
            per_shape.append(_graphs(counters))
        warm = statistics.median(_timed(fn, inputs[0]) for _ in range(WARM_CALLS))
        cache = _cache_counters(counters)
    later = per_shape[-1] - per_shape[WARMUP_SHAPES - 1]
    rate = round(later / (len(SHAPES) - WARMUP_SHAPES), 6)
    with fresh_compiles() as counters:
        padded = torch.compile(_pointwise, backend=backend.compile_backend(), dynamic=False)
        for x in inputs:
            buf = torch.zeros(_bucket(x.shape[0]), 16, device=dev)
            buf[: x.shape[0]].copy_(x)
            padded(buf)
        bucket_graphs = _graphs(counters)
    return {"values": {"recompiles_per_new_shape": rate, "cold_compile_s": round(cold, 6),
                       "warm_call_s": round(warm, 9), "compiles": per_shape[-1], "measurable": True},
            "evidence": {"shapes": list(SHAPES), "graphs_after_each": per_shape, "warmup_shapes": WARMUP_SHAPES,
                         "bucketed_compiles": bucket_graphs,
                         "buckets": sorted({_bucket(n) for n in SHAPES}), "cache": cache}}


def _candidates(a, b) -> dict:
    """One small graph per operator; inputs in (0.1, 0.9), where every result is non-zero."""
    return {
        "aten::add": lambda: a + b, "aten::mul": lambda: a * b, "aten::sin": lambda: torch.sin(a),
        "aten::exp": lambda: torch.exp(a), "aten::tanh": lambda: torch.tanh(a),
        "aten::atan2": lambda: torch.atan2(a, b), "aten::erfinv": lambda: torch.erfinv(a),
    }


def _not_executed(out, dev: str, caught) -> str:
    """Why ``out`` is a placeholder ("" when it was computed): the backend said so, it
    is not a real device tensor, or it is all zeros where the CPU result has none."""
    if any(active_profile().matches_not_executed(str(w.message)) for w in caught):
        return "warning"
    fake = type(out).__name__ in ("FakeTensor", "FunctionalTensor") or out.device.type in ("meta",)
    if fake or out.device.type != torch.device(dev).type:
        return f"{type(out).__name__} on {out.device}"
    return "zeros" if not bool(out.cpu().ne(0).any()) else ""


def measure_placeholder_outputs() -> dict:
    dev = backend.device()
    gen = torch.Generator().manual_seed(16)
    a_cpu, b_cpu = (0.1 + 0.8 * torch.rand(32, generator=gen) for _ in range(2))
    a, b = a_cpu.to(dev), b_cpu.to(dev)
    found, how, missing, failed = [], {}, [], {}
    with fresh_compiles():
        for name, body in _candidates(a, b).items():
            fn = torch.compile(body, backend=backend.compile_backend())   # one code object per operator
            try:
                with backend.recorded_warnings() as caught:
                    out = fn()
                    backend.synchronize()
            except Exception as exc:  # noqa: BLE001 - a compiled graph that raises is no placeholder
                if backend.is_missing_op(exc):
                    missing.append(name)
                else:
                    failed[name] = type(exc).__name__
                continue
            why = _not_executed(out, dev, caught)
            if why:
                found.append(name)
                how[name] = why
    return {"values": {"ops": sorted(found), "measurable": True},
            "evidence": {"how": how, "candidates": len(_candidates(a, b)), "missing_ops": missing, "errors": failed}}


class _ConversionFailure(RuntimeError):
    """Raised by the deliberately failing compile backend: what a conversion error looks like."""


def _failing_backend(gm, example_inputs):
    raise _ConversionFailure("torchconform traits probe: simulated graph conversion failure")


def measure_compile_fallback() -> dict:
    """Does a graph the compiler fails to convert raise, or silently run uncompiled?
    dynamo decides (``torch._dynamo.config.suppress_errors``, which a backend module may
    set when it is imported); the failure is simulated by a backend that always raises."""
    import torch._dynamo

    x = torch.randn(8).to(backend.device())     # made on CPU: no device normal_ needed
    with fresh_compiles(), backend.recorded_warnings() as caught:
        fn = torch.compile(_pointwise, backend=_failing_backend)
        try:
            out = fn(x)
        except Exception as exc:  # noqa: BLE001 - raising is one of the two answers
            return {"values": {"compile_fallback": False, "on_failure": "raises", "measurable": True},
                    "evidence": {"error": type(exc).__name__,
                                 "suppress_errors": bool(torch._dynamo.config.suppress_errors)}}
    eager_ok = bool(torch.equal(out.cpu(), _pointwise(x.cpu())))
    return {"values": {"compile_fallback": True, "on_failure": "runs_eagerly" if eager_ok else "wrong_result",
                       "measurable": True},
            "evidence": {"warned": bool(caught), "suppress_errors": bool(torch._dynamo.config.suppress_errors)}}
