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
