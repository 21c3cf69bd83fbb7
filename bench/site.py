"""Benchmark of the static site: 30 builds of 154k outcomes rendered in <= 20 s.

    python bench/site.py [--builds 30] [--n 154000] [--db PATH] [--out DIR] [--phases cold,warm,new]

Writes the synthetic builds (bench/gen_outcomes.py, straight through the store
API; not timed) unless --db already holds them, then times ``build_site`` three
ways: cold (fresh folder, every build read), warm (same folder, nothing
changed) and nightly (one new build on top; the others kept).  Prints wall and
CPU time against the 20 s target, time per query function and in the site's
own code, home page size against the 300 kB target, the largest HTML page, and
the largest lazily loaded data file (search index / per-build codes / matrix),
which no page inlines, and the size of the per-build failure data (messages and
repro commands, data/failures/<slug>/).  CPU time includes the site's worker processes
(dashboard/parallel.py; ``TORCHCONFORM_SITE_WORKERS=1`` renders in one process).
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gen_outcomes import SEED_TOTAL, write_builds  # noqa: E402

from torchconform.dashboard import build_site  # noqa: E402
from torchconform.db import queries as real_queries  # noqa: E402
from torchconform.db.store import open_store  # noqa: E402

TARGET_S = 20.0
HOME_LIMIT = 300 * 1024


class TimedQueries:
    """The query module with every call timed (generators: time until exhausted)."""

    def __init__(self, module):
        self._module = module
        self.seconds = defaultdict(float)
        self.calls = defaultdict(int)

    def __getattr__(self, name):
        fn = getattr(self._module, name)
        if not callable(fn):
            return fn

        def timed(*args, **kwargs):
            self.calls[name] += 1
            t = time.perf_counter()
            result = fn(*args, **kwargs)
            self.seconds[name] += time.perf_counter() - t
            if hasattr(result, "__next__"):
                return self._drain(name, result)
            return result
        return timed

    def _drain(self, name, gen):
        while True:
            t = time.perf_counter()
            try:
                item = next(gen)
            except StopIteration:
                self.seconds[name] += time.perf_counter() - t
                return
            self.seconds[name] += time.perf_counter() - t
            yield item


def children_cpu() -> float:
    """CPU seconds of this process's ended children (the site's worker processes)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed_build(store, out, label):
    timed = TimedQueries(real_queries)
    wall, cpu, child = time.perf_counter(), time.process_time(), children_cpu()
    home = build_site(store, out, queries=timed)
    wall, cpu, child = time.perf_counter() - wall, time.process_time() - cpu, children_cpu() - child
    query_s = sum(timed.seconds.values())
    print(f"{label:<38} wall {wall:8.2f} s  cpu {cpu + child:8.2f} s   target <= {TARGET_S:.0f} s  "
          f"ratio {wall / TARGET_S:5.2f}  {'OK' if wall <= TARGET_S else 'OVER'}")
    if child:
        # the per-build work ran in worker processes: their query calls are timed there, not here
        print(f"    in worker processes (cpu) {child:8.2f} s   (TORCHCONFORM_SITE_WORKERS=1 itemises their queries)")
        print(f"    in this process (cpu)     {cpu:8.2f} s")
    for name in sorted(timed.seconds, key=timed.seconds.get, reverse=True):
        if timed.seconds[name] >= 0.01:
            print(f"    {name:<24} {timed.seconds[name]:8.2f} s  ({timed.calls[name]} calls)")
    print(f"    {'site (rendering, writing)':<24} {wall - query_s:8.2f} s{'  (wall, incl. waiting for workers)' if child else ''}")
    return home, wall


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--builds", type=int, default=30)
    p.add_argument("--n", type=int, default=SEED_TOTAL, help="outcomes per build")
    p.add_argument("--db", help="SQLite file to (re)use; default a temporary one")
    p.add_argument("--out", help="site folder; default a temporary one (emptied first)")
    p.add_argument("--phases", default="cold,warm,new",
                   help="cold: fresh folder; warm: again, nothing changed; new: one more build on top")
    args = p.parse_args(argv)
    phases = args.phases.split(",")

    tmp = Path(tempfile.mkdtemp(prefix="tc-site-bench-"))
    db = Path(args.db) if args.db else tmp / "bench.db"
    out = Path(args.out) if args.out else tmp / "site"
    store = open_store(str(db))
    have = len(real_queries.list_builds(store))
    if have < args.builds:
        t = time.perf_counter()
        write_builds(store, args.builds - have, args.n, prefix=f"bench{have}")
        print(f"wrote {args.builds - have} builds of {args.n:,} outcomes in {time.perf_counter() - t:.1f} s (not timed)")
    builds = real_queries.list_builds(store)
    print(f"builds {len(builds)}, outcomes {sum(b['results'] for b in builds):,}, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    walls = {}
    if "cold" in phases:
        shutil.rmtree(out, ignore_errors=True)
        home, walls["cold"] = timed_build(store, out, "cold: every build read and rendered")
    if "warm" in phases:
        home, walls["warm"] = timed_build(store, out, "warm: nothing changed, all kept")
    store.close()
    if "new" in phases:
        # on a copy of the store, so the benchmark's database keeps its 30 builds
        copy = tmp / "nightly.db"
        for suffix in ("", "-wal"):
            if Path(str(db) + suffix).exists():
                shutil.copyfile(str(db) + suffix, str(copy) + suffix)
        with open_store(str(copy)) as nightly:
            write_builds(nightly, 1, args.n, prefix=f"nightly-{int(time.time())}", drift=0.02)
            home, walls["new"] = timed_build(nightly, out, "nightly: one new build, the rest kept")
        for suffix in ("", "-wal", "-shm"):
            Path(str(copy) + suffix).unlink(missing_ok=True)

    html = sorted(out.rglob("*.html"), key=lambda f: f.stat().st_size)
    data = sorted((out / "data").rglob("*.js"), key=lambda f: f.stat().st_size)
    home_size = (out / "index.html").stat().st_size
    site_bytes = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"home page             {home_size / 1024:8.1f} kB  target <= 300 kB   ratio {home_size / HOME_LIMIT:.2f}   "
          f"{'OK' if home_size <= HOME_LIMIT else 'OVER'}")
    print(f"largest page          {html[-1].stat().st_size / 1024:8.1f} kB  {html[-1].relative_to(out)}")
    print(f"largest lazy data     {data[-1].stat().st_size / 1024:8.1f} kB  {data[-1].relative_to(out)} "
          f"(loaded on demand by the page's script, inlined in no page)")
    # messages + repro commands of every failed/backend-skipped test: index.js + chunks per build
    base = out / "data" / "failures"
    folders = [f for f in base.iterdir() if f.is_dir()] if base.is_dir() else []
    if folders:
        per_build = [sum(f.stat().st_size for f in d.iterdir()) for d in folders]
        chunk = max((f.stat().st_size for d in folders for f in d.iterdir() if f.name != "index.js"), default=0)
        index = max((d / "index.js").stat().st_size for d in folders)
        print(f"failure data          {sum(per_build) / len(per_build) / 1024:8.1f} kB per build (mean; the build page "
              f"loads it all), {sum(per_build) / 2**20:.1f} MB for {len(folders)} builds; a test's history loads "
              f"per failing build <= {(index + chunk) / 1024:.1f} kB (index {index / 1024:.1f} kB + one chunk)")
    print(f"site                  {site_bytes / 2**20:8.1f} MB in {sum(1 for _ in out.rglob('*'))} files, "
          f"{len(html)} pages")
    if args.out:
        print(f"kept {out}")
    # the temporary folder holds only what --db / --out did not place elsewhere
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if max(walls.values(), default=0) <= TARGET_S and home_size <= HOME_LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
