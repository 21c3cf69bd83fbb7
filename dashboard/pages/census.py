"""Census page per build (builds/<slug>/census.html): the coverage tracker a team would keep by hand.

Every operator overload of the build's census with its status, the tests and models
it blocks (the leaderboard's full per-model counts), the first build of the branch
and device in which it did not run and the build since which it runs; a chart of the
operators per status over the group's builds up to this one; the plan
(census/plan.py).  Only builds with a census get the page; it is rendered by the
parent process after the per-build pages (it needs the earlier builds' censuses).
"""
from __future__ import annotations

from torchconform.census import impact, plan
from torchconform.dashboard import charts
from torchconform.dashboard.model import BuildInfo, groups_of
from torchconform.dashboard.styles import CENSUS_KEYS, CENSUS_STYLE
from torchconform.dashboard.tables import Table

PLAN_STEPS = 10
# The site's bound on the exact search (census/plan.py's SEARCH_LIMIT is 10x): about a quarter
# of a second per census build before the plan falls back to greedy (the page says which).
PLAN_LIMIT = 200_000


def status_key(row) -> str:
    """The page's status of a census row: a composite whose decomposition is blocked is "blocked"."""
    return "blocked" if row.status == "composite" and row.covered is False else row.status


def status_counts(rows) -> list:
    counts = dict.fromkeys(CENSUS_KEYS, 0)
    for r in rows:
        counts[status_key(r)] += 1
    return [(CENSUS_STYLE[k], counts[k]) for k in CENSUS_KEYS]


def census_table(stem: str, rows, board: list[dict], hist: dict) -> Table:
    blocked = {e["op"]: e for e in board}
    t = Table(stem, ["operator", "status", "via", "blocked by", "tests blocked", "models blocked",
                     "first build seen missing", "works since"], title="Operators")
    status_classes = t.classes.setdefault("status", {})
    for i, r in enumerate(rows):
        e = blocked.get(r.op, {})
        first, since = hist.get(r.op, ("", ""))
        key = status_key(r)
        t.rows.append([r.op, key, r.via, " ".join(r.blocked_by), int(e.get("tests", 0)), int(e.get("models", 0)),
                       first, since])
        status_classes[i] = CENSUS_STYLE[key].key
    return t


def plan_table(stem: str, p: plan.Plan) -> Table:
    t = Table(stem, ["step", "operator", "unblocks models", "tests", "models so far", "tests so far", "through"],
              title=f"Plan: the {len(p.steps)} operators to implement next")
    for i, s in enumerate(p.steps, 1):
        t.rows.append([i, s.op, " ".join(s.models), s.tests, s.total_models, s.total_tests, " ".join(s.through)])
    return t


def render(site, b: BuildInfo, rows, board: list[dict], sets: dict, untraced: list, hist: dict,
           points: list[dict], generated: str):
    base = f"builds/{b.slug}/"
    table = census_table(base + "census", rows, board, hist)
    through = {e["op"]: e.get("through", []) for e in board}
    tests = {e["op"]: e["tests"] for e in board}
    p = plan.plan(sets, tests, PLAN_STEPS, build=b.name, through=through, untraced=untraced, limit=PLAN_LIMIT)
    steps = plan_table(base + "plan", p)
    counts = status_counts(rows)
    return site.page(base + "census.html", "census.html", title=f"Operator census · {b.name}", build=b,
                     ops_table=table, plan=p, plan_table=steps, counts=counts, total=len(rows),
                     chart=charts.trend_chart(points, what="Operators per census status"),
                     statuses=[(k, CENSUS_STYLE[k].label) for k in CENSUS_KEYS],
                     downloads=[table, steps], generated=generated)


def render_all(site, store, queries, builds: list[BuildInfo], changed: set[str], results: dict, generated: str):
    """The census pages of the ``changed`` builds that have a census.  ``results``: build ->
    (leaderboard, model sets, untraced models), as per_build returned them.  Reads each census
    of a group with such a build once, oldest first (the history and the chart need them)."""
    for g in groups_of(builds):
        members = [b for b in g.builds if b.has_census]
        if not any(b.name in changed for b in members):
            continue
        censuses, points = [], []
        for b in members:
            rows = queries.census_rows(store, b.name) or []
            censuses.append((b.name, rows))
            points.append({"label": b.name, "href": f"../{b.slug}/census.html", "counts": status_counts(rows)})
        hist = impact.history(censuses)
        for i, (b, (_, rows)) in enumerate(zip(members, censuses)):
            if b.name in changed and b.name in results:
                board, sets, untraced = results[b.name]
                render(site, b, rows, board, sets, untraced, hist[b.name], points[:i + 1], generated)
