"""Reading missing operators: the leaderboard of what each operator blocks in a build,
and in which build each operator was first reported missing.

The leaderboard is counted by the site's arrays (db/arrays.py ``BuildData.leaderboard``,
the one implementation), here over only the build's missing-operator results
(db/counts.py ``missing_rows``).  The census's fuller answer (every operator a traced
model's set reaches) is census/impact.py's ``leaderboard``, which passes its per-model
counts in here.
"""
from __future__ import annotations

from sqlalchemy import select

from torchconform.db import counts
from torchconform.db.models import build_values, builds, result_values
from torchconform.db.read_builds import latest_build
from torchconform.db.shapes import iso

# What results say (outcome, kind, ...) is in result_values, joined by value_id (db/values.py).
V = result_values.c


def missing_op_leaderboard(store, build: str | None = None, census: dict | None = None) -> list[dict]:
    """Operators ranked by what they block in ``build`` (default: the latest build).

    ``tests``: tests blocked outside the models suite; ``models``: distinct models
    (tests.op in the models suite) blocked; ``first_build``: the earliest build in
    which the operator was ever reported missing.  ``census``: op -> {"models",
    "through"} of the build's traced models (census.impact.census_models); with it a
    traced model counts for every operator of its full blocking set, not only the first
    one its run hit, an operator no test reached is listed too, and each entry has ``through`` (the
    composites through whose decomposition models reach it; [] when one reaches it
    directly) and ``decomposition_only``.  None: the first hits only.
    """
    build = build or latest_build(store)
    if build is None:
        return []
    data = counts.missing_rows(store, build)
    ops = {op for op in data.missing_counts() if op} | set(census or ())
    with store.read() as conn:
        first = _first_builds(conn, sorted(ops)) if ops else {}
    return data.leaderboard(counts.DB_READS, first, census)


def first_missing_builds(store) -> dict[str, tuple[str, str]]:
    """Every operator ever reported missing -> (name, created) of the earliest build
    naming it: one query for a caller (the site) that ranks many builds."""
    with store.read() as conn:
        return _first_builds(conn, None)


def _first_builds(conn, ops: list[str] | None) -> dict[str, tuple[str, str]]:
    """op -> (name, created) of the earliest build where it was ever missing (``ops``: None = every op)."""
    # build_values: the values any result of a build points at (no scan of the results)
    pairs = (select(V.missing_op, build_values.c.build_id)
             .select_from(build_values.join(result_values, result_values.c.id == build_values.c.value_id))
             .where(V.missing_op != ""))
    if ops is not None:
        pairs = pairs.where(V.missing_op.in_(ops))
    pairs = pairs.group_by(V.missing_op, build_values.c.build_id).subquery()
    query = (select(pairs.c.missing_op, builds.c.name, builds.c.created, builds.c.id)
             .select_from(pairs.join(builds, builds.c.id == pairs.c.build_id)))
    first: dict[str, tuple] = {}
    for op, name, created, bid in conn.execute(query):
        if op not in first or (created, bid) < first[op][1]:
            first[op] = (name, (created, bid))
    return {op: (name, iso(key[0])) for op, (name, key) in first.items()}
