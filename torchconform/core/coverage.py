"""The coverage audit's shared words: which ATen overloads a test reached on the device, and
their union over a run (docs/census.md, "Coverage audit").

A test's reached overloads come only from what the runner already traces per test
(collectors/worker.py), never from a trace of its own:

- ``dispatcher``: the dispatcher observer's operators (collectors/dispatchwatch.py,
  ``Seen.ops``): every overload called with a device tensor, at any depth, composites
  included; on where a boxed CPU fallback or no allocation counter needs it, or with
  ``TORCHCONFORM_DISPATCH_WATCH=always``;
- ``backend``: the operators the backend reports it executed (a profile's
  ``tracking.executed_ops``, collectors/tracking.py; refdev's ``executed_ops()``): the
  kernels the device ran, so an overload that decomposes before the backend (a composite)
  is never among them.

To either the record's own ``fallback_ops`` and ``missing_op`` are added (the device was
asked for them: its CPU fallback served them, or it had no kernel).  A test with neither
trace is not measured: it adds nothing, and a build none of whose tests was measured says
"not measured", never 0 %.

The worker sends ``{"trace": "backend", "ops": [...]}`` with the call's report; the
controller puts it on the record as ``Outcome.coverage`` (not a field: never a results
column); the store's sink folds each batch into a ``RunCoverage`` and writes the rows that
changed (db/coverage.py) in the batch's own transaction.
"""
from __future__ import annotations

DISPATCHER = "dispatcher"
BACKEND = "backend"
TRACES = (DISPATCHER, BACKEND)
# op_coverage rows whose op starts with this are not overloads but a run's measure marker:
# "#trace:<trace>" with ``tests`` = how many tests that trace measured (db/coverage.py).
MARK = "#trace:"


def call_coverage(seen=None, executed=None) -> dict | None:
    """What the worker sends for one test's call: the traces that ran and what they saw
    (sorted), or None when nothing traced it (not measured)."""
    traces, ops = [], set()
    if seen is not None and getattr(seen, "recorded", False):
        traces.append(DISPATCHER)
        ops.update(seen.ops)
    if executed is not None:
        traces.append(BACKEND)
        ops.update(executed)
    if not traces:
        return None
    return {"trace": "+".join(traces), "ops": sorted(ops)}


def reached_ops(o) -> tuple[list[str], set[str]] | None:
    """(traces, reached overloads) of one record, or None when it was not measured: the
    traced operators plus the record's fallback operators and missing operator."""
    cov = getattr(o, "coverage", None)
    if not cov or not cov.get("trace"):
        return None
    ops = set(cov.get("ops") or ())
    ops.update(getattr(o, "fallback_ops", None) or ())
    missing = getattr(o, "missing_op", "") or ""
    if missing:
        ops.add(missing)
    return cov["trace"].split("+"), {op for op in ops if op and not op.startswith(MARK)}


class RunCoverage:
    """One run's coverage: {overload: [tests, example test]} and tests measured per trace,
    with what changed since the last ``take_changes`` (what the sink writes at each flush)."""

    def __init__(self):
        self.ops: dict[str, list] = {}
        self.traces: dict[str, int] = {}
        self._changed: set[str] = set()

    def add(self, outcomes) -> None:
        for o in outcomes:
            found = reached_ops(o)
            if found is None:
                continue
            traces, ops = found
            for trace in traces:
                self.traces[trace] = self.traces.get(trace, 0) + 1
                self._changed.add(MARK + trace)
            for op in ops:
                entry = self.ops.get(op)
                if entry is None:
                    self.ops[op] = [1, o.test_id]
                else:
                    entry[0] += 1
                self._changed.add(op)

    def row(self, key: str) -> tuple[int, str]:
        """(tests, example test) of an overload or a marker key."""
        if key.startswith(MARK):
            return self.traces[key[len(MARK):]], ""
        tests, example = self.ops[key]
        return tests, example

    def take_changes(self) -> list[tuple[str, int, str]]:
        """(key, tests, example test) of every overload and marker changed since the last call."""
        changed, self._changed = sorted(self._changed), set()
        return [(key, *self.row(key)) for key in changed]
