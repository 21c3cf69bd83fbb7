"""Bring up the device under test in a process, as its backend profile says.

Every worker (and the in-process runner) calls ``prepare(profile)`` once
before touching the device: it sets the profile's environment, imports the
backend module and calls its setup hook.
"""
from __future__ import annotations

import importlib
import os
import warnings

_prepared: set[str] = set()


def _call(ref: str):
    module, _, func = ref.partition(":")
    target = importlib.import_module(module)
    return getattr(target, func)() if func else target


def prepare(profile) -> None:
    if profile.name in _prepared:
        return
    for key, value in (profile.env or {}).items():
        os.environ.setdefault(key, value)
    if profile.backend_module:
        importlib.import_module(profile.backend_module)
    if profile.setup:
        _call(profile.setup)
    _prepared.add(profile.name)


def fallback_counts(profile) -> dict:
    """{op: count} from the backend's own counter, or {} when it has none."""
    if not profile.fallback_counter:
        return {}
    try:
        return dict(_call(profile.fallback_counter) or {})
    except Exception:
        return {}


def reset_fallback_counts(profile) -> None:
    if profile.fallback_reset:
        try:
            _call(profile.fallback_reset)
        except Exception as exc:  # noqa: BLE001 - the backend's own hook failed
            # Stale counts would mark the next model pass_fallback wrongly: say so.
            warnings.warn(f"torchconform: the profile's fallback_reset failed ({exc!r}); "
                          "fallback evidence may carry over between models")
