"""A build's tolerance tiers on its build page (docs/classification.md, "Tolerance tiers";
docs/site.md): the counts per tier and the near misses (failures within the loose tier)
with their test, operator, dtype and distance, as tables with JSON/CSV downloads.

Counted from the build's rows the site already read (their value ids, against the build's
few values that carry a tier: db/read_tiers.tiered_values); a build
whose results carry no tier gets neither table.  Every name a test or the store supplied is
escaped: the table macro escapes cells (jinja2 autoescape).
"""
from __future__ import annotations

from collections import Counter

from torchconform.core import tiers
from torchconform.core.outcome import TIERS
from torchconform.dashboard.tables import Table
from torchconform.db.read_tiers import tiered_values

# What each tier counts, as the table says it.
_MEANING = {"exact": "passed, bitwise equal to the reference", "default": "passed within PyTorch's tolerance",
            "loose": "failed within 10x the tolerance each comparison was held to: near misses", "beyond": "failed further off"}


def read(store, data) -> dict | None:
    """{"tiers": counts, "near_misses": [...]} of a build already read (arrays.BuildData:
    its rows' value ids, counted against the build's tiered values); None when no result
    has a tier."""
    tiered = tiered_values(store, store.build_id(data.name))
    if not tiered:
        return None
    vids = data.rows.value_ids()
    counts = tiers.tier_counts((*tiered[v], n) for v, n in Counter(vids).items() if v in tiered)
    at = [i for i, v in enumerate(vids) if v in tiered and tiers.is_near_miss(*tiered[v])]
    tests = data.tests.values
    misses = [tiers.near_miss(tests["test_id"][pk], tests["op"][pk], tests["dtype"][pk], kind, abs_err, rel_err)
              for pk, kind, abs_err, rel_err in zip(*(data.rows.column(c, at) for c in
                                                      ("test_pk", "kind", "max_abs_err", "max_rel_err")))]
    return tiers.with_tiers({}, counts, misses) or None


def tables(base: str, found: dict | None) -> list[Table]:
    """The build page's two tables (none without tiers)."""
    if not found:
        return []
    counts = Table(base + "tiers", ["tier", "tests", "meaning"], title="Tolerance tiers")
    counts.rows = [[t, found["tiers"][t], _MEANING[t]] for t in TIERS]
    near = Table(base + "near-misses", ["test", "op", "dtype", "distance", "max abs err", "max rel err", "kind"],
                 title=f"Near misses ({found['tiers']['loose']}, closest first"
                       + (f"; the {tiers.NEAR_MISS_LIMIT} closest" if found["tiers"]["loose"] > tiers.NEAR_MISS_LIMIT
                          else "") + ")")
    near.rows = [[m["test_id"], m["op"], m["dtype"], tiers.format_distance(m), m["max_abs_err"], m["max_rel_err"],
                  m["kind"]] for m in found["near_misses"]]
    return [counts, near]
