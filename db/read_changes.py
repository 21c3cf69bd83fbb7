"""Reading what changed: one test's results across builds and attempts, and the tests
whose attempts in one build disagree (flaky).

All functions take a ``Store``.  Two builds compared test by test (the diff) is counted
from their arrays (db/arrays.py ``diff``) and shaped by db/shapes.py's ``diff_maps``.
"""
from __future__ import annotations

from sqlalchemy import and_, func, select

from torchconform.core.outcome import PASSED
from torchconform.db.models import builds, result_values, results, runs, tests
from torchconform.db.read_rows import REPRO
from torchconform.db.shapes import iso, label
from torchconform.db.values import DURATION, JOINED

# What results say (outcome, kind, ...) is in result_values, joined by value_id (db/values.py).
V = result_values.c


def test_history(store, test_id: str) -> list[dict]:
    """Every stored result of one test across builds and attempts, oldest build first."""
    with store.read() as conn:
        pk = conn.execute(select(tests.c.id).where(tests.c.test_id == test_id)).scalar_one_or_none()
        if pk is None:
            return []
        # One seek of the (build, test) index per build: results have no index by test alone.
        build_ids = conn.execute(select(builds.c.id)).scalars().all()
    query = (select(builds.c.name, builds.c.created, builds.c.branch, results.c.run_id, results.c.attempt,
                    V.outcome, V.kind, V.missing_op, V.fallback_ops,
                    V.skiplist_entry, V.device, DURATION.label("duration"), V.message,
                    REPRO.label("repro"), results.c.id, results.c.max_abs_err, results.c.max_rel_err)
             .select_from(JOINED.join(tests, tests.c.id == results.c.test_pk)
                          .join(builds, builds.c.id == results.c.build_id)
                          .join(runs, runs.c.id == results.c.run_id))
             .where(results.c.build_id.in_(build_ids), results.c.test_pk == pk)
             .order_by(builds.c.created, builds.c.id, results.c.id))
    with store.read() as conn:
        rows = conn.execute(query).mappings().all()
    latest_per_build = {}
    for r in rows:
        latest_per_build[r["name"]] = r["id"]
    return [{"build": r["name"], "created": iso(r["created"]), "branch": r["branch"], "run_id": r["run_id"],
             "attempt": r["attempt"], "outcome": r["outcome"], "kind": r["kind"], "missing_op": r["missing_op"],
             "fallback_ops": r["fallback_ops"].split() if r["fallback_ops"] else [],
             "skiplist_entry": r["skiplist_entry"], "device": r["device"], "duration": r["duration"],
             "message": r["message"], "repro": r["repro"], "max_abs_err": r["max_abs_err"],
             "max_rel_err": r["max_rel_err"], "latest": latest_per_build[r["name"]] == r["id"]}
            for r in rows]


def flaky_tests(store, build: str | None = None, test_id: str | None = None) -> list[dict]:
    """Tests with several attempts in one build whose attempts both passed and did not.

    The gate stores each confirmation rerun as another attempt; this reads them back.
    One entry per (build, test): attempts in order and whether it is flaky.
    """
    query = (select(builds.c.name, tests.c.test_id, results.c.attempt, V.outcome, V.kind,
                    results.c.build_id, results.c.test_pk, results.c.id)
             .select_from(JOINED.join(tests, tests.c.id == results.c.test_pk)
                          .join(builds, builds.c.id == results.c.build_id)))
    multi = select(results.c.build_id, results.c.test_pk).group_by(results.c.build_id, results.c.test_pk)
    if build is not None:
        with store.read() as conn:
            bid = store.build_id(build, conn)
        multi = multi.where(results.c.build_id == bid)
    if test_id is not None:
        # build_id IN (every build): the (build, test) index, seeked once per build
        multi = multi.where(results.c.test_pk.in_(select(tests.c.id).where(tests.c.test_id == test_id)),
                            results.c.build_id.in_(select(builds.c.id)))
    multi = multi.having(func.count() > 1).subquery()
    query = query.join(multi, and_(multi.c.build_id == results.c.build_id, multi.c.test_pk == results.c.test_pk))
    query = query.order_by(builds.c.created, builds.c.id, tests.c.test_id, results.c.id)
    groups: dict[tuple, dict] = {}
    with store.read() as conn:
        for name, tid, attempt, outcome, kind, *_ in conn.execute(query):
            g = groups.setdefault((name, tid), {"build": name, "test_id": tid, "attempts": []})
            g["attempts"].append({"attempt": attempt, "outcome": label(outcome, kind)})
    out = []
    for g in groups.values():
        outs = [a["outcome"].split("/")[0] for a in g["attempts"]]
        g["flaky"] = any(o in PASSED for o in outs) and any(o not in PASSED for o in outs)
        out.append(g)
    return out
