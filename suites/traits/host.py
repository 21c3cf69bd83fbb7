"""Host-side probes: the device's memory counters around synchronize, and the
environment the run really had (collectors/environment.py, also stored on every build)."""
from __future__ import annotations

import torch

from torchconform.collectors import environment
from torchconform.core.traitnotes import not_measurable
from torchconform.suites.common import active_profile
from torchconform.suites.traits import backend

REQUEST = 1001          # bytes: odd, so any allocation rounding shows


def _read(mod) -> dict:
    stats = {}
    if callable(getattr(mod, "memory_stats", None)):
        stats = mod.memory_stats() or {}
    reserved = getattr(mod, "memory_reserved", None)
    return {"allocated": int(mod.memory_allocated()),
            "reserved": int(reserved()) if callable(reserved) else None,
            # torch.cuda's name for what callers asked for, before rounding
            "requested": int(stats["requested_bytes.all.current"]) if "requested_bytes.all.current" in stats else None}


def measure_memory_stats() -> dict:
    """Counters read right after an allocation and a kernel, then after synchronize:
    do they lag, and how far is the allocation rounded up from the request?"""
    mod = backend.device_module()
    if mod is None or not callable(getattr(mod, "memory_allocated", None)):
        return {"values": not_measurable(f"torch.{backend.device()} exposes no memory_allocated()",
                                         lags_without_sync=None, rounding_bytes=None), "evidence": {}}
    dev = backend.device()
    src = torch.ones(256, device=dev)
    backend.synchronize()
    before = _read(mod)
    block = torch.empty(REQUEST, dtype=torch.uint8, device=dev)
    result = src * 2                       # a kernel whose output is allocated when it is queued
    unsynced = _read(mod)
    backend.synchronize()
    synced = _read(mod)
    del block, result
    backend.synchronize()
    lags = unsynced != synced
    expected = REQUEST + src.numel() * src.element_size()
    grown = synced["allocated"] - before["allocated"]
    reserved_grown = None if synced["reserved"] is None else synced["reserved"] - before["reserved"]
    return {"values": {"lags_without_sync": lags, "rounding_bytes": grown - expected, "measurable": True},
            "evidence": {"requested_bytes": expected, "allocated_grew": grown, "reserved_grew": reserved_grown,
                         "requested_counter": synced["requested"] is not None,
                         "unsynced": unsynced["allocated"], "synced": synced["allocated"]}}


def measure_environment() -> dict:
    values, evidence = environment.measure(backend.device(), active_profile().backend_module)
    return {"values": values, "evidence": evidence}
