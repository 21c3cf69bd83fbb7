"""A one-line note a test can leave for its own outcome record (e.g. compile
statistics of a passing test).  The worker plugin clears it before each test and
uses it as the message of a passing outcome.

Compile statistics have one documented, parseable form (docs/classification.md):
``compiled: backend=aot_eager graphs=1 graph_breaks=0 recompiles=0``, written by
:func:`compile_note` and read back by :func:`parse_compile_note`, so the store,
the gate and the site can count graph breaks without a schema change.
"""
from __future__ import annotations

import re

_note: list[str] = []

COMPILE_PREFIX = "compiled:"
COMPILE_FIELDS = ("graphs", "graph_breaks", "recompiles")
_COMPILE_RX = re.compile(
    r"^compiled: backend=(?P<backend>\S+) graphs=(?P<graphs>\d+) graph_breaks=(?P<graph_breaks>\d+) "
    r"recompiles=(?P<recompiles>\d+)(?:\s|$)")


def note(text: str) -> None:
    _note[:] = [str(text)]


def take() -> str:
    text = _note[0] if _note else ""
    _note.clear()
    return text


def clear() -> None:
    _note.clear()


def compile_note(backend: str, graphs: int, graph_breaks: int, recompiles: int) -> str:
    """The message of a passing compiled test."""
    backend = str(backend).replace(" ", "_") or "unknown"
    return (f"{COMPILE_PREFIX} backend={backend} graphs={int(graphs)} graph_breaks={int(graph_breaks)} "
            f"recompiles={int(recompiles)}")


def parse_compile_note(message: str) -> dict | None:
    """``{"backend", "graphs", "graph_breaks", "recompiles"}`` from an outcome
    message written by :func:`compile_note`, or None for any other message."""
    m = _COMPILE_RX.match(message or "")
    if not m:
        return None
    out = {"backend": m.group("backend")}
    out.update({k: int(m.group(k)) for k in COMPILE_FIELDS})
    return out


# The execution cost of a passing model run (suites/models/check.py), cold and warm apart:
# ``timing: device_cold_s=0.0213 device_warm_s=0.0040 cpu_cold_s=0.0102 cpu_warm_s=0.0038
# warm_calls=2 compiles=1``.  A figure not measured is ``-`` (warm with --warm-calls 0,
# compiles outside the compiled run).
TIMING_PREFIX = "timing:"
TIMING_FIELDS = ("device_cold_s", "device_warm_s", "cpu_cold_s", "cpu_warm_s", "warm_calls", "compiles")
_TIMING_RX = re.compile(r"^timing:((?: \w+=\S+)+)\s*$")


def timing_note(**figures) -> str:
    """The message of a passing model run; ``figures`` by the names of TIMING_FIELDS."""
    unknown = set(figures) - set(TIMING_FIELDS)
    if unknown:
        raise ValueError(f"timing_note: unknown fields {sorted(unknown)}")

    def text(name):
        value = figures.get(name)
        if value is None:
            return "-"
        return str(int(value)) if name in ("warm_calls", "compiles") else f"{float(value):.6g}"

    return TIMING_PREFIX + "".join(f" {name}={text(name)}" for name in TIMING_FIELDS)


def parse_timing_note(message: str) -> dict | None:
    """The figures of a :func:`timing_note` message (None for a figure not measured),
    or None for any other message."""
    m = _TIMING_RX.match(message or "")
    if not m:
        return None
    pairs = dict(part.split("=", 1) for part in m.group(1).split())
    if set(pairs) != set(TIMING_FIELDS):
        return None
    out = {}
    for name, value in pairs.items():
        if value == "-":
            out[name] = None
            continue
        try:
            out[name] = int(value) if name in ("warm_calls", "compiles") else float(value)
        except ValueError:
            return None
    return out
