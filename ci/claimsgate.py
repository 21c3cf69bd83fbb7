"""The gate's ``broken_claim`` rule's input: the build judged against the claims recorded with it
(the support manifest: torchconform/core/claims.py, db/claims.py).

ci/pipeline.py evaluates the rules inside torchconform.gated.gate_context (a first build too: the
rule needs no baseline); the rule (ci/rules.rule_broken_claim) asks :func:`claim_findings` for
the broken promises.  A build that recorded no claims passes quietly.
"""
from __future__ import annotations

from torchconform.gated import gated_build
from torchconform.core.claims import base_of
from torchconform.db.claims import claims_of


def claim_findings(limit: int = 5) -> tuple[list[dict] | None, str]:
    """(findings, detail): one finding per broken claim; None: no claims to judge."""

    current = gated_build()
    if current is None:
        return None, "no claims to judge"
    store, build = current
    report, source = claims_of(store, build)
    if report is None:
        return None, "no claims recorded with the build"
    found = []
    for section in ("operators", "dtypes", "features"):
        for v in getattr(report, section):
            if v.state == "broken":
                found.append({"claim": v.claim, "section": section, "old": "claimed", "new": "broken",
                              "message": v.why})
    cov = report.coverage()
    shown: list[str] = []
    for f in found:   # overloads of one operator named once
        name = base_of(f["claim"]) if f["section"] == "operators" and "::" in f["claim"] else f["claim"]
        if name not in shown:
            shown.append(name)
    denominator = f" of {cov['denominator']} census operators" if cov["denominator"] else " (no census)"
    detail = (f"{len(found)} broken promises; {cov['verified']} claimed operators verified{denominator}"
              + (": " + ", ".join(shown[:limit]) + (", ..." if len(shown) > limit else "") if shown else ""))
    return found, detail
