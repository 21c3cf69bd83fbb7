"""Render changed builds in worker processes: builds are independent apart from
the search index and the baseline diffs, so each worker takes a contiguous run
of builds (per_build.render_builds) and returns only small derived results.

Workers are forked: they inherit the query module (the benchmark's timed one
too), the build list and the test table the parent read (arrays.TestTable),
and the parent's paused cyclic collector (site.py pauses it around all
rendering), and open their own connection to the store by URL.
Where forking is unavailable, or the store cannot be reopened by URL (an
in-memory SQLite database), or there is one build to render, everything runs
in the calling process; so does a small site (under MIN_RESULTS outcomes to
read), where forking costs more than it saves.  ``TORCHCONFORM_SITE_WORKERS``
sets the number of workers whatever the size (1: no worker processes).
"""
from __future__ import annotations

import multiprocessing
import os

from torchconform import settings
from torchconform.dashboard.per_build import render_builds
from torchconform.dashboard.retention import DEFAULT
from torchconform.dashboard.render import Site
from torchconform.db.opening import open_store

MAX_WORKERS = 4
MIN_RESULTS = 100_000
# What a forked worker inherits from the parent (set just before forking).
_JOB: dict = {}


def worker_count(n_builds: int, store_url: str, results: int) -> int:
    env = (settings.given("TORCHCONFORM_SITE_WORKERS") or "").strip()
    if env.isdigit() and int(env) > 0:
        wanted = int(env)
    elif results < MIN_RESULTS:
        return 1
    else:
        wanted = min(os.cpu_count() or 1, MAX_WORKERS)
    if "fork" not in multiprocessing.get_all_start_methods() or not store_url or ":memory:" in store_url \
            or store_url.rstrip("/") in ("sqlite:", "sqlite:/", "sqlite://"):
        return 1
    if multiprocessing.current_process().daemon:   # a pool worker itself may not start processes
        return 1
    return max(1, min(wanted, n_builds))


def split(builds: list, parts: int) -> list[list]:
    """Contiguous runs of nearly equal length (a run reuses its own baseline maps)."""
    size, extra = divmod(len(builds), parts)
    runs, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        runs.append(builds[start:end])
        start = end
    return [r for r in runs if r]


def runs_of(builds: list, parts: int) -> list[list]:
    """The runs for ``parts`` workers: the full builds split as ``split`` does (a run reuses its
    own baselines), the retired ones (a light read each, no baseline) dealt out in turn."""
    full = [b for b in builds if b.full]
    runs = split(full, parts)
    runs += [[] for _ in range(parts - len(runs))]
    light: list[list] = [[] for _ in range(parts)]
    for i, b in enumerate(b for b in builds if not b.full):
        light[-1 - i % parts].append(b)          # the shortest runs (the last ones) first
    return [lt + r for lt, r in zip(light, runs) if lt or r]


def _work(index: int):
    job = _JOB
    site = Site(job["out_dir"], job["base_url"])
    with open_store(job["url"], create=False, check_schema=False) as store:
        return render_builds(store, job["queries"], site, job["runs"][index], job["generated"],
                             job["first_missing"], job["slugs"], job["tests"], job["categories"],
                             job["positions"], job["full_builds"])


def render_all(store, queries, site: Site, builds: list, generated: str, first_missing: dict,
               slugs: dict[str, str], results: int, tests, categories=(), positions=None,
               full_builds: int = DEFAULT) -> list[list]:
    """Results of ``builds`` as runs of per_build.BuildResult; sets every build's summary.
    ``results``: how many stored results the builds hold (list_builds), to decide on workers;
    ``tests``: the store's arrays.TestTable, read by the caller; ``categories``: the user's
    failure categories; ``positions``: the site's numbering of tests; ``full_builds``: the
    ``--full-builds`` in force (for the retired builds' pages)."""
    workers = worker_count(len(builds), getattr(store, "url", ""), results)
    if workers == 1:
        return [render_builds(store, queries, site, builds, generated, first_missing, slugs, tests, categories,
                              positions, full_builds)]
    runs = runs_of(builds, workers)
    _JOB.update(url=store.url, queries=queries, out_dir=site.out_dir, base_url=site.base_url,
                generated=generated, first_missing=first_missing, slugs=slugs, runs=runs, tests=tests,
                categories=categories, positions=positions, full_builds=full_builds)
    try:
        with multiprocessing.get_context("fork").Pool(len(runs)) as pool:
            done = pool.map(_work, range(len(runs)), chunksize=1)
            pool.close()
            pool.join()
    finally:
        _JOB.clear()
    by_name = {b.name: b for b in builds}
    for run in done:
        for r in run:
            by_name[r.name].summary = r.summary
    return done
