"""One build's pages from one read of its outcomes: what ``build_site`` does per changed build.

``render_builds`` renders a run of builds (oldest first) in one process and
hands back only the small results the site-wide pages need (summary,
leaderboard, encoded search data), so that it can run in a worker process
(parallel.py) as well as in the caller's.  Each build is read once, as arrays
(build_data.py); within a run, a build's diff against its baseline reuses the
baseline's arrays when the same run read it, else reads the baseline's results.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from torchconform.census import impact
from torchconform.collectors.breakdown import make_breakdown
from torchconform.dashboard import build_data, distributed, failures
from torchconform.dashboard.build_data import FAILURE_COLUMNS, BuildData, TestTable
from torchconform.dashboard.model import BuildInfo
from torchconform.dashboard.pages import build as build_page
from torchconform.dashboard.pages import diff as diff_page
from torchconform.dashboard.pages import evaluation, matrix, missing, search


@dataclass
class BuildResult:
    name: str
    summary: dict
    board: list
    encoded: search.EncodedBuild
    # with a census: (traced model -> blocking operators, untraced models), for the census
    # page's plan and the models page; None without one
    blocking: tuple | None = None
    # the build's failure clusters (collectors.clusters.Cluster), in its failure data's order
    clusters: list = field(default_factory=list)


def merge_breakdowns(build: str, parts) -> dict:
    """One breakdown from breakdowns of disjoint parts of a build (collectors.breakdown shape)."""
    outcomes, kinds, missing_ops, fail_kinds = Counter(), Counter(), Counter(), Counter()
    host_only = 0
    for b in parts:
        outcomes.update(b["outcomes"])
        kinds.update(b["backend_skip_kinds"])
        missing_ops.update({m["op"]: m["tests"] for m in b["missing_ops"]})
        host_only += b["pass_kinds"]["host_only"]
        fail_kinds.update(b.get("fail_kinds") or {})
    return make_breakdown(build, outcomes, kinds, missing_ops, host_only, fail_kinds)


def _by_rows(by: dict) -> list[dict]:
    return [{"key": key or "(none)", "summary": b} for key, b in by.items()]


def render_builds(store, queries, site, builds: list[BuildInfo], generated: str, first_missing: dict,
                  slugs: dict[str, str], tests: TestTable, categories=()) -> list[BuildResult]:
    """Read and render ``builds`` in order; sets each one's ``summary`` and returns their results.
    ``tests``: the store's TestTable, read by the caller (worker processes inherit it);
    ``categories``: the user's failure categories (collectors.clusters.load_categories).
    Runs with the cyclic collector paused by build_site (a forked worker inherits the pause)."""
    results = []
    # the last build read, per group: the next build's baseline diff needs no query
    last: dict[tuple, BuildData] = {}
    previous_pk = None
    for b in builds:
        data, tests = BuildData.read(store, queries, b.name, tests, FAILURE_COLUMNS)
        results.append(_render_one(store, queries, site, b, data, generated, first_missing, slugs, last,
                                   previous_pk, categories))
        previous_pk = data.pk
    return results


def _render_one(store, queries, site, b: BuildInfo, data: BuildData, generated: str, first_missing: dict,
                slugs: dict, last: dict, previous_pk, categories=()) -> BuildResult:
    """Write one build's pages from its one read; the baseline diff reuses ``last`` when it can."""
    by_suite = data.summary_by(queries, "suite")
    # every test has exactly one suite, so the per-suite breakdowns add up to the build's
    b.summary = merge_breakdowns(b.name, by_suite.values())
    encoded = search.encode_build(data, previous_pk)
    counts, clusters = failures.render(site, b, data, categories)
    build_page.render(site, b, _by_rows(by_suite), _by_rows(data.summary_by(queries, "file")), generated,
                      distributed.for_build(data), counts)
    cells, numbers = data.matrix_numbers()
    matrix.render(site, b, cells, numbers, generated)
    # the leaderboard's full per-model counts come from the census and the model sets
    found = queries.census_impact(store, b.name) if b.has_census else None
    census = impact.op_models(found.blocks) if found is not None and found.traced else None
    board = data.leaderboard(queries, first_missing, census)
    missing.render_build(site, b, board, slugs, generated)
    baseline = None
    if b.baseline is not None:
        baseline = last.get(b.group)
        if baseline is None or baseline.name != b.baseline.name:
            # kept from the last run, or read by another worker: read it (its results only)
            baseline, _ = BuildData.read(store, queries, b.baseline.name, data.tests)
        d = build_data.diff(queries, baseline, data)
        if hasattr(queries, "flaky_tests"):
            # a flaky test has several results in the build: none can when the build stores
            # exactly one result per test read (list_builds' ``results`` counts every stored one)
            one_each = b.meta.get("results") == len(data.rows)
            d["flaky"] = [] if one_each else [f for f in queries.flaky_tests(store, b.name) if f.get("flaky")]
        diff_page.render(site, b, d, generated)
    evaluation.render(site, b, data, baseline, generated)
    last[b.group] = data
    blocking = None if found is None else ({m: sorted(ops) for m, ops in found.sets().items()}, found.untraced)
    return BuildResult(b.name, b.summary, board, encoded, blocking, clusters)
