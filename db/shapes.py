"""Shaping the store's answers: pure functions over rows the readers fetched, no
database access (the site computes the same rows from its arrays and shapes them here,
so both answers are the same by construction).

Builds and their completeness, breakdowns per key, the missing-operator leaderboard and
the test-by-test diff of two builds (the OpInfo matrix's cells are counted and drawn from
the arrays alone: db/arrays.py, dashboard/pages/matrix.py).
"""
from __future__ import annotations

from collections import Counter, defaultdict

from torchconform.core.breakdown import breakdown_of_counts
from torchconform.core.outcome import (
    CRASH, ERROR, FAIL, FAILED, MISSING_OP, PASS, PASS_FALLBACK, PASSED, SKIP_BACKEND, TIMEOUT,
)
from torchconform.db.models import DONE_STATES

# What counts as a regression from a passing baseline (the gate's default rule).
REGRESSED = frozenset({FAIL, ERROR, CRASH, TIMEOUT})
MODELS_SUITE = "models"
DISTRIBUTED_SUITE = "distributed"


def iso(value) -> str | None:
    """A stored (naive UTC) time as ISO text with a ``Z``; None stays None."""
    return value.isoformat(timespec="seconds") + "Z" if value is not None else None


def build_dict(row, run_stats: dict | None = None) -> dict:
    """A ``builds`` row (as a mapping) as the readers answer it, with ``run_stats`` added."""
    d = {
        "name": row["name"],
        "created": iso(row["created"]),
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


def completeness(info: dict) -> dict:
    """The part of a breakdown that says whether the build is whole: ``complete`` and,
    per run that did not finish, what happened to it (from ``build_info``)."""
    unfinished = [{"run": r["id"], "suite": r["suite"], "shard": r["shard"], "status": r["status"],
                   "exit_status": r["exit_status"], "results": r["results"], "planned": r["planned"]}
                  for r in info["runs"] if r["status"] not in DONE_STATES]
    unfinished += [{"run": None, "suite": m["suite"], "shard": m["shard"], "status": "not started",
                    "exit_status": None, "results": 0, "planned": None} for m in info.get("missing_runs", [])]
    return {"complete": info["complete"], "unfinished_runs": unfinished}


def breakdowns_by(build: str, rows) -> dict:
    """(key, outcome, kind, missing_op, n) rows -> {key: breakdown}, keys sorted."""
    grouped = defaultdict(list)
    for k, outcome, kind, missing_op, n in rows:
        grouped[k].append((outcome, kind, missing_op, n))
    return {k: breakdown_of_counts(build, grouped[k]) for k in sorted(grouped)}


def leaderboard(build: str, rows, first: dict, census: dict | None = None) -> list[dict]:
    """(missing_op, suite, op, n) rows of blocked tests -> the leaderboard; ``first``:
    op -> (first build, first seen), as ``first_missing_builds`` returns.  ``census``:
    op -> {"models", "through"} from the traced models' full blocking sets (census.impact.census_models),
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


def _missing(outcome: str, kind: str) -> bool:
    return outcome == SKIP_BACKEND and kind == MISSING_OP


def diff_maps(old_build: str, new_build: str, old: dict, new: dict, names, totals) -> dict:
    """``diff``'s answer from two {key: (outcome, kind, missing_op, fallback_ops, message)}
    maps of the tests whose (outcome, kind) changed or that are in one build only;
    ``names(keys) -> {key: (test_id, op)}`` is asked only for the tests that appear in
    the answer.  The caller (db/arrays.py ``diff``, over the builds' arrays)
    counted the whole builds: ``totals`` is ``(transitions, old_missing, new_missing)``,
    the Counter of (old outcome, old kind, new outcome, new kind) over every test in
    both builds, the set of operators missing in the old build and the Counter of
    tests per operator missing in the new one."""
    cats = {k: [] for k in ("regressions", "fixes", "fallback_creep", "new_tests", "missing_tests", "other_changes")}
    transitions, old_missing, new_missing = totals
    for pk, after in new.items():
        before = old.get(pk)
        if before is None:
            cats["new_tests"].append((pk, None, after))
            continue
        o_out, o_kind, n_out, n_kind = before[0], before[1], after[0], after[1]
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
        labelled[(label(o_out, o_kind), label(n_out, n_kind))] += n
    out["transitions"] = [{"old": a, "new": b, "tests": n} for (a, b), n in sorted(labelled.items())]
    out["counts"] = {cat: len(out[cat]) for cat in (*cats, "new_missing_ops")}
    out["counts"]["common_tests"] = sum(transitions.values())
    return out


def label(outcome: str, kind: str) -> str:
    """An outcome with its kind, as diffs and flaky attempts show it."""
    return f"{outcome}/{kind}" if kind else outcome
