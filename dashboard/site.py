"""``build_site``: read the store through its query module, write every page.

The steps are in one place so the order is visible:
1. list the builds (slugs, series, baselines) and decide which are unchanged since the
   last run on this folder (cache.py) and can be kept as they are;
2. for every other build: one read of its results, joined to the test table
   read once (build_data.py), then its pages (build, matrix, missing operators,
   diff) and search data: per_build.py, in worker processes for a big site
   (parallel.py);
3. every build's failure clusters page (a cluster's first build and whether it is
   new since the baseline need the earlier builds), the site-wide pages (home,
   leaderboard, models, search) from all builds.
"""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

from torchconform.dashboard import cache, charts, parallel
from torchconform.dashboard.build_data import TestTable
from torchconform.dashboard.model import groups_of, load_builds
from torchconform.collectors import clusters as clusters_mod
from torchconform.dashboard.pages import census as census_page
from torchconform.dashboard.pages import clusters as clusters_page
from torchconform.dashboard.pages import home, missing, models, search
from torchconform.gcpause import no_cyclic_gc
from torchconform.dashboard.render import STATIC, Site
from torchconform.errors import UserError

# A generated site carries this file (with the reuse manifest); only such a folder is ever emptied.
MARKER = ".torchconform-site"
# Folders rewritten on every run (per-build folders are pruned build by build).
REWRITTEN = ("tables", "static")


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
    for folder in ("builds", "data/builds", "data/matrix", "data/failures"):
        base = out_dir / folder
        if base.is_dir():
            for entry in base.iterdir():
                if entry.name.removesuffix(".js") not in keep:
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def copy_static(out_dir: Path) -> None:
    static = out_dir / "static"
    shutil.copytree(STATIC, static, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__init__.py", "__pycache__"))
    (static / "categories.css").write_text(charts.category_css(), encoding="utf-8")


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


def build_site(store, out_dir, base_url: str | None = None, queries=None, reuse: bool = True,
               categories: str | Path | None = None) -> Path:
    """Generate the static site for every build in ``store`` under ``out_dir``; returns the home page.

    ``store``: a ``Store`` or a database URL/path.  ``queries`` defaults to
    ``torchconform.db.queries`` (the one read module).  ``reuse``: keep the
    pages of builds unchanged since the last run on ``out_dir``.  ``categories``:
    a YAML file of named failure categories (collectors/clusters.py ``load_categories``).
    """
    if queries is None:
        from torchconform.db import queries
    if isinstance(store, (str, Path)):
        from torchconform.db.store import open_store

        with open_store(str(store)) as opened:
            return build_site(opened, out_dir, base_url, queries, reuse, categories)
    out_dir = Path(out_dir)
    check_out_dir(out_dir)
    user_categories = clusters_mod.load_categories(categories) if categories else []
    listed = queries.list_builds(store, series=True)
    rows = {r["name"]: r for r in listed}
    builds = load_builds(store, queries, listed)
    if not builds:
        raise UserError(f"the store {store!r} has no builds; run `torchconform run` or "
                        "`torchconform ingest FILE --build NAME` first")

    # 1. which builds can be kept from the previous run
    marker = out_dir / MARKER
    previous = cache.read_manifest(marker).get("builds", {}) if reuse else {}
    generator = cache.generator_hash() + (base_url or "") + clusters_mod.categories_key(categories)
    keys, kept, older = {}, set(), []
    for b in builds:
        baseline_key = keys.get(b.baseline.name) if b.baseline else None
        keys[b.name] = cache.build_key(rows[b.name], baseline_key, list(older), generator)
        older.append(b.name)
        entry = previous.get(b.name)
        if (keys[b.name] and entry and entry.get("key") == keys[b.name] and entry.get("slug") == b.slug
                and all((out_dir / f).is_file() for f in cache.files_of(b.slug, b.has_census))):
            kept.add(b.slug)
            b.summary = entry["summary"]
    index = search.SearchIndex()
    if kept and not index.read_previous(out_dir):
        kept.clear()
    for b in builds:
        if b.slug in kept and not index.add_previous(b.slug, out_dir / "data" / "builds" / f"{b.slug}.js"):
            kept.discard(b.slug)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Until this run ends, the folder promises nothing: a crash half-way reuses nothing next time.
    cache.write_manifest(marker, {})
    prune(out_dir, kept)
    copy_static(out_dir)

    # 2. the builds that changed or are new
    site = Site(out_dir, base_url)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    slugs = {b.name: b.slug for b in builds}
    latest = [g.latest for g in groups_of(builds)]
    latest_names = {b.name for b in latest}
    boards: dict[str, list[dict]] = {}
    blocking: dict[str, tuple | None] = {}   # per_build's census findings of the changed builds
    found: dict[str, list] = {}              # build -> its failure clusters
    changed = [b for b in builds if b.slug not in kept]
    for b in builds:
        if b.slug in kept and b.name in latest_names:
            boards[b.name] = _board_from_download(out_dir / "builds" / b.slug / "missing.json")
    # The collector is paused from here to the end, in one pause (forked workers inherit it):
    # the test table and the search index hold every test id, and each collection would walk
    # them again; re-enabling it between builds set off a full collection over every live row
    # (~75 ms a build).  Nothing here makes cycles.
    with no_cyclic_gc():
        if changed:
            first_missing = queries.first_missing_builds(store)
            size = sum(int(b.meta.get("results") or 0) for b in changed)
            # read once here; worker processes inherit it (the paused collector never walks it there)
            tests = TestTable.read(store, queries)
            for run in parallel.render_all(store, queries, site, changed, generated, first_missing, slugs, size,
                                           tests, user_categories):
                positions = None   # a worker sends a build's test ids only when they differ from its previous build's
                for r in run:
                    positions = index.add_encoded(slugs[r.name], r.encoded, positions)
                    boards[r.name] = r.board
                    blocking[r.name] = r.blocking
                    found[r.name] = r.clusters
            del tests
        for b in builds:
            if b.name not in found:   # kept: its clusters are in its download
                path = out_dir / "builds" / b.slug / "clusters.json"
                found[b.name] = clusters_page.read_download(json.loads(path.read_text(encoding="utf-8")))

        # 3. the census pages (they need the earlier censuses of their group), site-wide pages
        clusters_page.render_all(site, builds, found, slugs, generated)
        census_page.render_all(site, store, queries, builds, set(blocking),
                               {n: (boards[n], *found) for n, found in blocking.items() if found}, generated)
        missing.render(site, builds, boards, slugs, generated)
        models.render(site, index.models, latest, generated,
                      {b.slug: _blocking_of(store, queries, b, blocking) for b in latest})
        search.render(site, index, builds, generated)
        home_page = home.render(site, builds, generated)
    cache.write_manifest(marker, {b.name: {"key": keys[b.name], "slug": b.slug, "summary": b.summary}
                                  for b in builds if keys[b.name]})
    return home_page
