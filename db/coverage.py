"""The coverage audit in the store (``op_coverage``, schema 0012_op_coverage): writing a
run's reached overloads as its outcomes are stored, and reading a build's coverage against
its census (docs/census.md, "Coverage audit").

Per run, one row per overload its tests reached: ``tests`` (how many reached it) and
``example_test`` (the first that did), plus one marker row per trace that measured it
(``op`` = ``#trace:dispatcher`` / ``#trace:backend``, ``tests`` = tests that trace measured;
torchconform/core/coverage.py).  A build's coverage is the union over its runs (tests
summed); a build without a marker row was not measured.

Backend-relevant overloads: the build's census rows whose status is not ``unavailable``
(no backend of this torch has a kernel: not the device's gap).  The headline counts only
the statuses the build's traces can see: with the dispatcher observer every one; with the
backend's executed operators alone, composites are not measured (they decompose before the
backend), and are reported as such, never as 0.
"""
from __future__ import annotations

from sqlalchemy import delete, func, insert, select

from torchconform.core.coverage import BACKEND, DISPATCHER, MARK, TRACES
from torchconform.core.dispatch import COMPOSITE, STATUSES, UNAVAILABLE
from torchconform.db.models import census_ops, op_coverage

CHUNK = 400   # keys per IN (...) / rows per insert, under SQLite's variable limit
RELEVANT = tuple(s for s in STATUSES if s != UNAVAILABLE)


def write_changes(conn, run_id: int, build_id: int, changes) -> int:
    """Upsert ``changes`` ((op or marker, tests, example test), RunCoverage.take_changes) as
    run ``run_id``'s rows, in the caller's transaction.  Returns how many rows."""
    changes = list(changes)
    for i in range(0, len(changes), CHUNK):
        chunk = changes[i:i + CHUNK]
        conn.execute(delete(op_coverage).where(op_coverage.c.run_id == int(run_id),
                                               op_coverage.c.op.in_([op for op, _, _ in chunk])))
        conn.execute(insert(op_coverage), [
            {"run_id": int(run_id), "build_id": int(build_id), "op": op[:300], "tests": int(tests),
             "example_test": example or ""} for op, tests, example in chunk])
    return len(changes)


def _rows(store, build_id: int) -> tuple[dict, dict]:
    """({overload: (tests, example test)}, {trace: tests}) of the build, over all its runs."""
    query = select(op_coverage.c.op, func.sum(op_coverage.c.tests), func.min(op_coverage.c.example_test)).where(
        op_coverage.c.build_id == build_id).group_by(op_coverage.c.op)
    ops, traces = {}, {}
    with store.read() as conn:
        for op, tests, example in conn.execute(query):
            if op.startswith(MARK):
                traces[op[len(MARK):]] = int(tests or 0)
            else:
                ops[op] = (int(tests or 0), example or "")
    return ops, traces


def _census(store, build_id: int) -> dict[str, str]:
    query = select(census_ops.c.op, census_ops.c.status).where(census_ops.c.build_id == build_id)
    with store.read() as conn:
        return dict(conn.execute(query).all())


def measured_statuses(traces) -> tuple[str, ...]:
    """The census statuses a build's traces can see (empty: not measured)."""
    if DISPATCHER in traces:
        return RELEVANT
    if BACKEND in traces:
        return tuple(s for s in RELEVANT if s != COMPOSITE)
    return ()


def _percent(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def build_coverage(store, build: str) -> dict:
    """Build ``build``'s coverage as one JSON-ready dict (what `torchconform coverage --json`
    prints and the site's coverage page downloads).  An unknown build is the store's UserError.

    Keys: build; measured (bool); traces {trace: tests measured}; has_census; relevant (all
    backend-relevant overloads), measurable (those the traces can see), reached (of them),
    percent (reached / measurable, None when not measured or no census); statuses {status:
    {overloads, reached, measured}}; reached_ops [{op, status, tests, example_test}] (most
    tests first); unreached [{op, status}] (measurable ones no test reached); not_measured
    [status] (relevant statuses the traces cannot see); outside_census [{op, tests,
    example_test}] (reached, not in the census or unavailable there)."""
    build_id = store.build_id(build)
    ops, traces = _rows(store, build_id)
    census = _census(store, build_id)
    seen = measured_statuses(traces)
    statuses = {s: {"overloads": 0, "reached": 0, "measured": s in seen} for s in RELEVANT}
    for op, status in census.items():
        if status in statuses:
            statuses[status]["overloads"] += 1
            if op in ops:
                statuses[status]["reached"] += 1
    relevant = sum(v["overloads"] for v in statuses.values())
    measurable = sum(v["overloads"] for s, v in statuses.items() if s in seen)
    reached = sum(v["reached"] for s, v in statuses.items() if s in seen)
    reached_ops = [{"op": op, "status": census.get(op, ""), "tests": tests, "example_test": example}
                   for op, (tests, example) in ops.items()]
    reached_ops.sort(key=lambda r: (-r["tests"], r["op"]))
    measured = bool(seen)
    return {
        "build": build, "measured": measured, "traces": {t: traces[t] for t in TRACES if t in traces},
        "has_census": bool(census), "relevant": relevant if census else None,
        "measurable": measurable if census and measured else None,
        "reached": reached if census and measured else (len(ops) if measured else None),
        "percent": _percent(reached, measurable) if census and measured else None,
        "statuses": statuses if census else {},
        "not_measured": [s for s in RELEVANT if s not in seen and statuses[s]["overloads"]] if census and measured else [],
        "reached_ops": reached_ops,
        "unreached": sorted(({"op": op, "status": st} for op, st in census.items() if st in seen and op not in ops),
                            key=lambda r: (RELEVANT.index(r["status"]), r["op"])),
        "outside_census": [r for r in reached_ops if r["status"] not in RELEVANT] if census else [],
    }


def headline(cov: dict) -> str:
    """One line: ``coverage 58.50 % (412 of 704 backend-relevant overloads ...)`` or why there is none."""
    if not cov["measured"]:
        return ("coverage not measured: no test of this build was traced (the backend reports no executed "
                "operators and the dispatcher observer was off)")
    if not cov["has_census"]:
        return (f"{cov['reached']} overloads reached; no census to state them against: take one with "
                f"`torchconform census --device D --build {cov['build']}`")
    line = (f"coverage {cov['percent']:.2f} %: {cov['reached']} of {cov['measurable']} backend-relevant overloads "
            f"reached" if cov["percent"] is not None else "coverage: no backend-relevant overload in the census")
    if cov["not_measured"]:
        skipped = sum(cov["statuses"][s]["overloads"] for s in cov["not_measured"])
        line += (f" ({cov['relevant']} in all; {skipped} {'/'.join(cov['not_measured'])} not measured: the backend's "
                 "executed operators cannot show them)")
    return line
