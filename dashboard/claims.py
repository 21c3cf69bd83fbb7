"""A build's support manifest on its build page (docs/profiles.md, "Claims"; docs/site.md): the
claims recorded with the build judged against its results and census (db/claims.py,
torchconform/core/claims.py): a headline with the coverage and its denominator, and one table of
every claim (broken promises first) with JSON/CSV downloads.  A build that recorded no claims gets
neither.  Every name a profile, a test or the store supplied is escaped: the page's template and
the table macro escape what they print (jinja2 autoescape).
"""
from __future__ import annotations

from torchconform.dashboard.tables import Table
from torchconform.db.claims import claims_of

_ORDER = {"broken": 0, "unverified": 1, "verified": 2}


def read(store, build: str) -> dict | None:
    """{"headline", "counts", "coverage", "source", "report"} of the build, None without claims."""

    report, source = claims_of(store, build)
    if report is None:
        return None
    return {"headline": headline(report.to_dict()), "source": source, "report": report}


def headline(data: dict) -> str:
    """One sentence: broken promises, coverage with its denominator, undeclared support."""
    cov, counts = data["coverage"], data["counts"]
    broken = len(data["broken"])
    text = f"{broken} broken promise{'s' if broken != 1 else ''}; "
    if cov["denominator"]:
        text += (f"coverage {cov['verified']} verified of {cov['denominator']} ATen overloads the census sees for "
                 f"the device ({cov['percent']:.1f}%)")
    else:
        text += f"{cov['verified']} verified operators (no census: no denominator)"
    undeclared = sum(counts[s]["undeclared"] for s in ("operators", "dtypes", "features"))
    return text + f"; {undeclared} undeclared (passing or running without a claim)."


def table(base: str, claims: dict | None) -> Table | None:
    """Every claim: section, claim, verdict, why; broken promises first."""
    if not claims:
        return None
    report = claims["report"]
    t = Table(base + "claims", ["section", "claim", "verdict", "why"], title="Claims: verdict per claim")
    rows = [(section, v) for section in ("operators", "dtypes", "features") for v in getattr(report, section)]
    rows.sort(key=lambda sv: (_ORDER.get(sv[1].state, 3), sv[0], sv[1].claim))
    t.rows = [[section, v.claim, "broken promise" if v.state == "broken" else v.state, v.why] for section, v in rows]
    return t


def meta_text(value) -> str:
    """The ``claims`` metadata of a build as one line (the table has every claim)."""
    if not isinstance(value, dict):
        return str(value)
    parts = [f"{len(value.get('operators') or ())} operator patterns"]
    for key in ("dtypes", "features"):
        if value.get(key):
            parts.append(f"{key} {', '.join(map(str, value[key]))}")
    return "; ".join(parts)
