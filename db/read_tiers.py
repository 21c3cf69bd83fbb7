"""Reading a build's tolerance tiers: the counts per tier and the near misses
(core/tiers.py shapes them; docs/classification.md, "Tolerance tiers").

The tier is part of what a result says (``result_values.tier``): the build's values that
carry one are few (``build_values``), so the counts are its latest results' value ids
counted against those (read_rows' lean path, no join per row), and the near misses
(failures in the loose tier) are read with their tests and stored errors by result id.
A build whose values carry no tier costs one small query.
"""
from __future__ import annotations

from collections import Counter
from operator import itemgetter

from sqlalchemy import select

from torchconform.core import tiers
from torchconform.core.outcome import TIERS
from torchconform.db import read_rows
from torchconform.db.models import build_values, result_values

V = result_values.c
_NEAR_COLUMNS = ("test_id", "op", "dtype", "kind", "max_abs_err", "max_rel_err")


def tiered_values(store, build_id: int) -> dict[int, tuple[str, str]]:
    """{value id: (outcome, tier)} of the build's values that carry a tier (few: one query)."""
    with store.read() as conn:
        return {vid: (outcome, tier) for vid, outcome, tier in conn.execute(
            select(V.id, V.outcome, V.tier)
            .select_from(build_values.join(result_values, V.id == build_values.c.value_id))
            .where(build_values.c.build_id == build_id, V.tier != ""))}


def build_tiers(store, build: str) -> tuple[dict, list[dict]]:
    """({tier: count}, every near miss, closest first) of a build's latest results."""
    build_id = store.build_id(build)
    tiered = tiered_values(store, build_id)
    if not tiered:
        return dict.fromkeys(TIERS, 0), []
    rows = list(read_rows.latest_rows_by_id(store, build_id, ("value_id", "result_id"), False, True))
    per_value = Counter(map(itemgetter(0), rows))
    near_ids = [rid for vid, rid in rows if vid in tiered and tiers.is_near_miss(*tiered[vid])]
    counts = tiers.tier_counts((*tiered[vid], n) for vid, n in per_value.items() if vid in tiered)
    found = read_rows.results_by_id(store, near_ids, _NEAR_COLUMNS).values() if near_ids else ()
    return counts, tiers.closest_first([tiers.near_miss(*row) for row in found], limit=len(near_ids))


def with_build_tiers(store, build: str, b: dict) -> dict:
    """The breakdown ``b`` of a stored build with its tiers (core/tiers.with_tiers)."""
    counts, misses = build_tiers(store, build)
    return tiers.with_tiers(b, counts, misses)
