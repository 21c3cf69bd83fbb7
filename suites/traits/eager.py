"""Eager probes: the precision a floating dtype really computes in, and which
operators run through the backend's eager CPU fallback."""
from __future__ import annotations

import contextlib

import torch

from torchconform.core.traitnotes import not_measurable
from torchconform.suites.common import active_profile
from torchconform.suites.traits import backend
from torchconform.suites.traits.workload import eager_fallback_workload
from torchconform.collectors.dispatchwatch import DispatchWatch

FLOATING = ("float64", "float32", "float16", "bfloat16")
# Candidates for "computes in", most precise first.
_BY_PRECISION = sorted(FLOATING, key=lambda d: torch.finfo(getattr(torch, d)).eps)
# IEEE add / mul / div are correctly rounded, on the CPU too, so the reference is
# unambiguous: a device computing in dtype D is within half an ulp of D.
PRECISION_OPS = {"add": torch.add, "mul": torch.mul, "div": torch.div}
SAMPLES = 4096


def _eps(name: str) -> float:
    return float(torch.finfo(getattr(torch, name)).eps)


def executes_as(requested: str, rel_err: float) -> str | None:
    """The most precise dtype, no more precise than ``requested``, whose epsilon bounds
    ``rel_err`` (a correctly rounded result has at most eps/2); None when even
    bfloat16's does not."""
    floor = _eps(requested)
    for name in _BY_PRECISION:
        if _eps(name) >= floor and rel_err <= _eps(name):
            return name
    return None


def measure_precision(dtype_name: str) -> dict:
    """``{"values": {"executes_as"}, "evidence": {...}}`` for one floating dtype."""
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(16)
    # Values in [1, 2): no overflow, no subnormal, in every floating dtype.
    a = (1 + torch.rand(SAMPLES, dtype=torch.float64, generator=gen)).to(dtype)
    b = (1 + torch.rand(SAMPLES, dtype=torch.float64, generator=gen)).to(dtype)
    try:
        da, db = a.to(backend.device()), b.to(backend.device())
    except Exception as exc:  # noqa: BLE001 - the device refusing the dtype is the finding
        if active_profile().matches_unsupported_dtype(str(exc)) or backend.is_missing_op(exc):
            return {"values": not_measurable(f"the device does not hold {dtype_name}", executes_as=None),
                    "evidence": {"error": str(exc)[:120]}}
        raise
    errors, missing = {}, []
    for name, op in PRECISION_OPS.items():
        try:
            got = op(da, db).cpu().double()
        except Exception as exc:  # noqa: BLE001
            if backend.is_missing_op(exc):
                missing.append(name)
                continue
            raise
        ref = op(a.double(), b.double())   # float64 reference of the same inputs
        errors[name] = float(((got - ref).abs() / ref.abs()).max())
    evidence = {"ops": sorted(errors), "missing_ops": missing, "reference": "float64 cpu"}
    if not errors:
        return {"values": not_measurable("add, mul and div are all missing on this device", executes_as=None),
                "evidence": evidence}
    worst = max(errors.values())
    result = executes_as(dtype_name, worst)
    evidence.update(max_rel_err=float(f"{worst:.6g}"), eps_ratio={d: float(f"{worst / _eps(d):.4g}") for d in FLOATING})
    return {"values": {"executes_as": result, "measurable": True}, "evidence": evidence}


def declared_executes_as(dtype_name: str) -> str:
    """What the backend profile says the dtype computes in (dtype_policy.downcast)."""
    downcast = active_profile().dtype_policy.get("downcast") or {}
    return str(downcast.get(dtype_name, dtype_name))


def _dispatcher_watch(device: str):
    """The dispatcher observer for ``device`` where it can see a fallback: built (a C++
    compiler) and the device's key has a backend fallback (PyTorch's boxed CPU fallback,
    which neither counts nor warns) or is PrivateUse1 (whose own kernels may call that
    fallback: aten::_to_cpu inside them, collectors/dispatchwatch.py); else None."""
    if device == "cpu":
        return None

    watch = DispatchWatch(device)
    privateuse1 = device == torch._C._get_privateuse1_backend_name()
    return watch if watch.available and (watch.has_backend_fallback or privateuse1) else None


def _base(op: str) -> str:
    return op.split(".", 1)[0]


def measure_eager_fallback() -> dict:
    """Which operators of a fixed workload (workload.py) run through the eager CPU
    fallback, and how often, from three sources, most direct first: the profile's
    fallback counter where it has one; the dispatcher (an operator PyTorch's boxed CPU
    fallback served, in each call of the workload); the fallback warnings.  The first
    source that saw any fallback is the measurement, named in ``eager_source``; when none
    did, the first consulted says "none".  What the other sources saw is in the evidence."""
    counts, reset = backend.fallback_counter()
    if reset is not None:
        reset()
    watch = _dispatcher_watch(backend.device())
    missing, from_warnings, from_dispatcher = [], {}, {}
    workload = eager_fallback_workload(backend.device())
    with backend.recorded_warnings() as caught:
        for name, call in workload.items():
            observed = watch.watch() if watch is not None else contextlib.nullcontext()
            try:
                with observed as seen:
                    call()
            except Exception as exc:  # noqa: BLE001
                if not backend.is_missing_op(exc):
                    raise
                missing.append(name)
            for op in (seen.fallback if seen is not None else ()):
                from_dispatcher[op] = from_dispatcher.get(op, 0) + 1
    backend.synchronize()
    for w in caught:
        for op in active_profile().find_fallback_ops(str(w.message)):
            from_warnings[op] = from_warnings.get(op, 0) + 1
    sources = {}
    # A counter hook may answer None: "no counter" (refdev's boxed profiles, as a real backend)
    counted = counts() if counts else None
    if counted is not None:
        sources["counter"] = {(k if "::" in k else "aten::" + k): int(v) for k, v in counted.items() if v}
    if watch is not None:
        sources["dispatcher"] = from_dispatcher
    sources["warnings"] = from_warnings
    source = next((name for name, calls in sources.items() if calls), next(iter(sources)))
    calls = sources[source]
    ops = sorted({_base(op) for op in calls})
    return {"values": {"eager_ops": ops, "eager_calls": sum(calls.values()), "eager_source": source},
            "evidence": {"calls": calls, "missing_ops": missing, "workload": len(workload),
                         # what the other sources saw (a disagreement shows here)
                         "others_saw": {name: sorted({_base(op) for op in c}) for name, c in sources.items()
                                        if name != source}}}
