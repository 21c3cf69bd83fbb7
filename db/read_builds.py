"""Reading builds: the stored builds with their runs and completeness, and a build's
breakdown (summary; per suite or file: db/counts.py); for the nightly sweep,
what a build already holds and how long tests took before.

All functions take a ``Store`` and return plain JSON-ready dicts and lists, shaped by
db/shapes.py; a build's results are its latest per test (db/read_rows.py).
"""
from __future__ import annotations

import socket

from sqlalchemy import and_, func, or_, select

from torchconform.config import mask_password
from torchconform.db import counts
from torchconform.db import series as series_mod
from torchconform.db.models import DONE_STATES, builds, results, runs, tests
from torchconform.db.not_run import with_not_run
from torchconform.db.read_tiers import with_build_tiers
from torchconform.db.runstate import absent_runs, build_complete, effective_status
from torchconform.db.shapes import build_dict, completeness, iso
from torchconform.db.values import US_PER_S


def _run_states(conn) -> dict[int, list[tuple[str, str, str]]]:
    """{build id: [(suite, shard, effective status) of each run]} (see db/runstate.py)."""
    out: dict[int, list[tuple[str, str, str]]] = {}
    this_host = socket.gethostname()
    for build_id, suite, shard, status, host, pid in conn.execute(
            select(runs.c.build_id, runs.c.suite, runs.c.shard, runs.c.status, runs.c.host, runs.c.pid)
            .order_by(runs.c.id)):
        out.setdefault(build_id, []).append((suite, shard, effective_status(status, host, pid, this_host)))
    return out


def list_builds(store, series: bool = False) -> list[dict]:
    """Every build, oldest first, with run counts, results stored (not deduplicated),
    ``complete`` (every run finished or resumed, every planned run there; an interrupted or
    killed run makes it false) and ``unfinished_runs`` (runs not done + planned runs missing).

    ``series``: also ``suite_set`` and ``series`` (device, profile, branch, suite_set: the
    builds that belong together, db/series.py), which the site and the gate group by."""
    stats = (select(runs.c.build_id,
                    func.count(runs.c.id).label("runs"),
                    func.coalesce(func.sum(runs.c.n_results), 0).label("results"))
             .group_by(runs.c.build_id).subquery())
    query = (select(builds, stats.c.runs, stats.c.results)
             .select_from(builds.outerjoin(stats, stats.c.build_id == builds.c.id))
             .order_by(builds.c.created, builds.c.id))
    with store.read() as conn:
        rows = conn.execute(query).mappings().all()
        states = _run_states(conn)
    out = []
    for row in rows:
        n_runs = int(row["runs"] or 0)
        run_states = states.get(row["id"], [])
        plan = (row["metadata"] or {}).get("plan")
        unfinished = sum(s not in DONE_STATES for _, _, s in run_states) + len(absent_runs(run_states, plan))
        d = build_dict(row, {"runs": n_runs, "complete": build_complete(run_states, plan),
                              "unfinished_runs": unfinished, "results": int(row["results"] or 0)})
        if series:
            d["suite_set"] = series_mod.suite_set([suite for suite, _, _ in run_states], plan)
            d["series"] = series_mod.series_of(d).as_dict()
        out.append(d)
    return out


def test_counts(store) -> dict[str, int]:
    """build name -> tests with a result in it (what ``summary`` counts: one per test, its
    latest attempt; ``list_builds``' results count every stored row, reruns and appends too)."""
    counts = (select(results.c.build_id, func.count(func.distinct(results.c.test_pk)).label("n"))
              .group_by(results.c.build_id).subquery())
    query = select(builds.c.name, counts.c.n).select_from(builds.join(counts, counts.c.build_id == builds.c.id))
    with store.read() as conn:
        return {name: int(n) for name, n in conn.execute(query)}


