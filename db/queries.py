"""The one read module: every question the CLI, the gate and the site ask the store.

All functions take a ``Store`` and return plain JSON-ready dicts and lists.

"The outcome of a test in a build" is always its *latest* result in that build:
the highest result id per (build, test) across all of the build's runs, so shards
from several machines merge, and a rerun (the gate's flaky confirmation, stored
with attempt > 1) supersedes the first attempt.  Earlier attempts stay stored
and show in ``test_history`` and ``flaky_tests``.
"""
from __future__ import annotations

import dataclasses
import socket
from operator import itemgetter
from collections import Counter, defaultdict
from typing import Iterator

from sqlalchemy import and_, func, or_, select

from torchconform.core.breakdown import breakdown_of_counts
from torchconform.core.outcome import (
    CRASH, ERROR, FAIL, FAILED, MISSING_OP, PASS, PASS_FALLBACK, PASSED, SKIP_BACKEND, TIMEOUT, Outcome,
)
from torchconform.config import mask_password
from torchconform.db import series as series_mod
from torchconform.db.models import DONE_STATES, build_values, builds, result_values, results, runs, tests
from torchconform.db.runstate import absent_runs, build_complete, effective_status
from torchconform.db.store import TEST_COLUMNS
from torchconform.db.values import DURATION, JOINED, US_PER_S, VALUE_COLUMNS, values_of
from torchconform.errors import UserError

# What results say (outcome, kind, ...) is in result_values, joined by value_id (db/values.py).
V = result_values.c

# What counts as a regression from a passing baseline (the gate's default rule).
REGRESSED = frozenset({FAIL, ERROR, CRASH, TIMEOUT})
MODELS_SUITE = "models"
DISTRIBUTED_SUITE = "distributed"
LOOKUP_CHUNK = 2000


def _iso(value) -> str | None:
    return value.isoformat(timespec="seconds") + "Z" if value is not None else None


def _latest_ids(build_id: int):
    """Subquery: the latest result id of every test in the build (index-only scan)."""
    return (select(func.max(results.c.id).label("id"))
            .where(results.c.build_id == build_id)
            .group_by(results.c.test_pk)
            .subquery("latest"))


# A result's repro command: its own, or (NULL) its run's template rendered for its test,
# as torchconform/core/outcome.py's render_repro does.  Needs runs and tests joined.
REPRO = func.coalesce(V.repro, func.replace(func.replace(runs.c.repro_template, "{id}", tests.c.test_id),
                                                    "{op}", tests.c.op))


def _latest(build_id: int):
    """FROM clause: results restricted to the latest per test of the build, with what they say."""
    latest = _latest_ids(build_id)
    return JOINED.join(latest, results.c.id == latest.c.id)


