"""The gate's ``perf_regression`` rule's input: the perf timings of the two builds compared.

ci/pipeline.py evaluates the rules inside torchconform.gated.gate_context; the rule
(ci/rules.rule_perf_regression) asks :func:`perf_findings` for the regressions, judged by
torchconform/core/perf.py (device/CPU ratio of the warm minimums, same run, threshold, floor);
a compiled timing is compared only with the same operator compiled in the baseline.
"""
from __future__ import annotations

from torchconform.core.perf import EAGER
from torchconform.gated import gated_builds
from torchconform.db import perf as perf_db


def _what(c: dict) -> str:
    """The direction, and the variant where it is not eager ("forward compiled")."""
    return c["direction"] + ("" if c.get("variant", EAGER) == EAGER else f" {c['variant']}")

def perf_findings(threshold: float, floor_s: float, max_spread: float) -> tuple[list[dict] | None, str]:
    """(findings, detail); findings None: nothing to compare (the rule passes quietly)."""
    current = gated_builds()
    if current is None:
        return None, "no perf results to compare"
    store, baseline, build = current
    if not perf_db.has_rows(store, build) or not perf_db.has_rows(store, baseline):
        return None, "no perf results to compare"
    changes = perf_db.compare(store, build, baseline, threshold, floor_s, max_spread=max_spread)
    found = [{"op": c["op"], "dtype": c["dtype"], "direction": c["direction"], "variant": c["variant"],
              "old": f"device/CPU {c['old_ratio']:.3g}x", "new": f"device/CPU {c['new_ratio']:.3g}x",
              "message": f"{_what(c)} device/CPU {c['old_ratio']:.3g}x -> {c['new_ratio']:.3g}x "
                         f"({c['change']:.3g}x)", "change": c["change"], "old_ratio": c["old_ratio"],
              "new_ratio": c["new_ratio"], "new_dev_min": c["new_dev_min"]}
             for c in changes if c["verdict"] == "regression"]
    judged = sum(c["verdict"] not in ("below floor", "noisy") for c in changes)
    noisy = sum(c["verdict"] == "noisy" for c in changes)
    detail = (f"{len(found)} of {judged} judged operator timings slowed over {threshold:g}x relative to CPU"
              + (f" ({noisy} too noisy to judge)" if noisy else ""))
    if found:
        detail += ": " + "; ".join(f"{f['op']} {f['dtype']} {_what(f)} {f['change']:.3g}x" for f in found[:5])
    return found, detail
