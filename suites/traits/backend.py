"""What every probe needs from the backend under test, through public APIs only:
the device, its ``torch.<device>`` module, synchronize, the profile's compile
backend and fallback counter, and whether an exception is a missing operator."""
from __future__ import annotations

import importlib
import warnings
from contextlib import contextmanager

import torch

from torchconform.core.classify import classify_exception
from torchconform.core.outcome import MISSING_OP
from torchconform.suites.common import active_profile, device_type


def device() -> str:
    return device_type()


def device_module():
    """``torch.<device>`` (``torch.cuda``, ``torch.refdev``...); None for the CPU,
    whose ``torch.cpu`` has no device counters to read."""
    name = device()
    return None if name == "cpu" else getattr(torch, name, None)


def synchronize() -> None:
    mod = device_module() or getattr(torch, device(), None)
    sync = getattr(mod, "synchronize", None)
    if callable(sync):
        sync()


def compile_backend() -> str:
    return active_profile().compile_backend


def is_missing_op(exc: BaseException) -> bool:
    """Did the backend lack the operator (the classifier's missing_op)?"""
    return classify_exception(exc, active_profile()).kind == MISSING_OP


def _hook(spec: str):
    """A profile's ``module:function`` hook, or None."""
    module, _, func = (spec or "").partition(":")
    if not module or not func:
        return None
    return getattr(importlib.import_module(module), func, None)


def fallback_counter():
    """(counts, reset) from the profile's fallback_counter/fallback_reset, or (None, None)."""
    profile = active_profile()
    return _hook(profile.fallback_counter), _hook(profile.fallback_reset)


@contextmanager
def recorded_warnings():
    """Every warning of the block, duplicates included (fallback warnings repeat per call)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


