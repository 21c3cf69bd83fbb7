"""The seed's breakdown of one build, computed from outcome records.

``torchconform run --json``, ``torchconform summary --json`` and the gate all
speak this one shape, so it is defined once here:

    {"build": str, "total": int,
     "outcomes": {outcome: count},            # every outcome key present, zeros included
     "pass_kinds": {"native": int, "fallback": int, "host_only": int},   # pass + pass_fallback, split
     "backend_skip_kinds": {kind: count},     # every kind key present
     "fail_kinds": {kind: count},             # fails with a kind (trait:<name>), only those present
     "missing_ops": [{"op": str, "tests": int}, ...]}   # most tests blocked first, then by name

and, where the reader knows tolerance tiers (``run``, ``summary``, the site), ``"tiers"`` and
``"near_misses"`` (core/tiers.py); where it knows what the selection left out, ``"not_run"``
(core/not_run.py: never results, only the denominator's other side).

A stored build's breakdown (``summary``) and a run's (``run``) also say whether
the build is whole: ``"complete": bool`` and ``"unfinished_runs": [{run, suite,
shard, status, exit_status, results, planned}]`` (db/shapes.py: completeness).

``pass_kinds`` splits the passes by what they say about the device: ``native``
(``pass`` that ran on it), ``fallback`` (``pass_fallback``), ``host_only`` (``pass``
of kind host_only: the test never touched the device).  ``pass_rate`` leaves
host_only passes out of both its numerator and its denominator.

``fail_kinds`` counts the ``fail`` outcomes with a kind: those a declared trait explains
(``trait:<name>``, collectors/traitfail.py) and strict mode's ``fallback_forbidden``
(``run --no-fallback``, collectors/strict.py); they stay inside ``outcomes["fail"]``.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from torchconform.core.outcome import (
    BACKEND_SKIP_KINDS, CRASH, DISTRIBUTED_SKIP_KINDS, ERROR, FAIL, FALLBACK_FORBIDDEN, HOST_ONLY, MISSING_OP,
    OUTCOMES, PASS,
    PASS_FALLBACK,
    SKIP_BACKEND, SKIP_ELIGIBILITY, TIMEOUT, TRAIT_KIND_PREFIX, XFAIL, XPASS, Outcome,
)
from torchconform.core import not_run, tiers
from torchconform.procs import describe_exit


def make_breakdown(build: str, outcome_counts: dict, kind_counts: dict, missing_op_counts: dict,
                   host_only: int = 0, fail_kinds: dict | None = None) -> dict:
    """Assemble the breakdown from counts (the store's SQL path calls this too).
    ``kind_counts``: skip_backend results per kind; ``host_only``: pass results of kind host_only;
    ``fail_kinds``: fail results per (non-empty) kind."""
    missing = sorted(missing_op_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    outcomes = {o: int(outcome_counts.get(o, 0)) for o in OUTCOMES}
    return {
        "build": build,
        "total": int(sum(outcome_counts.values())),
        "outcomes": outcomes,
        "pass_kinds": {"native": outcomes[PASS] - int(host_only), "fallback": outcomes[PASS_FALLBACK],
                       "host_only": int(host_only)},
        "backend_skip_kinds": {k: int(kind_counts.get(k, 0)) for k in BACKEND_SKIP_KINDS},
        "missing_ops": [{"op": op, "tests": int(n)} for op, n in missing],
        "fail_kinds": {k: int(n) for k, n in sorted((fail_kinds or {}).items()) if n},
        # Whole unless a reader of the store (or the runner) knows otherwise.
        "complete": True,
        "unfinished_runs": [],
    }


def breakdown(build: str, outcomes: Iterable[Outcome]) -> dict:
    outcomes = list(outcomes)
    b = breakdown_of_counts(build, ((o.outcome, o.kind, o.missing_op, 1) for o in outcomes))
    return tiers.of_outcomes(b, outcomes)   # "tiers", "near_misses" (core/tiers.py)


def breakdown_of_counts(build: str, rows) -> dict:
    """The breakdown of (outcome, kind, missing_op, n) rows: the one counting rule of every
    reader (records, the store's grouped rows, the gate's record maps)."""
    outcome_counts, kind_counts, missing, fail_kinds = Counter(), Counter(), Counter(), Counter()
    host_only = 0
    for outcome, kind, missing_op, n in rows:
        outcome_counts[outcome] += n
        if outcome == SKIP_BACKEND:
            kind_counts[kind] += n
            if kind == MISSING_OP and missing_op:
                missing[missing_op] += n
        elif kind == HOST_ONLY:
            host_only += n
        elif outcome == FAIL and kind:
            fail_kinds[kind] += n
    return make_breakdown(build, outcome_counts, kind_counts, missing, host_only, fail_kinds)


def pass_rate(b: dict) -> float | None:
    """Passes over the tests that ran on the device, as a fraction (None: none did).
    Eligibility skips are out (PyTorch's rules, not the backend's), and so are
    host_only passes, from both sides: a test that never touched the device says
    nothing about it, and counting it would raise every rate for free."""
    o, k = b["outcomes"], b["pass_kinds"]
    ran = b["total"] - o[SKIP_ELIGIBILITY] - k["host_only"]
    if ran <= 0:
        return None
    return (k["native"] + k["fallback"]) / ran


def format_breakdown(b: dict, top: int = 10) -> str:
    """Human-readable breakdown, in the words of the seed article."""
    o, k = b["outcomes"], b["pass_kinds"]
    passed = o[PASS] + o[PASS_FALLBACK]
    failed = o[FAIL] + o[ERROR] + o[CRASH] + o[TIMEOUT]
    backend = o[SKIP_BACKEND]
    skipped = o[SKIP_ELIGIBILITY] + backend
    lines = [
        f"build {b['build']}: {b['total']} outcomes",
        *incomplete_lines(b),
        *not_run.lines(b),
        f"  passed   {passed:>8}   (natively {k['native']}, through CPU fallback {k['fallback']}, "
        f"without touching the device {k['host_only']})",
        f"  failed   {failed:>8}   (fail {o[FAIL]}, error {o[ERROR]}, crash {o[CRASH]}, timeout {o[TIMEOUT]})"
        + explained_clause(b) + forbidden_clause(b),
        *tiers.tier_lines(b, top),
        f"  skipped  {skipped:>8}",
        f"    PyTorch eligibility  {o[SKIP_ELIGIBILITY]:>8}",
        f"    backend-specific     {backend:>8}",
    ]
    for kind in BACKEND_SKIP_KINDS:
        # the distributed suite's kinds only where it met them: most builds have none
        if kind in DISTRIBUTED_SKIP_KINDS and not b["backend_skip_kinds"][kind]:
            continue
        lines.append(f"      {kind:<20} {b['backend_skip_kinds'][kind]:>6}")
    lines.append(f"  expected failures {o[XFAIL]}, unexpected passes {o[XPASS]}")
    if b["missing_ops"]:
        lines.append("  top missing operators (tests blocked):")
        for row in b["missing_ops"][:top]:
            lines.append(f"    {row['tests']:>7}  {row['op']}")
    return "\n".join(lines)


def explained_clause(b: dict) -> str:
    """", of which explained by declared traits M (trait:x M)" after the failed count; nothing
    when no failure is (so breakdowns without trait-explained failures read as before)."""
    kinds = {k: n for k, n in (b.get("fail_kinds") or {}).items() if k.startswith(TRAIT_KIND_PREFIX)}
    explained = sum(kinds.values())
    if not explained:
        return ""
    return f", of which explained by declared traits {explained} (" + \
        ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + ")"


def forbidden_clause(b: dict) -> str:
    """", of which fallback forbidden (strict mode) N": the fails of kind fallback_forbidden
    (run --no-fallback), counted apart; nothing when there are none."""
    n = (b.get("fail_kinds") or {}).get(FALLBACK_FORBIDDEN, 0)
    return f", of which fallback forbidden (strict mode) {n}" if n else ""


def incomplete_lines(b: dict) -> list[str]:
    """The warning an incomplete build's breakdown starts with (nothing for a whole one)."""
    if b.get("complete", True):
        return []
    lines = ["  INCOMPLETE: some runs did not finish; the counts below are partial and the build is "
             "never a baseline"]
    for r in b.get("unfinished_runs", []):
        where = r["suite"] + (f" shard {r['shard']}" if r.get("shard") else "")
        how = {"running": "still running, or killed on another host",
               "lost": "its process is gone (killed)", "not started": "planned, not run yet"}.get(r["status"], f"{r['status']}, {describe_exit(r['exit_status'])}")
        got = f"{r['results']} of {r['planned']} planned tests" if r.get("planned") else f"{r['results']} tests"
        label = f"run {r['run']}" if r.get("run") is not None else ("this run" if r["status"] != "not started"
                                                                     else "a planned run")
        lines.append(f"    {label} ({where}): {how}; {got} recorded")
    return lines
