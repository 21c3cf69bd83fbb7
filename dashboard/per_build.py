"""One build's pages from one read of its outcomes: what ``build_site`` does per changed build.

``render_builds`` renders a run of builds (oldest first) in one process and
hands back only the small results the site-wide pages need (summary,
leaderboard, encoded search data), so that it can run in a worker process
(parallel.py) as well as in the caller's.  Within a run, a build's diff
against its baseline reuses the baseline's latest map when the same run read
it; otherwise the store is asked (``queries.diff``), with the same answer.
"""
from __future__ import annotations

import gc
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass

from torchconform.collectors.breakdown import make_breakdown
from torchconform.dashboard.model import ROW_COLUMNS, BuildInfo, BuildRows, diff_from_maps
from torchconform.dashboard.pages import build as build_page
from torchconform.dashboard.pages import diff as diff_page
from torchconform.dashboard.pages import matrix, missing, search


@dataclass
class BuildResult:
    name: str
    summary: dict
    board: list
    encoded: search.EncodedBuild


def merge_breakdowns(build: str, parts) -> dict:
    """One breakdown from breakdowns of disjoint parts of a build (collectors.breakdown shape)."""
    outcomes, kinds, missing_ops = Counter(), Counter(), Counter()
    for b in parts:
        outcomes.update(b["outcomes"])
        kinds.update(b["backend_skip_kinds"])
        missing_ops.update({m["op"]: m["tests"] for m in b["missing_ops"]})
    return make_breakdown(build, outcomes, kinds, missing_ops)


@contextmanager
def no_cyclic_gc():
    """Pause the cyclic garbage collector: a build holds ~150k row tuples, and every
    collection the many small allocations trigger walks them all (about a sixth of
    the run).  Rows and maps are freed by reference counting; nothing here makes cycles."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _by_rows(by: dict) -> list[dict]:
    return [{"key": key or "(none)", "summary": b} for key, b in by.items()]


def render_builds(store, queries, site, builds: list[BuildInfo], generated: str, first_missing: dict,
                  slugs: dict[str, str]) -> list[BuildResult]:
    """Read and render ``builds`` in order; sets each one's ``summary`` and returns their results."""
    results = []
    # the latest map of the last build read, per group: the next build's baseline diff needs no query
    maps: dict[tuple, tuple[str, dict]] = {}
    previous_ids = None
    for b in builds:
        with no_cyclic_gc():
            results.append(_render_one(store, queries, site, b, generated, first_missing, slugs, maps, previous_ids))
        if results[-1].encoded.ids is not None:
            previous_ids = results[-1].encoded.ids
    return results


def _render_one(store, queries, site, b: BuildInfo, generated: str, first_missing: dict, slugs: dict,
                maps: dict, previous_ids) -> BuildResult:
    """Read one build, write its pages; the baseline diff reuses ``maps`` when it can."""
    # one read of the build; every page's numbers come from it
    data = BuildRows(b.name, list(queries.latest_rows(store, b.name, ROW_COLUMNS)))
    by_suite = data.summary_by(queries, "suite")
    # every test has exactly one suite, so the per-suite breakdowns add up to the build's
    b.summary = merge_breakdowns(b.name, by_suite.values())
    encoded = search.encode_rows(data.rows, previous_ids=previous_ids)
    build_page.render(site, b, _by_rows(by_suite), _by_rows(data.summary_by(queries, "file")), generated)
    matrix.render(site, b, data.matrix_cells(), generated)
    board = data.leaderboard(queries, first_missing)
    missing.render_build(site, b, board, slugs, generated)
    current = data.latest_map()
    if b.baseline is not None:
        previous = maps.get(b.group)
        if previous is not None and previous[0] == b.baseline.name:
            d = diff_from_maps(queries, b.baseline.name, previous[1], b.name, current)
        else:   # the baseline was kept from the last run, or read by another worker: ask the store
            d = queries.diff(store, b.baseline.name, b.name)
        if hasattr(queries, "flaky_tests"):
            d["flaky"] = [f for f in queries.flaky_tests(store, b.name) if f.get("flaky")]
        diff_page.render(site, b, d, generated)
    maps[b.group] = (b.name, current)
    return BuildResult(b.name, b.summary, board, encoded)
