"""Two builds' censuses compared, and the gate's view of it.

``lost``: ran on the baseline's device (Row.works) and does not now; ``gained``
the other way round; ``changed``: runs in both but by other means (native ->
fallback is worth a look, not a lost operator).  Operators only one torch
build registers are ``added`` / ``removed``, never lost or gained: a torch
upgrade renaming an overload is not the backend's regression.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from torchconform import gated
from torchconform.core.dispatch import Row
from torchconform.census import records


@dataclass
class CensusDiff:
    old: str
    new: str
    lost: list[dict] = field(default_factory=list)
    gained: list[dict] = field(default_factory=list)
    changed: list[dict] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"old": self.old, "new": self.new, "lost": self.lost, "gained": self.gained,
                "changed": self.changed, "added": self.added, "removed": self.removed}


def _label(row: Row) -> str:
    """status, plus the composite's coverage (composite/blocked), as a diff shows it."""
    if row.status == "composite" and row.covered is False:
        return "composite-blocked"
    return row.status


def diff(old_rows: list[Row], new_rows: list[Row], old: str = "baseline", new: str = "build") -> CensusDiff:
    before = {r.op: r for r in old_rows}
    after = {r.op: r for r in new_rows}
    out = CensusDiff(old, new, added=sorted(set(after) - set(before)), removed=sorted(set(before) - set(after)))
    for op in sorted(set(before) & set(after)):
        o, n = before[op], after[op]
        entry = {"op": op, "was": _label(o), "now": _label(n)}
        if o.works and not n.works:
            out.lost.append(dict(entry, blocked_by=list(n.blocked_by)))
        elif n.works and not o.works:
            out.gained.append(entry)
        elif entry["was"] != entry["now"]:
            out.changed.append(entry)
    return out


def format_diff(d: CensusDiff, limit: int = 50) -> str:
    lines = [f"census {d.new} vs {d.old}: {len(d.lost)} lost, {len(d.gained)} gained, {len(d.changed)} changed, "
             f"{len(d.added)} added, {len(d.removed)} removed operators"]
    for title, items in (("lost", d.lost), ("gained", d.gained), ("changed", d.changed)):
        for e in items[:limit]:
            lines.append(f"  {title:<8} {e['op']}  {e['was']} -> {e['now']}")
        if len(items) > limit:
            lines.append(f"  {title:<8} ... {len(items) - limit} more")
    return "\n".join(lines)


def builds_diff(store, build: str, baseline: str) -> CensusDiff | None:
    """The stored censuses of ``baseline`` -> ``build``; None when either has none."""
    old_rows, new_rows = records.load(store, baseline), records.load(store, build)
    if old_rows is None or new_rows is None:
        return None
    return diff(old_rows, new_rows, baseline, build)


# -- the gate ----------------------------------------------------------------------------
# The gate's rules see only outcome records; which builds' censuses to compare comes from
# the gate's context (torchconform/gated.py), re-exported here for callers of the census.
gate_context = gated.gate_context


def lost_operator_findings() -> tuple[list[dict] | None, str]:
    """(findings, detail) for the gate; findings None: nothing to compare (skip quietly)."""
    current = gated.gated_builds()
    if current is None:
        return None, "no census to compare"
    store, baseline, build = current
    d = builds_diff(store, build, baseline)
    if d is None:
        return None, "no census to compare"
    findings = [{"lost_op": e["op"], "was": e["was"], "now": e["now"]} for e in d.lost]
    names = ", ".join(f["lost_op"] for f in findings[:5]) + (" ..." if len(findings) > 5 else "")
    return findings, f"{len(findings)} operators lost" + (f": {names}" if findings else "")
