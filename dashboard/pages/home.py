"""Home: one card per series (device, backend profile, branch, suite set: db/series.py), newest
series first, with its latest build's breakdown bar, a trend chart of the series, then all builds."""
from __future__ import annotations

from torchconform.dashboard import charts
from torchconform.dashboard.model import BuildInfo, groups_of
from torchconform.dashboard.styles import breakdown_counts, pass_rate
from torchconform.dashboard.tables import Table


def builds_table(builds: list[BuildInfo]) -> Table:
    t = Table("tables/builds", ["build", "created", "branch", "device", "profile", "suites", "outcomes", "passed",
                                "failed", "eligibility skips", "backend skips", "pass rate %", "state", "pages"],
              title="All builds")
    for i, b in enumerate(reversed(builds)):  # newest first
        o = b.summary["outcomes"]
        rate = pass_rate(b.summary)
        t.rows.append([b.name, b.created, b.branch, b.device, b.series.profile, b.series.suite_set,
                       b.summary["total"],
                       o["pass"] + o["pass_fallback"], o["fail"] + o["error"] + o["crash"] + o["timeout"],
                       o["skip_eligibility"], o["skip_backend"],
                       round(100 * rate, 2) if rate is not None else None,
                       "complete" if b.complete else "incomplete",
                       "all" if b.full else "breakdown only (past --full-builds)"])
        t.links.setdefault("build", {})[i] = f"builds/{b.slug}/index.html"
    return t


def render(site, builds: list[BuildInfo], generated: str, full_builds: int | None = None):
    """``full_builds``: the ``--full-builds`` in force; the page says which builds it retired."""
    groups = []
    for g in groups_of(builds):
        # only the series' own builds: a trend against another series compares unrelated tests
        points = [{"label": b.name, "href": f"builds/{b.slug}/index.html", "breakdown": b.summary,
                   "created": b.created} for b in g.builds]
        groups.append({
            "series": g.series, "branch": g.branch, "device": g.device, "latest": g.latest, "points": points,
            "bar": charts.breakdown_bar(g.latest.summary),
            "counts": breakdown_counts(g.latest.summary),
            "trend": charts.trend_chart(points),
        })
    table = builds_table(builds)
    retired = sum(not b.full for b in builds)
    return site.page("index.html", "home.html", title="Coverage by build", groups=groups,
                     builds_table=table, downloads=[table], n_builds=len(builds), generated=generated,
                     retired=retired, full_builds=full_builds)
