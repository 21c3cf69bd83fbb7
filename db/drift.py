"""Numerical drift per operator x dtype: what the store says about ``max_abs_err`` /
``max_rel_err`` (torchconform/core/numeric.py), for the pages and the CLI.

* ``op_errors``: a build's largest errors per (op, dtype), over its passing tests;
* ``drift``: the change against a baseline, per (op, dtype), over the tests passing in
  both builds -- what the gate's ``numeric_drift`` rule judges (same computation);
* ``error_history``: one (op, dtype)'s largest errors build by build.

Every answer is plain JSON-ready dicts; a test with NULL errors (it compared nothing,
or was stored before schema 0007_numeric_errors) counts nowhere.
"""
from __future__ import annotations

from sqlalchemy import func, select

from torchconform.core.numeric import drift as drift_of
from torchconform.core.numeric import op_dtype_max
from torchconform.core.outcome import PASSED
from torchconform.db import read_rows, shapes
from torchconform.db.models import builds, result_values, results, tests
from torchconform.db.values import JOINED

_COLUMNS = ("test_id", "op", "dtype", "outcome", "max_abs_err", "max_rel_err")


def _error_rows(store, build: str) -> dict[str, tuple]:
    """{test_id: (op, dtype, outcome, max_abs_err, max_rel_err)} of the build's latest
    results that recorded errors (core.numeric.drift's input)."""
    return {row[0]: tuple(row[1:]) for row in read_rows.latest_rows(store, build, _COLUMNS, plain=True)
            if row[4] is not None}


def op_errors(store, build: str) -> list[dict]:
    """Per (op, dtype), sorted: the largest absolute and relative error of the build's
    passing tests, how many tests recorded one, and the tests that saw the largest."""
    cells = op_dtype_max((tid, op, dtype, a, r) for tid, (op, dtype, outcome, a, r) in _error_rows(store, build).items()
                         if outcome in PASSED)
    return [{"op": op, "dtype": dtype, "max_abs_err": c["abs"], "max_rel_err": c["rel"], "tests": c["tests"],
             "abs_test": c["abs_test"], "rel_test": c["rel_test"]} for (op, dtype), c in sorted(cells.items())]


def drift(store, build: str, baseline: str, min_abs: float = 0.0, min_rel: float = 0.0) -> list[dict]:
    """Per (op, dtype): the errors in ``baseline`` and ``build`` over the tests passing in
    both, and their growth (floored at ``min_abs``/``min_rel``), largest growth first."""
    return drift_of(_error_rows(store, baseline), _error_rows(store, build), min_abs, min_rel)


def error_history(store, op: str, dtype: str, device: str | None = None) -> list[dict]:
    """One (op, dtype)'s largest errors per build (latest result per test, passing tests
    only), oldest build first; ``device``: only that device's builds.  Builds where no
    passing test of the pair recorded an error are left out."""
    pks = select(tests.c.id).where(tests.c.op == op, tests.c.dtype == dtype)
    # build_id IN (every build): the (build, test) index, seeked per build and test
    latest = (select(func.max(results.c.id).label("id"))
              .where(results.c.test_pk.in_(pks), results.c.build_id.in_(select(builds.c.id)))
              .group_by(results.c.build_id, results.c.test_pk).subquery("latest"))
    query = (select(builds.c.name, builds.c.created, builds.c.device, builds.c.branch,
                    func.max(results.c.max_abs_err), func.max(results.c.max_rel_err), func.count())
             .select_from(JOINED.join(latest, latest.c.id == results.c.id)
                          .join(builds, builds.c.id == results.c.build_id))
             .where(result_values.c.outcome.in_(sorted(PASSED)), results.c.max_abs_err.is_not(None))
             .group_by(builds.c.id, builds.c.name, builds.c.created, builds.c.device, builds.c.branch)
             .order_by(builds.c.created, builds.c.id))
    if device:
        query = query.where(builds.c.device == device)
    with store.read() as conn:
        rows = conn.execute(query).all()
    return [{"build": name, "created": shapes.iso(created), "device": dev, "branch": branch,
             "max_abs_err": a, "max_rel_err": r, "tests": n} for name, created, dev, branch, a, r, n in rows]
