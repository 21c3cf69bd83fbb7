"""``build_site``: read the store through its query module, write every page.

The steps are in one place so the order is visible:
1. list the builds (slugs, series, baselines), mark which keep every page
   (``--full-builds``, retention.py) and decide which are unchanged since the last run
   on this folder (cache.py) and can be kept as they are;
2. number the tests (positions.py: the previous run's numbering, extended) when any
   build is to be rendered; for every such build: one read of its results, joined to
   the test table read once (db/arrays.py), then its pages (build, matrix, missing
   operators, diff) and data (search, failures), or the small page of a build past
   ``--full-builds``: per_build.py, in worker processes for a big site (parallel.py);
3. every full build's failure clusters page (a cluster's first build and whether it is
   new since the baseline need the earlier builds), the site-wide pages (home,
   leaderboard, models, search) from all builds, the test index.
"""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

from torchconform.dashboard import cache, charts, parallel, positions, retention, staging
from torchconform.db.arrays import TestTable
from torchconform.dashboard.model import groups_of, load_builds
from torchconform.core import clusters as clusters_mod
from torchconform.dashboard.pages import census as census_page
from torchconform.dashboard.pages import clusters as clusters_page
from torchconform.dashboard.pages import home, missing, models, search
from torchconform.gcpause import no_cyclic_gc
from torchconform.dashboard.render import STATIC, Site
from torchconform.dashboard.staging import write_text
from torchconform.errors import UserError
from torchconform.dashboard.reads import READS
from torchconform.db.opening import open_store

# A generated site carries this file (with the reuse manifest); only such a folder is ever emptied.
MARKER = ".torchconform-site"
# Folders rewritten on every run (per-build folders are pruned build by build).
REWRITTEN = ("tables", "static")
# Folders of per-build files (a folder or a <slug>.js file each), removed with their build
# or when it retires (a retired build's small page is written again)
PER_BUILD = ("builds", "data/builds", "data/matrix", "data/failures", "data/diff")


def check_out_dir(out_dir: Path) -> None:
    """Refuse a file, or a non-empty folder that is not one of our sites."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir} is a file; pass a folder for the site")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MARKER).exists():
        raise UserError(f"--out {out_dir} is not empty and holds no torchconform site; pass a new or empty folder")


def prune(out_dir: Path, keep: set[str]) -> None:
    """Remove what is rewritten, and every build folder and data file not kept."""
    for name in REWRITTEN:
        shutil.rmtree(out_dir / name, ignore_errors=True)
    for folder in PER_BUILD:
        base = out_dir / folder
        if base.is_dir():
            for entry in base.iterdir():
                if entry.name.removesuffix(".js") not in keep:
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def copy_static(out_dir: Path) -> None:
    static = out_dir / "static"
    shutil.copytree(STATIC, static, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__init__.py", "__pycache__"))
    write_text(static / "categories.css", charts.category_css())


def _board_from_download(path: Path) -> list[dict]:
    """A kept build's leaderboard, read back from its JSON download."""
    board = []
    for r in json.loads(path.read_text(encoding="utf-8")):
        entry = {"op": r["operator"], "tests": r["tests blocked"], "models": r["models blocked"],
                 "first_build": r["first build seen"]}
        if missing.THROUGH in r:   # a build with a census
            entry["through"] = r[missing.THROUGH].split()
        board.append(entry)
    return board


def _blocking_of(store, queries, b, found: dict) -> dict:
    """model -> blocking operators of build ``b`` (traced models; {} without a census): what
    per_build found when it rendered ``b``, else read (a kept build)."""
    if b.name in found:
        return (found[b.name] or ({}, []))[0]
    if not b.has_census:
        return {}
    got = queries.census_impact(store, b.name)
    return {} if got is None else {m: sorted(ops) for m, ops in got.sets().items()}


def _keep_search(out_dir: Path, builds: list, kept: set[str]) -> tuple[list | None, dict]:
    """(the previous numbering, the kept full builds' search data) read back; a kept full build
    whose data cannot be used leaves ``kept``.  Positional files are only kept with the
    numbering they were written against."""
    full = [b for b in builds if b.full and b.slug in kept]
    previous = positions.read_ids(out_dir) if full else None
    found = {}
    for b in full:
        got = search.read_kept(out_dir, b, len(previous)) if previous is not None else None
        if got is None:
            kept.discard(b.slug)
        else:
            found[b.slug] = got
    return previous, found


def build_site(store, out_dir, base_url: str | None = None, queries=None, reuse: bool = True,
               categories: str | Path | None = None, full_builds: int = retention.DEFAULT) -> Path:
    """Generate the static site for every build in ``store`` under ``out_dir``; returns the home page.

    ``store``: a ``Store`` or a database URL/path.  ``queries`` defaults to
    dashboard/reads.py's ``READS`` (every read the site makes).  ``reuse``: keep the
    pages of builds unchanged since the last run on ``out_dir``.  ``categories``:
    a YAML file of named failure categories (torchconform/core/clusters.py ``load_categories``).
    ``full_builds``: how many of the most recent builds keep every page (retention.py).
    """
    full_builds = retention.checked(full_builds)
    if queries is None:
        queries = READS
    if isinstance(store, (str, Path)):
        with open_store(str(store)) as opened:
            return build_site(opened, out_dir, base_url, queries, reuse, categories, full_builds)
    out_dir = Path(out_dir)
    check_out_dir(out_dir)
    user_categories = clusters_mod.load_categories(categories) if categories else []
    # Written beside out_dir and swapped in whole (staging.py): a generation killed
    # half-way leaves the previous site as it was.
    with staging.staged(out_dir) as work:
        home_page = _generate(store, work, base_url, queries, reuse, categories, full_builds, user_categories)
    return out_dir / home_page.relative_to(work)