# -- builds -----------------------------------------------------------------------------
def _build_dict(row, run_stats: dict | None = None) -> dict:
    d = {
        "name": row["name"],
        "created": _iso(row["created"]),
        "torch_version": row["torch_version"],
        "torch_git": row["torch_git"],
        "backend": row["backend"],
        "backend_version": row["backend_version"],
        "device": row["device"],
        "profile": row["profile"],
        "branch": row["branch"],
        "commit": row["commit"],
        "metadata": dict(row["metadata"] or {}),
    }
    if run_stats is not None:
        d.update(run_stats)
    return d


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
        d = _build_dict(row, {"runs": n_runs, "complete": build_complete(run_states, plan),
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
    info = _build_dict(row)
    info["runs"] = [{"id": r["id"], "suite": r["suite"], "selection": r["selection"], "shard": r["shard"],
                     "host": r["host"], "command": mask_password(r["command"]),  # rows stored before masking
                     "started": _iso(r["started"]),
                     "ended": _iso(r["ended"]), "exit_status": r["exit_status"], "results": r["n_results"],
                     "status": effective_status(r["status"], r["host"], r["pid"], this_host),
                     "planned": r["planned"]}
                    for r in run_rows]
    plan = info["metadata"].get("plan")
    triples = [(r["suite"], r["shard"], r["status"]) for r in info["runs"]]
    info["complete"] = build_complete(triples, plan)
    info["missing_runs"] = [{"suite": suite, "shard": shard} for suite, shard in absent_runs(triples, plan)]
    return info


def completeness(info: dict) -> dict:
    """The part of a breakdown that says whether the build is whole: ``complete`` and,
    per run that did not finish, what happened to it (from ``build_info``)."""
    unfinished = [{"run": r["id"], "suite": r["suite"], "shard": r["shard"], "status": r["status"],
                   "exit_status": r["exit_status"], "results": r["results"], "planned": r["planned"]}
                  for r in info["runs"] if r["status"] not in DONE_STATES]
    unfinished += [{"run": None, "suite": m["suite"], "shard": m["shard"], "status": "not started",
                    "exit_status": None, "results": 0, "planned": None} for m in info.get("missing_runs", [])]
    return {"complete": info["complete"], "unfinished_runs": unfinished}


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


# -- breakdowns ------------------------------------------------------------------------------
def _assemble(build: str, rows) -> dict:
    return breakdown_of_counts(build, rows)


def summary(store, build: str) -> dict:
    """The seed's breakdown of a build (the shape of ``core.breakdown``)."""
    with store.read() as conn:
        build_id = store.build_id(build, conn)
        query = (select(V.outcome, V.kind, V.missing_op, func.count())
                 .select_from(_latest(build_id))
                 .group_by(V.outcome, V.kind, V.missing_op))
        rows = conn.execute(query).all()
    return {**_assemble(build, rows), **completeness(build_info(store, build))}


def summary_by(store, build: str, by: str) -> dict:
    """Breakdown per suite or per test file: {suite_or_file: breakdown}."""
    if by not in ("suite", "file"):
        raise UserError(f"cannot summarise by {by!r}; use 'suite' or 'file'")
    key = tests.c[by]
    with store.read() as conn:
        build_id = store.build_id(build, conn)
        query = (select(key, V.outcome, V.kind, V.missing_op, func.count())
                 .select_from(_latest(build_id).join(tests, tests.c.id == results.c.test_pk))
                 .group_by(key, V.outcome, V.kind, V.missing_op))
        return breakdowns_by(build, conn.execute(query))


def breakdowns_by(build: str, rows) -> dict:
    """(key, outcome, kind, missing_op, n) rows -> {key: breakdown}, keys sorted."""
    grouped = defaultdict(list)
    for k, outcome, kind, missing_op, n in rows:
        grouped[k].append((outcome, kind, missing_op, n))
    return {k: _assemble(build, grouped[k]) for k in sorted(grouped)}


def op_matrix(store, build: str, exclude_suites=()) -> list[dict]:
    """OpInfo operator x variant x dtype cells with counts per outcome (non-zero only).

    ``exclude_suites``: leave these suites' tests out (the site drops the model
    zoo, whose tests.op is a model name, not an operator)."""
    with store.read() as conn:
        build_id = store.build_id(build, conn)
        query = (select(tests.c.op, tests.c.variant, tests.c.dtype, V.outcome, V.kind, func.count())
                 .select_from(_latest(build_id).join(tests, tests.c.id == results.c.test_pk))
                 .where(tests.c.op != "")
                 .group_by(tests.c.op, tests.c.variant, tests.c.dtype, V.outcome, V.kind))
        if exclude_suites:
            query = query.where(tests.c.suite.not_in(list(exclude_suites)))
        return matrix_cells(conn.execute(query))


def matrix_cells(rows) -> list[dict]:
    """(op, variant, dtype, outcome, kind, n) rows -> op_matrix cells, sorted; rows with no op are left out."""
    cells: dict[tuple, dict] = {}
    for op, variant, dtype, outcome, kind, n in rows:
        if not op:
            continue
        cell = cells.get((op, variant, dtype))
        if cell is None:
            cell = cells[(op, variant, dtype)] = {"op": op, "variant": variant, "dtype": dtype,
                                                  "total": 0, "outcomes": {}, "backend_skip_kinds": {}}
        cell["total"] += n
        cell["outcomes"][outcome] = cell["outcomes"].get(outcome, 0) + n
        if outcome == SKIP_BACKEND:
            cell["backend_skip_kinds"][kind] = cell["backend_skip_kinds"].get(kind, 0) + n
    return [cells[k] for k in sorted(cells)]


def missing_op_leaderboard(store, build: str | None = None, census: bool = True) -> list[dict]:
    """Operators ranked by what they block in ``build`` (default: the latest build).

    ``tests``: tests blocked outside the models suite; ``models``: distinct models
    (tests.op in the models suite) blocked; ``first_build``: the earliest build in
    which the operator was ever reported missing.  When the build has a census and
    some of its models an operator set (census.models), a traced model counts for
    every operator of its full blocking set, not only the first one its run hit, an
    operator no test reached is listed too, and each entry has ``through`` (the
    composites through whose decomposition models reach it; [] when one reaches it
    directly) and ``decomposition_only``.  ``census=False``: the first hits only.
    """
    build = build or latest_build(store)
    if build is None:
        return []
    with store.read() as conn:
        build_id = store.build_id(build, conn)
        query = (select(V.missing_op, tests.c.suite, tests.c.op, func.count())
                 .select_from(_latest(build_id).join(tests, tests.c.id == results.c.test_pk))
                 .where(and_(V.outcome == SKIP_BACKEND, V.kind == MISSING_OP, V.missing_op != ""))
                 .group_by(V.missing_op, tests.c.suite, tests.c.op))
        rows = conn.execute(query).all()
    board_census = census_models(store, build) if census else None
    ops = {r[0] for r in rows} | set(board_census or ())
    with store.read() as conn:
        first = _first_builds(conn, sorted(ops)) if ops else {}
    return leaderboard(build, rows, first, board_census)


def census_rows(store, build: str) -> list | None:
    """The build's stored census (census.dispatch.Row list, by operator), None when it has none."""
    from torchconform.census import records

    return records.load(store, build)


def census_impact(store, build: str):
    """census.impact.Impact of the build without its test counts (the caller has them), None
    without a census.  The census and model tables are read by their own modules."""
    from torchconform.census import impact

    if "census" not in (store.build_row(build)["metadata"] or {}):
        return None   # no census: not worth the model query
    return impact.load_impact(store, build, tests={}, required=False)


def census_models(store, build: str) -> dict | None:
    """census.impact.op_models of the build, None without a census or a traced model: the
    leaderboard's full per-model counts."""
    from torchconform.census import impact

    found = census_impact(store, build)
    return impact.op_models(found.blocks) if found is not None and found.traced else None


def leaderboard(build: str, rows, first: dict, census: dict | None = None) -> list[dict]:
    """(missing_op, suite, op, n) rows of blocked tests -> the leaderboard; ``first``:
    op -> (first build, first seen), as ``first_missing_builds`` returns.  ``census``:
    op -> {"models", "through"} from the traced models' full blocking sets (census_models),
    added to the models whose run hit the operator first (a hit is evidence even where a
    trace missed it)."""
    board: dict[str, dict] = {}

    def entry_of(op):
        entry = board.get(op)
        if entry is None:
            entry = board[op] = {"op": op, "tests": 0, "models": 0, "model_names": set()}
        return entry

    for missing_op, suite, model, n in rows:
        entry = entry_of(missing_op)
        if suite == MODELS_SUITE:
            entry["model_names"].add(model)
        else:
            entry["tests"] += n
    for op, found in (census or {}).items():
        entry = entry_of(op)
        entry["model_names"].update(found["models"])
    for op, entry in board.items():
        entry["model_names"] = sorted(entry["model_names"])
        entry["models"] = len(entry["model_names"])
        entry["first_build"], entry["first_seen"] = first.get(op, (build, None))
        if census is not None:
            entry["through"] = list(census.get(op, {}).get("through", []))
            entry["decomposition_only"] = bool(entry["through"])
    return sorted(board.values(), key=lambda e: (-e["tests"], -e["models"], e["op"]))


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
    return {op: (name, _iso(key[0])) for op, (name, key) in first.items()}


# -- per-test -----------------------------------------------------------------------------------
# What diff compares per test (db/values.VALUE_COLUMNS positions).
_DIFF_FIELDS = ("outcome", "kind", "missing_op", "fallback_ops", "message")


def _latest_map(store, conn, build_id: int) -> dict[int, tuple]:
    """{test_pk: (outcome, kind, missing_op, fallback_ops, message)} of the build's latest
    results: read as value ids (two integers a row, latest_rows' fast path), the few
    distinct values looked up once."""
    pairs = list(_latest_rows(store, build_id, ("test_pk", "value_id"), order=False, plain_tuples=True))
    wanted = [VALUE_COLUMNS.index(c) for c in _DIFF_FIELDS]
    shown = {vid: tuple(v[i] for i in wanted) for vid, v in values_of(conn, {p[1] for p in pairs}).items()}
    return {pk: shown[vid] for pk, vid in pairs}


def _test_names(conn, pks) -> dict[int, tuple[str, str]]:
    pks = list(pks)
    names = {}
    for i in range(0, len(pks), LOOKUP_CHUNK):
        chunk = pks[i:i + LOOKUP_CHUNK]
        for pk, tid, op in conn.execute(select(tests.c.id, tests.c.test_id, tests.c.op).where(tests.c.id.in_(chunk))):
            names[pk] = (tid, op)
    return names


def _missing(outcome: str, kind: str) -> bool:
    return outcome == SKIP_BACKEND and kind == MISSING_OP


def diff(store, old_build: str, new_build: str) -> dict:
    """Compare two builds test by test (latest result per test in each).

    Categories: ``regressions`` (pass/pass_fallback -> fail/error/crash/timeout or
    skip_backend/missing_op), ``fixes`` (failing or backend-skipped -> passing),
    ``fallback_creep`` (pass -> pass_fallback), ``new_tests``, ``missing_tests``
    (in old, absent from new), ``new_missing_ops`` (missing in new, not in old),
    ``other_changes`` (any other outcome change), and ``transitions`` counting
    every (old, new) outcome pair.
    """
    with store.read() as conn:
        old_id = store.build_id(old_build, conn)
        new_id = store.build_id(new_build, conn)
        old = _latest_map(store, conn, old_id)
        new = _latest_map(store, conn, new_id)
        return diff_maps(old_build, new_build, old, new, lambda pks: _test_names(conn, pks))


def diff_maps(old_build: str, new_build: str, old: dict, new: dict, names, totals=None) -> dict:
    """``diff``'s answer from two {key: (outcome, kind, missing_op, fallback_ops, message)}
    maps of latest results; ``names(keys) -> {key: (test_id, op)}`` is asked only for
    the tests that appear in the answer (the store keys by tests.id, the site by test id).

    ``totals``: for a caller that counted the whole builds itself (the site, with
    arrays) and passes in ``old`` / ``new`` only the tests whose (outcome, kind)
    changed or that are in one build only: ``(transitions, old_missing, new_missing)``,
    the Counter of (old outcome, old kind, new outcome, new kind) over every test in
    both builds, the set of operators missing in the old build and the Counter of
    tests per operator missing in the new one.  The answer is the same as with full maps."""
    cats = {k: [] for k in ("regressions", "fixes", "fallback_creep", "new_tests", "missing_tests", "other_changes")}
    count = totals is None
    transitions = Counter() if count else totals[0]
    for pk, after in new.items():
        before = old.get(pk)
        if before is None:
            cats["new_tests"].append((pk, None, after))
            continue
        o_out, o_kind, n_out, n_kind = before[0], before[1], after[0], after[1]
        if count:
            transitions[(o_out, o_kind, n_out, n_kind)] += 1
        if o_out == n_out and o_kind == n_kind:
            continue
        if o_out in PASSED and (n_out in REGRESSED or _missing(n_out, n_kind)):
            cats["regressions"].append((pk, before, after))
        elif o_out == PASS and n_out == PASS_FALLBACK:
            cats["fallback_creep"].append((pk, before, after))
        elif (o_out in FAILED or o_out == SKIP_BACKEND) and n_out in PASSED:
            cats["fixes"].append((pk, before, after))
        else:
            cats["other_changes"].append((pk, before, after))
    if len(old) != len(new) or cats["new_tests"]:   # else both hold the same tests
        cats["missing_tests"] = [(pk, before, None) for pk, before in old.items() if pk not in new]
    if count:
        old_missing = {r[2] for r in old.values() if r[2] and r[1] == MISSING_OP and r[0] == SKIP_BACKEND}
        new_missing = Counter(r[2] for r in new.values() if r[2] and r[1] == MISSING_OP and r[0] == SKIP_BACKEND)
    else:
        old_missing, new_missing = totals[1], totals[2]
    found = names({pk for entries in cats.values() for pk, _, _ in entries})

    def entry(pk, before, after):
        tid, op = found.get(pk, ("", ""))
        e = {"test_id": tid, "op": op}
        if before is not None:
            e.update(old_outcome=before[0], old_kind=before[1], old_missing_op=before[2])
        if after is not None:
            e.update(new_outcome=after[0], new_kind=after[1], new_missing_op=after[2],
                     fallback_ops=after[3].split() if after[3] else [], message=after[4])
        return e

    out = {"old": old_build, "new": new_build}
    for cat, entries in cats.items():
        out[cat] = sorted((entry(*e) for e in entries), key=lambda e: e["test_id"])
    out["new_missing_ops"] = [{"op": op, "tests": n} for op, n in
                              sorted(new_missing.items(), key=lambda kv: (-kv[1], kv[0])) if op not in old_missing]
    labelled = Counter()
    for (o_out, o_kind, n_out, n_kind), n in transitions.items():
        labelled[(_label(o_out, o_kind), _label(n_out, n_kind))] += n
    out["transitions"] = [{"old": a, "new": b, "tests": n} for (a, b), n in sorted(labelled.items())]
    out["counts"] = {cat: len(out[cat]) for cat in (*cats, "new_missing_ops")}
    out["counts"]["common_tests"] = sum(transitions.values())
    return out


def _label(outcome: str, kind: str) -> str:
    return f"{outcome}/{kind}" if kind else outcome


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
    return [{"build": r["name"], "created": _iso(r["created"]), "branch": r["branch"], "run_id": r["run_id"],
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
            g["attempts"].append({"attempt": attempt, "outcome": _label(outcome, kind)})
    out = []
    for g in groups.values():
        outs = [a["outcome"].split("/")[0] for a in g["attempts"]]
        g["flaky"] = any(o in PASSED for o in outs) and any(o not in PASSED for o in outs)
        out.append(g)
    return out


# Columns ``latest_rows`` can return, by name: the outcome record's fields plus ``test_pk``.
ROW_COLUMNS = {
    "test_pk": results.c.test_pk,
    **{c: tests.c[c] for c in TEST_COLUMNS},
    **{c: V[c] for c in ("outcome", "kind", "missing_op", "fallback_ops", "skiplist_entry", "device",
                         "message")},
    **{c: results.c[c] for c in ("attempt", "max_abs_err", "max_rel_err")},
    "duration": DURATION,
    "repro": REPRO,
    # the stored text only (NULL: the run's repro_template rendered for the test): for a
    # reader that renders templates itself, for the rows it shows (the site)
    "stored_repro": V.repro,
    "run_id": results.c.run_id,
    # what the result says, as an id (result_values; the values: ``values_by_id``), and its own id
    "value_id": results.c.value_id,
    "result_id": results.c.id,
}
# In the dataclass's order, so a row is ``Outcome(*row)`` (after splitting fallback_ops).
OUTCOME_FIELDS = tuple(f.name for f in dataclasses.fields(Outcome))
_FALLBACK_AT = OUTCOME_FIELDS.index("fallback_ops")
ROW_CHUNK = 20_000
# latest_rows on SQLite reads a build by its id range when the range holds at most this many
# times the build's rows (results of other builds in between are skipped by the filter).
DENSE_SPAN = 2


def latest_rows(store, build: str, columns=OUTCOME_FIELDS, order: bool = False, plain: bool = False) -> Iterator:
    """The build's latest result per test as plain rows: the lean read path.

    Rows are SQLAlchemy ``Row`` tuples in ``columns`` order (also readable by
    name: ``row.outcome``); ``fallback_ops`` is the stored space-separated text.
    No ``Outcome`` validation (the store only holds validated records) and no
    sort unless ``order`` (by test id).  ``plain``: the driver's own tuples instead
    of ``Row`` objects (by position only; cheaper for the site, which reads
    millions of rows).  An unknown build raises here, before the first row,
    not when iteration starts.
    """
    unknown = [c for c in columns if c not in ROW_COLUMNS]
    if unknown:
        raise ValueError(f"latest_rows: unknown columns {unknown}; choose from {sorted(ROW_COLUMNS)}")
    build_id = store.build_id(build)
    return _latest_rows(store, build_id, columns, order, plain)


def _latest_rows(store, build_id: int, columns, order: bool, plain_tuples: bool = False) -> Iterator:
    for chunk in _latest_chunks(store, build_id, columns, order, plain_tuples):
        yield from chunk


def _latest_chunks(store, build_id: int, columns, order: bool, plain_tuples: bool = False) -> Iterator[list]:
    """``_latest_rows`` a fetch (ROW_CHUNK rows) at a time: per-row work stays in C."""
    said = [c for c in columns if getattr(ROW_COLUMNS[c], "table", None) is result_values]
    if plain_tuples and said and "repro" not in columns:
        # What results say is read as value ids and joined here, the build's few thousand
        # values read once: about a third faster than joining result_values per row in SQL.
        yield from _with_values(store, build_id, columns, said, order)
        return
    with store.read() as conn:
        # A build in which no test has a second result (no rerun, no overlapping shards;
        # the usual case) needs no "latest per test" subquery: every result is the latest,
        # and the plain index scan is about twice as fast.  SQLite only, where both
        # statements read the same snapshot (one read transaction); elsewhere always
        # the subquery, so a result stored in between cannot slip in.
        no_reruns, span = False, None
        if conn.dialect.name == "sqlite":
            n, distinct, low, high = conn.execute(
                select(func.count(), func.count(results.c.test_pk.distinct()), func.min(results.c.id),
                       func.max(results.c.id)).where(results.c.build_id == build_id)).one()
            no_reruns = n == distinct
            # A build's results are usually stored together, so their ids form one dense
            # range: reading that range of the table in rowid order is about twice as fast
            # as the build's index entries with one table lookup each (bench/gate.py,
            # bench/site.py).  Kept to ranges at most DENSE_SPAN times the build's rows.
            if no_reruns and n and high - low + 1 <= DENSE_SPAN * n:
                span = (low, high)
        # The values, tests (and runs) joins are only paid for when a column needs them.
        with_repro = "repro" in columns
        with_values = with_repro or any(getattr(ROW_COLUMNS[c], "table", None) is result_values for c in columns)
        source = (JOINED if with_values else results) if no_reruns else _latest(build_id)
        if order or with_repro or any(getattr(ROW_COLUMNS[c], "table", None) is tests for c in columns):
            source = source.join(tests, tests.c.id == results.c.test_pk)
        if with_repro:
            source = source.join(runs, runs.c.id == results.c.run_id)
        query = select(*(ROW_COLUMNS[c].label(c) for c in columns)).select_from(source)
        if span is not None:
            # "+ 0" keeps SQLite's planner off the build_id index, onto the rowid range
            query = query.where(results.c.id.between(*span), results.c.build_id + 0 == build_id)
        elif no_reruns:
            query = query.where(results.c.build_id == build_id)
        if order:
            query = query.order_by(tests.c.test_id)
        # ROW_COLUMNS are integers, text and floats: the drivers' own values, no result processor
        yield from _chunks(conn.execute(query), plain_tuples)


def _with_values(store, build_id: int, columns, said: list[str], order: bool) -> Iterator:
    """``_latest_chunks`` of ``columns`` as plain tuples, the ``said`` ones (result_values
    columns) filled from the values by id."""
    rest = [c for c in columns if c not in said]
    with store.read() as conn:
        ids = conn.execute(select(build_values.c.value_id).where(build_values.c.build_id == build_id)).scalars()
        at = [VALUE_COLUMNS.index("repro" if c == "stored_repro" else c) for c in said]
        values = {vid: tuple(v[i] for i in at) for vid, v in values_of(conn, ids).items()}
    # a row of ``rest`` + value_id, then the value's fields: pick ``columns`` out of that
    width = len(rest) + 1
    pick = itemgetter(*(rest.index(c) if c in rest else width + said.index(c) for c in columns))
    if len(columns) == 1:
        single = pick
        pick = lambda row: (single(row),)   # noqa: E731  (itemgetter of one index gives a bare value)
    for chunk in _latest_chunks(store, build_id, (*rest, "value_id"), order, plain_tuples=True):
        unknown = {row[-1] for row in chunk} - values.keys()
        if unknown:   # values a writer stored after build_values was read
            with store.read() as conn:
                values.update((vid, tuple(v[i] for i in at)) for vid, v in values_of(conn, unknown).items())
        yield [pick(row + values[row[-1]]) for row in chunk]


def values_by_id(store, ids) -> dict[int, tuple]:
    """{value id: (outcome, kind, missing_op, fallback_ops, skiplist_entry, device, message,
    stored repro)} of ``latest_rows``' ``value_id`` column: a reader that groups results by
    what they say reads each value once (db/values.py)."""
    with store.read() as conn:
        return values_of(conn, ids)


def results_by_id(store, result_ids, columns=OUTCOME_FIELDS) -> dict[int, tuple]:
    """{result id (``latest_rows``' ``result_id``): row of ``columns``} for those results,
    read in batches: a reader that needs every field of a few thousand results only."""
    unknown = [c for c in columns if c not in ROW_COLUMNS]
    if unknown:
        raise ValueError(f"results_by_id: unknown columns {unknown}; choose from {sorted(ROW_COLUMNS)}")
    ids = sorted(set(result_ids))
    source = JOINED.join(tests, tests.c.id == results.c.test_pk).join(runs, runs.c.id == results.c.run_id)
    out = {}
    with store.read() as conn:
        for i in range(0, len(ids), LOOKUP_CHUNK):
            query = (select(results.c.id, *(ROW_COLUMNS[c].label(c) for c in columns)).select_from(source)
                     .where(results.c.id.in_(ids[i:i + LOOKUP_CHUNK])))
            for rid, *row in conn.execute(query).all():
                out[rid] = tuple(row)
    return out


def repro_templates(store, build: str) -> dict[int, str]:
    """{run id: its repro_template ("" when it has none)} of the build's runs."""
    with store.read() as conn:
        rows = conn.execute(select(runs.c.id, runs.c.repro_template)
                            .where(runs.c.build_id == store.build_id(build, conn=conn))).all()
    return {run_id: template or "" for run_id, template in rows}


def stored_tests(store, columns=TEST_COLUMNS) -> Iterator:
    """Every stored test as ``(test_pk, *columns)`` plain tuples (``columns`` from the
    tests table's TEST_COLUMNS), unordered: for a reader
    (the site) that joins ``latest_rows``' result-only rows (with ``test_pk``) to their
    tests itself, once for many builds, instead of once per build in SQL."""
    unknown = [c for c in columns if c not in TEST_COLUMNS]
    if unknown:
        raise ValueError(f"stored_tests: unknown columns {unknown}; choose from {list(TEST_COLUMNS)}")
    return _rows(store, select(tests.c.id, *(tests.c[c] for c in columns)), plain=True)


def suite_tests(store, suite: str) -> list[str]:
    """Test ids of every stored test of ``suite`` (any build)."""
    with store.read() as conn:
        return conn.execute(select(tests.c.test_id).where(tests.c.suite == suite)).scalars().all()


def _rows(store, query, plain: bool = False) -> Iterator:
    with store.read() as conn:
        yield from _fetch(conn.execute(query), plain)


def _fetch(result, plain: bool) -> Iterator:
    """A result's rows, ROW_CHUNK at a time; ``plain``: the driver's own tuples (cheaper
    than SQLAlchemy's ``Row`` objects, by position only)."""
    for chunk in _chunks(result, plain):
        yield from chunk


def _chunks(result, plain: bool) -> Iterator[list]:
    """``_fetch``'s rows as the lists fetchmany returns."""
    fetch = result.cursor.fetchmany if plain else result.fetchmany
    while True:
        chunk = fetch(ROW_CHUNK)
        if not chunk:
            return
        yield chunk


def iter_outcomes(store, build: str) -> Iterator[Outcome]:
    """The build's outcome records (latest per test), in test id order.

    Built on ``latest_rows``.  Readers that do not need validated ``Outcome`` objects
    should use ``latest_rows`` directly: it is about a third cheaper."""
    at = _FALLBACK_AT
    for row in latest_rows(store, build, OUTCOME_FIELDS, order=True):
        yield Outcome(*row[:at], row[at].split() if row[at] else [], *row[at + 1:])


# -- for the nightly sweep (resume and scheduling) ------------------------------------------
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
