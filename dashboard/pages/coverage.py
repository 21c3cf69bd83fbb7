"""A build's coverage audit page (``builds/<slug>/coverage.html``, docs/census.md "Coverage
audit"): which backend-relevant ATen overloads the build's tests reached on the device,
against its census: the headline (reached / measurable, or "not measured"), the counts
per census status, every reached overload with its test count and an example test, and
every measurable overload no test reached; the tables as JSON/CSV, and ``coverage.json``: what
``torchconform coverage --json`` prints but the two long lists (the tables' downloads hold them).

Every name a test or the store supplied is escaped: the table macro escapes cells and the
template escapes the rest (jinja2 autoescape).
"""
from __future__ import annotations

import json

from torchconform.dashboard.staging import write_text
from torchconform.dashboard.tables import Table
from torchconform.db.coverage import build_coverage, headline

ROWS_SHOWN = 500
LISTS = ("reached_ops", "unreached")   # in coverage.json only as the tables' downloads


def status_table(stem: str, cov: dict) -> Table:
    t = Table(stem, ["census status", "overloads", "reached", "reached %"], title="Per census status")
    for status, v in cov["statuses"].items():
        if not v["overloads"] and not v["reached"]:
            continue
        measured = v["measured"] and v["overloads"]
        t.rows.append([status, v["overloads"], v["reached"] if v["measured"] else "not measured",
                       round(100.0 * v["reached"] / v["overloads"], 2) if measured else None])
    return t


def reached_table(stem: str, cov: dict) -> Table:
    t = Table(stem, ["operator", "census status", "tests", "example test"],
              title=f"Reached overloads ({len(cov['reached_ops'])}, most tests first)")
    t.rows = [[r["op"], r["status"] or "not in the census", r["tests"], r["example_test"]] for r in cov["reached_ops"]]
    return t


def unreached_table(stem: str, cov: dict) -> Table:
    t = Table(stem, ["operator", "census status"], title=f"Overloads no test reached ({len(cov['unreached'])})")
    t.rows = [[r["op"], r["status"]] for r in cov["unreached"]]
    return t


def read(store, build_name: str) -> dict:
    return build_coverage(store, build_name)


def render(site, cov: dict, build, generated: str) -> None:
    """Write ``builds/<slug>/coverage.html`` and ``coverage.json`` from ``cov`` (db/coverage.py)."""
    base = f"builds/{build.slug}/"
    path = site.out_dir / (base + "coverage.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    summary = {k: v for k, v in cov.items() if k not in LISTS}
    write_text(path, json.dumps(dict(summary, headline=headline(cov)), indent=1) + "\n")
    statuses, reached, unreached = (status_table(base + "coverage-status", cov),
                                    reached_table(base + "coverage-reached", cov),
                                    unreached_table(base + "coverage-unreached", cov))
    site.page(base + "coverage.html", "coverage.html", title=f"Coverage audit · {build.name}", build=build,
              cov=cov, headline=headline(cov), status_table=statuses, reached_table=reached,
              unreached_table=unreached, limit=ROWS_SHOWN, downloads=[statuses, reached, unreached],
              generated=generated)


def figure(cov: dict | None) -> str:
    """The build page's one-line coverage figure ("" where the page is not rendered)."""
    if cov is None:
        return ""
    if not cov["measured"]:
        return "not measured"
    if not cov["has_census"]:
        return f"{cov['reached']} overloads reached (no census)"
    if cov["percent"] is None:
        return "no measurable overload in the census"
    return f"{cov['percent']:.2f} % ({cov['reached']} of {cov['measurable']} backend-relevant overloads)"