def build_info(store, build: str) -> dict:
    """One build's metadata and its runs (suite, shard, host, times, exit status, status)."""
    this_host = socket.gethostname()
    with store.read() as conn:
        row = store.build_row(build, conn)
        run_rows = conn.execute(select(runs).where(runs.c.build_id == row["id"]).order_by(runs.c.id)).mappings().all()
    info = build_dict(row)
    info["runs"] = [{"id": r["id"], "suite": r["suite"], "selection": r["selection"], "shard": r["shard"],
                     "host": r["host"], "command": mask_password(r["command"]),  # rows stored before masking
                     "started": iso(r["started"]),
                     "ended": iso(r["ended"]), "exit_status": r["exit_status"], "results": r["n_results"],
                     "status": effective_status(r["status"], r["host"], r["pid"], this_host),
                     "planned": r["planned"]}
                    for r in run_rows]
    plan = info["metadata"].get("plan")
    triples = [(r["suite"], r["shard"], r["status"]) for r in info["runs"]]
    info["complete"] = build_complete(triples, plan)
    info["missing_runs"] = [{"suite": suite, "shard": shard} for suite, shard in absent_runs(triples, plan)]
    return info


def latest_build(store, branch: str | None = None, device: str | None = None,
                 exclude: str | None = None) -> str | None:
    """Name of the most recently created build (optionally on a branch / device), or None."""
    query = select(builds.c.name).order_by(builds.c.created.desc(), builds.c.id.desc()).limit(1)
    if branch:
        query = query.where(builds.c.branch == branch)
    if device:
        query = query.where(builds.c.device == device)
    if exclude:
        query = query.where(builds.c.name != exclude)
    with store.read() as conn:
        return conn.execute(query).scalar_one_or_none()


def summary(store, build: str) -> dict:
    """The seed's breakdown of a build (the shape of ``core.breakdown``): counted by the
    site's arrays (db/counts.py ``breakdown``), with completeness, not_run and tiers."""
    b = {**counts.breakdown(store, build), **completeness(build_info(store, build))}
    with_not_run(store, build, b)   # "not_run": what the selections left out (db/not_run.py)
    return with_build_tiers(store, build, b)   # "tiers", "near_misses" (db/read_tiers.py)


def stored_test_ids(store, build: str, suite: str) -> set[str]:
    """Test ids of ``suite`` that ``build`` already has a result for (empty for an unknown build:
    a sweep resuming a build that does not exist yet has nothing done)."""
    with store.read() as conn:
        build_id = conn.execute(select(builds.c.id).where(builds.c.name == build)).scalar_one_or_none()
        if build_id is None:
            return set()
        pks = select(results.c.test_pk).where(results.c.build_id == build_id).distinct().subquery()
        query = select(tests.c.test_id).join(pks, pks.c.test_pk == tests.c.id).where(tests.c.suite == suite)
        return {row[0] for row in conn.execute(query)}


def earlier_durations(store, suite: str, exclude_build: str | None = None, builds_back: int = 3,
                      device: str | None = None) -> dict[str, float]:
    """Mean duration per test id of ``suite`` over the ``builds_back`` most recent builds
    (other than ``exclude_build``; of ``device`` when given: another device's timings say
    little about this one's): what sharded runs and sweeps balance shards by.

    When ``exclude_build`` is stored already, only builds made before it count: the
    history its first run balanced its shards by, so that a ``--resume`` of a shard plans
    the same tests even after newer builds were stored."""
    with store.read() as conn:
        recent = select(builds.c.id).order_by(builds.c.created.desc(), builds.c.id.desc()).limit(builds_back)
        if exclude_build:
            recent = recent.where(builds.c.name != exclude_build)
            own = conn.execute(select(builds.c.created, builds.c.id).where(builds.c.name == exclude_build)).one_or_none()
            if own is not None:
                recent = recent.where(or_(builds.c.created < own[0],
                                          and_(builds.c.created == own[0], builds.c.id < own[1])))
        if device:
            recent = recent.where(builds.c.device == device)
        ids = [row[0] for row in conn.execute(recent)]
        if not ids:
            return {}
        query = (select(tests.c.test_id, func.avg(results.c.duration_us))
                 .select_from(results.join(tests, tests.c.id == results.c.test_pk))
                 .where(results.c.build_id.in_(ids), tests.c.suite == suite)
                 .group_by(tests.c.test_id))
        return {tid: float(avg or 0.0) / US_PER_S for tid, avg in conn.execute(query)}
