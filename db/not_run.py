"""Not-run accounting in the store (``not_run``, schema 0013_not_run): a run's tally per
reason, written with its end, and a build's ``not_run`` for the breakdown
(torchconform/core/not_run.py: per suite each reason's largest count over its runs, summed
over suites).  Counts only: a row per reason per run, never one per test left out.
"""
from __future__ import annotations

from sqlalchemy import delete, insert, select

from torchconform.core import not_run as shapes
from torchconform.db.models import not_run, runs


def write_run(conn, run_id: int, build_id: int, tally: dict | None) -> int:
    """Run ``run_id``'s rows from its tally (``{reason: {count, detail, example}}``), in the
    caller's transaction; replaces what the run had.  Returns how many rows."""
    conn.execute(delete(not_run).where(not_run.c.run_id == int(run_id)))
    rows = [{"run_id": int(run_id), "build_id": int(build_id), "reason": str(reason)[:40],
             "tests": int(e.get("count", 0)), "detail": str(e.get("detail", "") or ""),
             "example_test": str(e.get("example", "") or "")}
            for reason, e in (tally or {}).items() if int(e.get("count", 0)) > 0]
    if rows:
        conn.execute(insert(not_run), rows)
    return len(rows)


def build_not_run(conn, build_id: int) -> dict:
    """The breakdown's ``not_run`` of a build (``{"total": 0, "reasons": {}}`` when none)."""
    query = (select(runs.c.suite, not_run.c.run_id, not_run.c.reason, not_run.c.tests, not_run.c.detail)
             .select_from(not_run.join(runs, runs.c.id == not_run.c.run_id))
             .where(not_run.c.build_id == int(build_id)))
    return shapes.of_build(conn.execute(query).all())


def with_not_run(store, build: str, b: dict) -> dict:
    """The breakdown ``b`` of a stored build with its ``not_run`` where its runs left tests out
    (no key otherwise, as a run's own breakdown: a whole selection, an ingested report)."""
    with store.read() as conn:
        got = build_not_run(conn, store.build_id(build, conn))
    if got["total"]:
        b["not_run"] = got
    return b
