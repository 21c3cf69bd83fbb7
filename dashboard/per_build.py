"""One build's pages from one read of its outcomes: what ``build_site`` does per changed build.

``render_builds`` renders a run of builds (oldest first) in one process and
hands back only the small results the site-wide pages need (summary,
leaderboard, what the search page needs of its search data), so that it can run
in a worker process (parallel.py) as well as in the caller's.  Each build is read
once, as arrays (db/arrays.py); within a run, a build's diff against its baseline
reuses the baseline's arrays when the same run read it, else reads the baseline's
results.  A build past ``--full-builds`` (``BuildInfo.full`` false, retention.py)
reads only what its breakdown needs and gets the small build page.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from torchconform.census import impact
from torchconform.dashboard import distributed, failures, retention, tiers
from torchconform.db import arrays
from torchconform.dashboard import claims as claims_mod
from torchconform.db.arrays import FAILURE_COLUMNS, BuildData, TestTable
from torchconform.dashboard.model import BuildInfo
from torchconform.dashboard.pages import build as build_page
from torchconform.dashboard.pages import diff as diff_page
from torchconform.dashboard.pages import coverage, evaluation, matrix, missing, perf, search
from torchconform.db.not_run import with_not_run


# What a retired build reads of its results: its breakdowns need no more.
BREAKDOWN_COLUMNS = arrays.RESULT_COLUMNS[:4]


@dataclass
class BuildResult:
    name: str
    summary: dict
    board: list
    search: search.BuildSearch | None     # None: a retired build has no search data
    # with a census: (traced model -> blocking operators, untraced models), for the census
    # page's plan and the models page; None without one
    blocking: tuple | None = None
    # the build's failure clusters (core.clusters.Cluster), in its failure data's order
    clusters: list = field(default_factory=list)
    # the keys of the baseline's clusters when the baseline is retired (its clusters are
    # found nowhere else); None otherwise
    baseline_keys: set | None = None


def _by_rows(by: dict) -> list[dict]:
    return [{"key": key or "(none)", "summary": b} for key, b in by.items()]


def render_builds(store, queries, site, builds: list[BuildInfo], generated: str, first_missing: dict,
                  slugs: dict[str, str], tests: TestTable, categories=(), positions=None,
                  full_builds: int = retention.DEFAULT) -> list[BuildResult]:
    """Read and render ``builds`` in order; sets each one's ``summary`` and returns their results.
    ``tests``: the store's TestTable, read by the caller (worker processes inherit it);
    ``categories``: the user's failure categories (core.clusters.load_categories);
    ``positions``: the site's numbering of tests (positions.Positions); ``full_builds``: the
    ``--full-builds`` a retired build's page names.
    Runs with the cyclic collector paused by build_site (a forked worker inherits the pause)."""
    results = []
    # the last build read, per group: the next build's baseline diff needs no query
    last: dict[tuple, BuildData] = {}
    for b in builds:
        if not b.full:
            data, tests = BuildData.read(store, queries, b.name, tests, BREAKDOWN_COLUMNS)
            results.append(_render_retired(site, queries, b, data, generated, full_builds, store))
            continue
        data, tests = BuildData.read(store, queries, b.name, tests, FAILURE_COLUMNS)
        results.append(_render_one(store, queries, site, b, data, generated, first_missing, slugs, last,
                                   positions, categories))
    return results


def _breakdowns(queries, b: BuildInfo, data: BuildData, store=None) -> tuple[dict, dict]:
    """(per suite, per file) breakdowns; sets the build's summary (the store's ``summary``
    count, BuildData.breakdown; with what the selections left out, ``not_run``, when
    ``store`` is given: db/not_run.py)."""
    b.summary = data.breakdown()
    if store is not None:
        with_not_run(store, b.name, b.summary)
    return data.summary_by(queries, "suite"), data.summary_by(queries, "file")


def _render_retired(site, queries, b: BuildInfo, data: BuildData, generated: str, full_builds: int,
                    store=None) -> BuildResult:
    """The small page of a build past ``--full-builds``, and the stubs younger builds' pages link."""
    by_suite, by_file = _breakdowns(queries, b, data, store)
    build_page.render(site, b, _by_rows(by_suite), _by_rows(by_file), generated, retired=full_builds)
    retention.render_stubs(site, b, full_builds, generated)
    return BuildResult(b.name, b.summary, [], None)


def _render_one(store, queries, site, b: BuildInfo, data: BuildData, generated: str, first_missing: dict,
                slugs: dict, last: dict, positions, categories=()) -> BuildResult:
    """Write one build's pages from its one read; the baseline diff reuses ``last`` when it can."""
    by_suite, by_file = _breakdowns(queries, b, data, store)
    found_search = search.write_build(site, b, data, positions)
    counts, clusters = failures.render(site, b, data, categories, positions)
    cov = coverage.read(store, b.name)   # the coverage audit: its page, and its figure on the build page
    coverage.render(site, cov, b, generated)
    found_tiers = tiers.read(store, data)   # tolerance tiers, in the summary as the store's summary has them
    b.summary = {**b.summary, **(found_tiers or {})}
    build_page.render(site, b, _by_rows(by_suite), _by_rows(by_file), generated, distributed.for_build(data), counts,
                      coverage=coverage.figure(cov), tiers=found_tiers,
                      claims=claims_mod.read(store, b.name))   # the support manifest (dashboard/claims.py)
    cells, numbers = data.matrix_numbers()
    matrix.render(site, b, cells, numbers, generated)
    # the leaderboard's full per-model counts come from the census and the model sets
    found = queries.census_impact(store, b.name) if b.has_census else None
    census = impact.op_models(found.blocks) if found is not None and found.traced else None
    board = data.leaderboard(queries, first_missing, census)
    missing.render_build(site, b, board, slugs, generated)
    baseline, baseline_keys = None, None
    if b.baseline is not None:
        baseline = last.get(b.group)
        if baseline is None or baseline.name != b.baseline.name:
            # kept from the last run, or read by another worker: read it (its results only)
            baseline, _ = BuildData.read(store, queries, b.baseline.name, data.tests)
        d = arrays.diff(queries, baseline, data)
        if hasattr(queries, "flaky_tests"):
            # a flaky test has several results in the build: none can when the build stores
            # exactly one result per test read (list_builds' ``results`` counts every stored one)
            one_each = b.meta.get("results") == len(data.rows)
            d["flaky"] = [] if one_each else [f for f in queries.flaky_tests(store, b.name) if f.get("flaky")]
        diff_page.render(site, b, d, generated)
        if not b.baseline.full:   # "new since the baseline" needs its clusters, rendered nowhere
            baseline_keys = failures.cluster_keys(baseline, categories)
    evaluation.render(site, b, data, baseline, generated)
    perf.render(site, store, b, generated)   # builds that ran the perf suite
    last[b.group] = data
    blocking = None if found is None else ({m: sorted(ops) for m, ops in found.sets().items()}, found.untraced)
    return BuildResult(b.name, b.summary, board, found_search, blocking, clusters, baseline_keys)
