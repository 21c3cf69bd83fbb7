"""The device module registered as ``torch.<name>`` (``torch.refdev`` by default).

Mirrors the parts of ``torch.cuda`` that device-generic code calls: counts,
current device, seeding and RNG state, memory statistics.  Memory is host RAM
allocated per tensor (no caching allocator), so "reserved" equals "allocated".
"""
from __future__ import annotations

import contextlib

from torchconform.refdev import state


def _ext():
    return state.extension()


def _index(device=None) -> int:
    """Device index from None / int / str / torch.device (None: current device)."""
    import torch

    if device is None:
        return _ext().current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return device.index if device.index is not None else _ext().current_device()


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


def _lazy_init() -> None:
    """PyTorch calls this before first use of a device module; refdev is ready once loaded."""


def device_count() -> int:
    return _ext().device_count()


def current_device() -> int:
    return _ext().current_device()


def set_device(device) -> None:
    _ext().set_device(_index(device))


@contextlib.contextmanager
def device(dev):
    """Context manager that makes ``dev`` the current device."""
    previous = current_device()
    set_device(dev)
    try:
        yield
    finally:
        set_device(previous)


def _device(device=None):
    import torch

    return torch.device(torch._C._get_privateuse1_backend_name(), _index(device))


# Streams and events: PyTorch's device-generic torch.Stream / torch.Event over refdev's
# DeviceGuardImpl (csrc/runtime/guard.cpp).  Streams have identities and a per-thread current stream,
# but every kernel runs synchronously on the host, so work on one stream never overlaps
# another; events record host time, so elapsed_time() is real.
def Stream(device=None, priority: int = 0, **kwargs):
    import torch

    return torch.Stream(device=_device(device), priority=priority)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
    import torch

    return torch.Event(device=_device(), enable_timing=enable_timing, blocking=blocking,
                       interprocess=interprocess)


def current_stream(device=None):
    import torch

    return torch.accelerator.current_stream(_device(device))


def default_stream(device=None):
    """Stream 0 of the device (csrc/runtime/guard.cpp numbers new streams from 1)."""
    import torch

    dev = _device(device)
    kind = torch.accelerator.current_stream(dev).device_type
    return torch.Stream(stream_id=0, device_index=dev.index, device_type=kind)


def set_stream(stream) -> None:
    import torch

    torch.accelerator.set_stream(stream)


@contextlib.contextmanager
def stream(s):
    """Make ``s`` the current stream of its device (and that device current) inside the block."""
    import torch

    if s is None:
        yield
        return
    previous_device = current_device()
    set_device(s.device_index)
    previous = current_stream()
    torch.accelerator.set_stream(s)
    try:
        yield
    finally:
        torch.accelerator.set_stream(previous)
        set_device(previous_device)


def synchronize(device=None) -> None:
    """Every kernel runs synchronously on the host: nothing to wait for."""
    _index(device)


def manual_seed(seed: int) -> None:
    _ext().manual_seed(current_device(), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _ext().manual_seed(i, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> None:
    _ext().seed(current_device())


def seed_all() -> None:
    for i in range(device_count()):
        _ext().seed(i)


def initial_seed() -> int:
    return _ext().initial_seed(current_device())


def get_rng_state(device=None):
    return _ext().get_rng_state(_index(device))


def set_rng_state(new_state, device=None) -> None:
    _ext().set_rng_state(_index(device), new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states) -> None:
    for i, rng_state in enumerate(states):
        set_rng_state(rng_state, i)


def memory_allocated(device=None) -> int:
    return _ext().memory_allocated(_index(device))


def max_memory_allocated(device=None) -> int:
    return _ext().max_memory_allocated(_index(device))


def memory_reserved(device=None) -> int:
    return memory_allocated(device)


def max_memory_reserved(device=None) -> int:
    return max_memory_allocated(device)


def reset_peak_memory_stats(device=None) -> None:
    _ext().reset_peak_memory_stats(_index(device))


def memory_stats(device=None) -> dict:
    i = _index(device)
    return {
        "allocated_bytes.all.current": _ext().memory_allocated(i),
        "allocated_bytes.all.peak": _ext().max_memory_allocated(i),
        "reserved_bytes.all.current": _ext().memory_allocated(i),
        "reserved_bytes.all.peak": _ext().max_memory_allocated(i),
        "num_alloc_retries": 0,
        "allocation.all.allocated": _ext().num_allocs(i),
        # leaks_ops trait: bytes retained by leaking kernels (part of allocated_bytes)
        "leaked_bytes.all.current": _ext().leaked_bytes(i),
    }


def leak_counts() -> dict[str, int]:
    """Workspaces retained (leaked) per operator since the process started; the
    per-test leak check (collectors/devicecheck.py) names what changed across a test."""
    return state.leak_counts()


def leak_report() -> str:
    """One line naming retained (leaked) device allocations of the whole process, "" when there are none."""
    counts = state.leak_counts()
    if not counts:
        return ""
    total = sum(_ext().leaked_bytes(i) for i in range(device_count()))
    ops = ", ".join(f"{op} x{n}" for op, n in sorted(counts.items()))
    return f"{total} bytes retained by leaking kernels since the process started ({ops})"


def empty_cache() -> None:
    """No cache to empty: freed tensors return their memory immediately.
    Workspaces retained by a leaks_ops kernel are not freed: a leak stays visible."""


def get_amp_supported_dtype():
    import torch

    return [torch.float16, torch.bfloat16]


# Boxed profiles (fallback.mode: boxed) make refdev look like a typical real backend: its
# device module offers no memory_stats() and no leak counters, so the collectors take the
# paths they take for such a backend (no allocation counter, no leak check).
BOXED_HIDDEN = ("memory_stats", "leak_counts", "leak_report")


def boxed_module():
    """This module's twin without BOXED_HIDDEN (registered as torch.<name> for a boxed profile)."""
    import sys
    import types

    this = sys.modules[__name__]
    twin = types.ModuleType(__name__ + ".boxed", this.__doc__)
    twin.__dict__.update({k: v for k, v in vars(this).items()
                          if k not in BOXED_HIDDEN and not (k.startswith("__") and k.endswith("__"))})
    return twin