def _generate(store, out_dir: Path, base_url, queries, reuse, categories, full_builds, user_categories) -> Path:
    """build_site's work, in ``out_dir`` (the staging folder, holding the previous site)."""
    listed = queries.list_builds(store, series=True)
    rows = {r["name"]: r for r in listed}
    builds = load_builds(store, queries, listed)
    if not builds:
        raise UserError(f"the store {store!r} has no builds; run `torchconform run` or "
                        "`torchconform ingest FILE --build NAME` first")
    retention.choose(builds, full_builds)

    # 1. which builds can be kept from the previous run
    marker = out_dir / MARKER
    manifest = cache.read_manifest(marker)
    previous = manifest.get("builds", {}) if reuse else {}
    generator = cache.generator_hash() + (base_url or "") + clusters_mod.categories_key(categories)
    keys, kept = cache.unchanged(builds, rows, previous, out_dir, generator, full_builds)
    previous_ids, kept_search = _keep_search(out_dir, builds, kept)
    changed = [b for b in builds if b.slug not in kept]
    tests = numbering = None
    if changed:
        tests = TestTable.read(store, queries)
        numbering = positions.plan(tests, previous_ids)
        if numbering.fresh and kept_search:   # renumbered: no positional file can stay
            kept -= set(kept_search)
            kept_search = {}
            changed = [b for b in builds if b.slug not in kept]
    out_dir.mkdir(parents=True, exist_ok=True)
    # Until this run ends, the folder promises nothing: a crash half-way reuses nothing next time.
    cache.write_manifest(marker, {})
    prune(out_dir, kept)
    copy_static(out_dir)

    # 2. the builds that changed or are new
    site = Site(out_dir, base_url)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    slugs = {b.name: b.slug for b in builds}
    full = [b for b in builds if b.full]
    latest = [g.latest for g in groups_of(builds)]
    latest_names = {b.name for b in latest}
    index = search.SearchIndex()
    for slug, (found_search, payload) in kept_search.items():
        index.add(slug, found_search, payload)
    boards: dict[str, list[dict]] = {}
    blocking: dict[str, tuple | None] = {}   # per_build's census findings of the changed builds
    found: dict[str, list] = {}              # full build -> its failure clusters
    known: dict[str, set] = {}               # full build -> its retired baseline's cluster keys
    for b in builds:
        if b.slug in kept and b.name in latest_names:
            boards[b.name] = _board_from_download(out_dir / "builds" / b.slug / "missing.json")
    # The collector is paused from here to the end, in one pause (forked workers inherit it):
    # the test table holds every test id, and each collection would walk them again;
    # re-enabling it between builds set off a full collection over every live row
    # (~75 ms a build).  Nothing here makes cycles.
    with no_cyclic_gc():
        if changed:
            first_missing = queries.first_missing_builds(store)
            size = sum(int(b.meta.get("results") or 0) for b in changed)
            # read once above; worker processes inherit it (the paused collector never walks it there)
            for run in parallel.render_all(store, queries, site, changed, generated, first_missing, slugs, size,
                                           tests, user_categories, numbering, full_builds):
                for r in run:
                    if r.search is not None:
                        index.add(slugs[r.name], r.search)
                        boards[r.name] = r.board
                        found[r.name] = r.clusters
                    blocking[r.name] = r.blocking
                    if r.baseline_keys is not None:
                        known[r.name] = r.baseline_keys
        for b in full:
            if b.name not in found:   # kept: its clusters are in its download
                records = json.loads((out_dir / "builds" / b.slug / "clusters.json").read_text(encoding="utf-8"))
                found[b.name] = clusters_page.read_download(records)
                if b.baseline is not None and not b.baseline.full:
                    known[b.name] = clusters_page.known_from_download(records)

        # 3. the census pages (they need the earlier censuses of their group), site-wide pages
        clusters_page.render_all(site, full, found, slugs, generated, known)
        census_page.render_all(site, store, queries, builds, set(blocking),
                               {n: (boards[n], *found) for n, found in blocking.items() if found}, generated)
        missing.render(site, builds, boards, slugs, generated)
        models.render(site, index.models, latest, generated,
                      {b.slug: _blocking_of(store, queries, b, blocking) for b in latest})
        if numbering is not None:   # a build was rendered: the index and attributes again
            index.pad_kept(site, numbering.n)
            n_tests = positions.write_index(site, numbering, index.shown(numbering.n))
            positions.write_attrs(site, numbering, tests)
        else:                       # nothing changed: they stay as the last run wrote them
            n_tests = int(manifest.get("tests", 0))
        search.render(site, n_tests, full, generated, retention.retired_count(builds), full_builds)
        home_page = home.render(site, builds, generated, full_builds)
    cache.write_manifest(marker, {b.name: {"key": keys[b.name], "slug": b.slug, "summary": b.summary,
                                           "mode": retention.mode(b, full_builds)}
                                  for b in builds if keys[b.name]}, tests=n_tests)
    return home_page
