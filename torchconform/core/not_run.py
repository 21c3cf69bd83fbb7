"""Not-run accounting: the tests a run's selection left out, counted per reason, so a
build's denominator is always visible (docs/classification.md, "Not run").

A run's tally (collectors/not_run.py) is ``{reason: {"count": int, "detail": str,
"example": str}}``; ``detail`` says what selected (the selection's name, the ``-k``
expression, the ``--ops`` list, the spec file), ``example`` is one test id left out (empty
where the test was never instantiated: the ops suite's selection leaves most OpInfo x dtype
pairs out before pytest sees them, and says how many).

The breakdown (core/breakdown.py) carries, where its reader knows them:

    "not_run": {"total": int, "reasons": {reason: {"count": int, "detail": str}}}

Not-run tests are never results: no outcome, no pass rate, no gate rule counts them; they
are the denominator's other side only.  A build's count adds its suites and, within a suite,
takes each reason's largest count over its runs: shards of one build each collect the same
tests and leave out the same ones (a shard's own split is not counted: those tests run in
another shard).
"""
from __future__ import annotations

SELECTION = "selection"
OPS = "--ops"
KEYWORD = "-k"
MARK = "-m"
SPEC = "spec"
DESELECT = "--deselect"
OTHER = "other"
# the order the breakdown lists them in
REASONS = (SELECTION, OPS, KEYWORD, MARK, SPEC, DESELECT, OTHER)


def add(tally: dict, reason: str, count: int, detail: str = "", example: str = "") -> dict:
    """Count ``count`` more tests left out for ``reason`` in ``tally`` (a run's, in place)."""
    if count <= 0:
        return tally
    entry = tally.setdefault(reason, {"count": 0, "detail": "", "example": ""})
    entry["count"] += int(count)
    entry["detail"] = entry["detail"] or (detail or "")
    entry["example"] = entry["example"] or (example or "")
    return tally


def merged(tallies) -> dict:
    """One tally of ``tallies`` of the same tests (the processes of one run that collected,
    or runs of one suite): each reason's largest count, not a sum."""
    out: dict = {}
    for tally in tallies:
        for reason, entry in (tally or {}).items():
            have = out.get(reason)
            if have is None or int(entry.get("count", 0)) > have["count"]:
                out[reason] = {"count": int(entry.get("count", 0)), "detail": entry.get("detail", "") or "",
                               "example": entry.get("example", "") or ""}
    return out


def of_build(rows) -> dict:
    """The breakdown's ``not_run`` from (suite, run, reason, count, detail) rows of a build's
    runs: per suite the largest count of each reason over its runs, then summed over suites."""
    per_suite: dict = {}
    for suite, run, reason, count, detail in rows:
        per_suite.setdefault(suite, {}).setdefault(run, {})[reason] = {"count": int(count), "detail": detail or ""}
    reasons: dict = {}
    for runs in per_suite.values():
        for reason, entry in merged(runs.values()).items():
            have = reasons.setdefault(reason, {"count": 0, "detail": entry["detail"]})
            have["count"] += entry["count"]
            if entry["detail"] and entry["detail"] not in have["detail"].split("; "):
                have["detail"] = "; ".join(d for d in (have["detail"], entry["detail"]) if d)
    return shaped(reasons)


def shaped(reasons: dict) -> dict:
    """``{"total", "reasons"}`` with the reasons in :data:`REASONS` order (unknown ones last)."""
    order = {r: i for i, r in enumerate(REASONS)}
    ordered = sorted(reasons.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
    out = {reason: {"count": int(e["count"]), "detail": e.get("detail", "") or ""} for reason, e in ordered
           if int(e["count"]) > 0}
    return {"total": sum(e["count"] for e in out.values()), "reasons": out}


def of_run(tally: dict | None) -> dict:
    """The breakdown's ``not_run`` of one run's tally."""
    return shaped(tally or {})


def lines(b: dict) -> list[str]:
    """``  not run   26841   (selection 26802 [quick], -k 39 [compare_cpu_grad])``: nothing
    when the reader does not know (no ``not_run`` key) or nothing was left out."""
    nr = b.get("not_run") or {}
    if not nr.get("total"):
        return []
    parts = []
    for reason, e in nr["reasons"].items():
        detail = e.get("detail", "")
        if len(detail) > 60:
            detail = detail[:57] + "..."
        parts.append(f"{reason} {e['count']}" + (f" [{detail}]" if detail else ""))
    return [f"  not run  {nr['total']:>8}   ({', '.join(parts)})"]
