"""The builds a gate is judging, for rules that read the store themselves.

The gate's rules see outcome records only; a rule that compares something else the store
holds for the two builds (their censuses: census/diff.py; their perf timings:
ci/perfgate.py) reads which store and builds from here.  Whoever evaluates the gate over a
store (ci/pipeline.py) sets them once for every such rule."""
from __future__ import annotations

import contextlib
import contextvars

_GATED: contextvars.ContextVar = contextvars.ContextVar("torchconform_gated_builds", default=None)


@contextlib.contextmanager
def gate_context(store, baseline: str | None, build: str):
    """Within it, the store-reading gate rules compare ``build`` with ``baseline``."""
    token = _GATED.set((store, baseline, build))
    try:
        yield
    finally:
        _GATED.reset(token)


def gated_builds():
    """(store, baseline, build) being gated, or None outside a gate or without a baseline."""
    current = _GATED.get()
    return current if current is not None and current[1] else None


def gated_build():
    """(store, build) being gated, baseline or not (rules that judge the build alone); None outside a gate."""
    current = _GATED.get()
    return None if current is None else (current[0], current[2])
