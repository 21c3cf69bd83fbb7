"""Missing-operator leaderboard: operators ranked by tests (and models) they block."""
from __future__ import annotations

from torchconform.dashboard.charts import leaderboard_chart
from torchconform.dashboard.model import BuildInfo, groups_of
from torchconform.dashboard.tables import Table

TOP_N = 10
# Column of a build with a census: the composites through whose decomposition models reach
# the operator (empty when one reaches it directly); builds without one keep the old columns.
THROUGH = "only through the decomposition of"


def leaderboard_table(stem: str, title: str, rows: list[dict], slugs: dict[str, str]) -> Table:
    census = any("through" in r for r in rows)
    t = Table(stem, ["rank", "operator", "tests blocked", "models blocked", "first build seen",
                     *([THROUGH] if census else [])], title=title)
    for i, r in enumerate(rows):
        first = r.get("first_build") or r.get("first_seen") or ""
        t.rows.append([i + 1, r["op"], int(r.get("tests", 0) or 0), int(r.get("models", 0) or 0), first,
                       *([" ".join(r.get("through", []))] if census else [])])
        if first in slugs:
            t.links.setdefault("first build seen", {})[i] = f"builds/{slugs[first]}/index.html"
    return t


def headline(rows: list[dict]) -> dict:
    top = rows[:TOP_N]
    # the chart of the top operators by tests and models blocked (inline SVG, no script needed)
    return {"top_n": len(top), "top_tests": sum(int(r.get("tests", 0) or 0) for r in top),
            "top_models": sum(int(r.get("models", 0) or 0) for r in top), "chart": leaderboard_chart(rows, TOP_N)}


def render_build(site, build: BuildInfo, rows: list[dict], slugs: dict[str, str], generated: str):
    base = f"builds/{build.slug}/"
    table = leaderboard_table(base + "missing", f"Missing operators in {build.name}", rows, slugs)
    # The page's own links are relative to the site root in the table macro.
    section = {"heading": f"Build {build.name}", "table": table, **headline(rows)}
    return site.page(base + "missing.html", "missing.html", title=f"Missing operators · {build.name}",
                     sections=[section], downloads=[table], generated=generated)


def render(site, builds: list[BuildInfo], boards: dict[str, list[dict]], slugs: dict[str, str], generated: str):
    """Top-level page: the leaderboard of the latest build of each series (db/series.py)."""
    sections, tables = [], []
    for g in groups_of(builds):
        b = g.latest
        rows = boards.get(b.name, [])
        table = leaderboard_table(f"tables/missing-{b.slug}", "Operators ranked by tests blocked", rows, slugs)
        sections.append({"heading": f"Branch {g.branch or '(none)'} · device {g.device or '(unknown)'} · build {b.name}",
                         "table": table, **headline(rows)})
        tables.append(table)
    return site.page("missing.html", "missing.html", title="Missing-operator leaderboard", sections=sections,
                     downloads=tables, generated=generated)
