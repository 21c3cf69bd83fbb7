"""Tolerance tiers in a build's breakdown: how many passes were exact and how many only
within PyTorch's tolerance, and the near misses (failures in the loose tier), counted apart
and listed with their distance (docs/classification.md, "Tolerance tiers").

The breakdown (core/breakdown.py) carries, where its reader knows the tiers and any result
has one:

    "tiers": {"exact": int, "default": int, "loose": int, "beyond": int},
    "near_misses": [{"test_id", "op", "dtype", "kind", "max_abs_err", "max_rel_err",
                     "distance"}, ...]    # closest first, at most NEAR_MISS_LIMIT

``exact`` and ``default`` count passes (pass, pass_fallback); ``loose`` and ``beyond`` count
failures (fail, error, crash, timeout).  A record of another outcome (an expected failure,
an unexpected pass) keeps its tier but is counted in neither.  ``distance`` is
``numeric.distance``: the stored errors over PyTorch's default tolerance for the dtype (None
when the dtype has none or the errors were not recorded).
"""
from __future__ import annotations

import math

from torchconform.core.numeric import BEYOND, DEFAULT, EXACT, LOOSE, LOOSE_FACTOR, distance
from torchconform.core.outcome import FAILED, PASSED, TIERS

NEAR_MISS_LIMIT = 100
# Where a tier is counted: passes for the tiers a pass can meet, failures for the others.
_COUNTED = {EXACT: PASSED, DEFAULT: PASSED, LOOSE: FAILED, BEYOND: FAILED}


def tier_counts(rows) -> dict:
    """{tier: count} of (outcome, tier, n) rows, every tier key present."""
    counts = dict.fromkeys(TIERS, 0)
    for outcome, tier, n in rows:
        if tier in _COUNTED and outcome in _COUNTED[tier]:
            counts[tier] += int(n)
    return counts


def is_near_miss(outcome: str, tier: str) -> bool:
    return tier == LOOSE and outcome in FAILED


def near_miss(test_id: str, op: str, dtype: str, kind: str, max_abs_err, max_rel_err) -> dict:
    """One near miss as the breakdown lists it."""
    return {"test_id": test_id, "op": op or "", "dtype": dtype or "", "kind": kind or "",
            "max_abs_err": max_abs_err, "max_rel_err": max_rel_err,
            "distance": distance(dtype, max_abs_err, max_rel_err)}


def closest_first(misses: list[dict], limit: int = NEAR_MISS_LIMIT) -> list[dict]:
    """Near misses closest to the tolerance first (unknown distances last), then by test id."""
    return sorted(misses, key=lambda m: (m["distance"] is None, m["distance"] or 0.0, m["test_id"]))[:limit]


def with_tiers(b: dict, counts: dict, misses: list[dict]) -> dict:
    """The breakdown ``b`` with its tier counts and near misses (``misses``: every near miss,
    or at least the closest NEAR_MISS_LIMIT); ``b`` as it was when no result has a tier (a
    build without comparisons keeps the shape it always had, as the traits keys do)."""
    if not any(counts.get(t, 0) for t in TIERS) and not misses:
        return b
    b["tiers"] = {t: int(counts.get(t, 0)) for t in TIERS}
    b["near_misses"] = closest_first(misses)
    return b


def of_outcomes(b: dict, outcomes) -> dict:
    """``with_tiers`` from outcome records."""
    rows, misses = [], []
    for o in outcomes:
        if not o.tier:
            continue
        rows.append((o.outcome, o.tier, 1))
        if is_near_miss(o.outcome, o.tier):
            misses.append(near_miss(o.test_id, o.op, o.dtype, o.kind, o.max_abs_err, o.max_rel_err))
    return with_tiers(b, tier_counts(rows), misses)


def format_distance(m: dict) -> str:
    """A near miss's distance as text: ``<= 4.2x default tolerance`` (an upper bound:
    ``numeric.distance``), or its errors when unknown."""
    d = m.get("distance")
    if d is not None and math.isfinite(d):
        return f"<= {d:.3g}x default tolerance"
    if m.get("max_abs_err") is None:
        return "distance unknown"
    return f"max abs err {m['max_abs_err']:.3g}, max rel err {(m.get('max_rel_err') or 0.0):.3g}"


def tier_lines(b: dict, top: int = 10) -> list[str]:
    """The breakdown's tier lines: nothing when no result has a tier."""
    t = b.get("tiers")
    if not t or not any(t.values()):
        return []
    lines = ["  tolerance tiers",
             f"    passed: exact {t[EXACT]}, within PyTorch tolerance {t[DEFAULT]}",
             f"    failed: near misses (within {LOOSE_FACTOR:g}x the tolerance each comparison was held to) "
             f"{t[LOOSE]}, further off {t[BEYOND]}"]
    for m in (b.get("near_misses") or [])[:top]:
        where = " ".join(x for x in (m["op"], m["dtype"]) if x)
        lines.append(f"      {m['test_id']}" + (f" ({where})" if where else "") + f": {format_distance(m)}")
    return lines

