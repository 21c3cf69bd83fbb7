"""Ingest and query speed of the results store (issue 4's targets), printed as figures and ratios.

    python bench/ingest.py [--n 154000] [--workdir DIR] [--no-postgres]
    python bench/ingest.py --series 30    # bytes per stored result over a nightly series

Measures, each in a fresh process so peak memory is the ingest's own:
  * ingest of the synthetic seed build (bench/gen_outcomes.py) into SQLite, for the
    runner's JUnit (tc attributes) and for plain pytest JUnit (classified);
    target <= 1.2x the wall time of a raw sqlite3.executemany of the same rows (issue 20);
  * the same into PostgreSQL (a throwaway server, as in the tests); target <= 2x SQLite's;
  * peak memory of an ingest (target <= 500 MB): the storing process plus, for big
    files, the parsing process it forks (both are alive at once);
  * summary and diff queries on two such builds (target <= 1 s each);
  * with --series N: the store's bytes per result over N nightly builds (target <= 50),
    and the size a year of them would reach.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import gen_outcomes  # noqa: E402


# Issue 20's targets: an ingest's wall time against a raw executemany of the same rows, and
# PostgreSQL's ingest against SQLite's.
INGEST_VS_RAW = 1.2
PG_VS_SQLITE = 2.0
DIFF_TARGET_S = 0.5


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_ingest(xml: str, url: str, build: str) -> dict:
    """Runs in a fresh process: parse + store one file, timing each part."""
    from torchconform.db.ingest import JunitReader, ingest
    from torchconform.db.opening import open_store

    from torchconform.gcpause import no_cyclic_gc

    t0 = time.perf_counter()
    # what ingest's parsing process does, garbage collector off as there (also warms the page cache)
    with no_cyclic_gc():
        n = sum(len(tests) for tests, _, _ in JunitReader(xml).record_chunks(compact_repro=True))
    parse_s = time.perf_counter() - t0
    base_mb = _peak_mb()
    store = open_store(url)
    t1, c1 = time.perf_counter(), time.process_time()
    ingest(store, [xml], build)
    total_s, total_cpu = time.perf_counter() - t1, time.process_time() - c1
    # the parsing process's CPU (ingest parses big files in a child, see db/ingest.py)
    total_cpu += sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2])
    store.close()
    return {"outcomes": n, "parse_s": parse_s, "ingest_s": total_s, "ingest_cpu": total_cpu,
            "peak_mb": _peak_mb(), "parse_peak_mb": base_mb,
            # the forked parsing process's own peak (0 when the file was parsed in this one)
            "parser_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def child_store_only(n: int, url: str, build: str) -> dict:
    """The store's bulk path alone (no XML): Store.add_outcomes of the seed rows in 20k batches."""
    from torchconform.db.opening import open_store

    outcomes = gen_outcomes.synthetic_outcomes(n)
    store = open_store(url)
    t0, c0 = time.perf_counter(), time.process_time()
    with store.write() as conn:
        store.ensure_build(build, conn=conn)
        run = store.start_run(build, conn=conn)
        for i in range(0, n, 20_000):
            store.add_outcomes(run, outcomes[i:i + 20_000], conn=conn)
        store.finish_run(run, 0, conn=conn)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    store.close()
    return {"store_s": seconds, "store_cpu": cpu}


def child_raw_sqlite(n: int, path: str) -> dict:
    """Baseline: plain sqlite3.executemany of the same rows into the same schema: the tests,
    the distinct values (db/values.py), the results pointing at them and the build's values.
    Only the inserts are timed; finding the values is part of what the store's time pays."""
    from torchconform.db.opening import open_store
    from torchconform.db.values import digest, duration_us

    open_store(path).close()  # same tables and indexes
    outcomes = gen_outcomes.synthetic_outcomes(n)
    test_rows = [(o.test_id, o.suite, o.file, o.cls, o.name, o.op, o.variant, o.dtype) for o in outcomes]
    ids: dict[tuple, int] = {}
    result_rows = []
    for i, o in enumerate(outcomes):
        value = (o.outcome, o.kind, o.missing_op, " ".join(o.fallback_ops), o.skiplist_entry, o.device, o.message, None)
        vid = ids.setdefault(value, len(ids) + 1)
        result_rows.append((1, 1, i + 1, 1, vid, duration_us(o.duration), None, None))
    value_rows = [(vid, digest(v), *v) for v, vid in ids.items()]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    t0, c0 = time.perf_counter(), time.process_time()
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO builds (name, created, metadata) VALUES ('raw', CURRENT_TIMESTAMP, '{}')")
    conn.execute("INSERT INTO runs (build_id, started) VALUES (1, CURRENT_TIMESTAMP)")
    conn.executemany("INSERT INTO tests (test_id, suite, file, cls, name, op, variant, dtype) VALUES (?,?,?,?,?,?,?,?)",
                     test_rows)
    conn.executemany("INSERT INTO result_values (id, digest, outcome, kind, missing_op, fallback_ops, skiplist_entry, "
                     "device, message, repro) VALUES (?,?,?,?,?,?,?,?,?,?)", value_rows)
    conn.executemany("INSERT INTO results (build_id, run_id, test_pk, attempt, value_id, duration_us, max_abs_err, "
                     "max_rel_err) VALUES (?,?,?,?,?,?,?,?)", result_rows)
    conn.executemany("INSERT INTO build_values (build_id, value_id) VALUES (1, ?)", [(vid,) for vid in ids.values()])
    conn.execute("COMMIT")
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    conn.close()
    return {"raw_s": seconds, "raw_cpu": cpu}


def child_queries(url: str, xml_a: str, xml_b: str) -> dict:
    from torchconform.census import impact
    from torchconform.db import arrays
    from torchconform.dashboard.reads import READS
    from torchconform.db import read_builds, read_rows
    from torchconform.db.ingest import ingest
    from torchconform.db.opening import open_store

    store = open_store(url)
    ingest(store, [xml_a], "A")
    ingest(store, [xml_b], "B")
    from torchconform.ci.pipeline import load_records

    def read_arrays(*names):   # the diff's and the matrix's one road: the site's arrays (db/arrays.py)
        tests = arrays.TestTable.read(store, READS)
        return [arrays.BuildData.read(store, READS, name, tests)[0] for name in names]

    out = {}
    for label, fn in (("summary_s", lambda: read_builds.summary(store, "B")),
                      ("diff_s", lambda: arrays.diff(READS, *read_arrays("A", "B"))),
                      ("op_matrix_s", lambda: read_arrays("B")[0].matrix_numbers()),
                      ("leaderboard_s", lambda: impact.leaderboard(store, "B")),
                      ("latest_rows_s", lambda: sum(1 for _ in read_rows.latest_rows(store, "B"))),
                      ("iter_outcomes_s", lambda: sum(1 for _ in read_rows.iter_outcomes(store, "B"))),
                      ("gate_load_s", lambda: load_records(store, "B"))):
        fn()  # warm the page cache once, then time the second call
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        out[label] = time.perf_counter() - t0
        out[label[:-2] + "_cpu"] = time.process_time() - c0
        if label == "diff_s":
            out["diff_counts"] = result["counts"]
    store.close()
    return out


def child_series(n: int, builds: int, path: str) -> dict:
    """A nightly series: ``builds`` builds of ``n`` outcomes, each 2% different from the first
    (bench/gen_outcomes.write_builds), written one after another; the file's size after each
    (WAL checkpointed), and where the bytes are at the end (SQLite's dbstat)."""
    from torchconform.db.opening import open_store

    sizes = []
    t0 = time.perf_counter()
    with open_store(path) as store:
        for b in range(builds):
            gen_outcomes.write_builds(store, 1, n, prefix="nightly", start=b)
            with store.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            sizes.append(os.path.getsize(path))
    seconds = time.perf_counter() - t0
    conn = sqlite3.connect(path)
    try:
        tables = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    except sqlite3.OperationalError:   # an SQLite built without dbstat
        tables = {}
    n_results = conn.execute("SELECT count(*) FROM results").fetchone()[0]
    conn.close()
    return {"sizes": sizes, "results": n_results, "tables": tables, "write_s": seconds}


def report_series(r: dict, n: int, target_bytes: float = 50.0, year: int = 365) -> None:
    sizes, builds = r["sizes"], len(r["sizes"])
    per_result = sizes[-1] / r["results"]
    print(f"\n  store size of a nightly series: {builds} builds x {n} outcomes, 2% of results changing per build "
          f"(written in {r['write_s']:.0f} s)")
    print(f"    {sizes[-1] / 2**20:8.1f} MB for {r['results']:,} results = {per_result:5.1f} bytes per result "
          f"(target <= {target_bytes:.0f}: {per_result / target_bytes:.2f}x of it)")
    if builds >= 2:
        half = builds // 2
        step = (sizes[-1] - sizes[half - 1]) / (builds - half)   # bytes a build adds once tests exist
        at_year = sizes[-1] + (year - builds) * step
        print(f"    each further build adds {step / 2**20:.2f} MB ({step / n:.1f} bytes per result); "
              f"{year} builds: {at_year / 2**30:.2f} GB = {at_year / (year * n):.1f} bytes per result "
              f"(extrapolated from builds {half}-{builds})")
    top = sorted(r["tables"].items(), key=lambda kv: -kv[1])[:6]
    if top:
        print("    where the bytes are: " + ", ".join(f"{name} {b / r['results']:.1f}" for name, b in top)
              + " (bytes per result)")


def run_child(*args) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", json.dumps(args)], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench child {args[0]} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="results store ingest/query benchmark")
    p.add_argument("--n", type=int, default=gen_outcomes.SEED_TOTAL)
    p.add_argument("--workdir", help="keep generated files here (default: a temporary folder)")
    p.add_argument("--no-postgres", action="store_true")
    p.add_argument("--series", type=int, default=0, metavar="BUILDS",
                   help="only measure the store's size over a nightly series of BUILDS builds (e.g. 30, or 60 "
                        "to extrapolate a year)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        name, *rest = json.loads(args.child)
        print(json.dumps(globals()[name](*rest)))
        return 0

    work = args.workdir or tempfile.mkdtemp(prefix="tc-bench-ingest-")
    os.makedirs(work, exist_ok=True)
    if args.series:
        path = os.path.join(work, "series.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.unlink(path + suffix)
        report_series(run_child("child_series", args.n, args.series, path), args.n)
        return 0
    files = {"runner": os.path.join(work, "seed0.xml"), "plain": os.path.join(work, "seed0-plain.xml"),
             "runner_b": os.path.join(work, "seed1.xml")}
    if not all(os.path.exists(f) for f in files.values()):
        print(f"generating {args.n} outcomes x 3 files in {work} ...", flush=True)
        a = gen_outcomes.synthetic_outcomes(args.n)
        gen_outcomes.write_junit_file(files["runner"], a)
        gen_outcomes.write_plain_junit_file(files["plain"], a)
        gen_outcomes.write_junit_file(files["runner_b"], gen_outcomes.synthetic_outcomes(args.n, seed=1, drift=0.02))
    sizes = {k: os.path.getsize(v) / 1e6 for k, v in files.items()}

    def fresh(name):
        path = os.path.join(work, f"{name}.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.unlink(path + suffix)
        return path

    raw = run_child("child_raw_sqlite", args.n, fresh("raw"))
    store_only = run_child("child_store_only", args.n, fresh("store"), "S")
    ing_runner = run_child("child_ingest", files["runner"], fresh("ingest-runner"), "R")
    ing_plain = run_child("child_ingest", files["plain"], fresh("ingest-plain"), "P")
    q_sqlite = run_child("child_queries", fresh("queries"), files["runner"], files["runner_b"])

    print(f"\nresults store benchmark: {args.n} outcomes per build (seed proportions)")
    print(f"  files: runner JUnit {sizes['runner']:.0f} MB, plain pytest JUnit {sizes['plain']:.0f} MB")
    print("\n  SQLite writes                          wall s   CPU s   vs raw (CPU; ingest CPU counts its parsing process)"
          "  vs raw (wall)")
    print(f"    raw sqlite3.executemany (same rows) {raw['raw_s']:7.2f} {raw['raw_cpu']:7.2f}   1.00x")
    print(f"    Store.add_outcomes (bulk path)      {store_only['store_s']:7.2f} {store_only['store_cpu']:7.2f}   "
          f"{store_only['store_cpu'] / raw['raw_cpu']:.2f}x   (target <= 2x)")
    for label, r in (("runner JUnit", ing_runner), ("plain pytest JUnit", ing_plain)):
        print(f"    ingest {label:<20}         {r['ingest_s']:7.2f} {r['ingest_cpu']:7.2f}   "
              f"{r['ingest_cpu'] / raw['raw_cpu']:.2f}x   {r['ingest_s'] / raw['raw_s']:.2f}x   "
              f"(target <= {INGEST_VS_RAW}x raw wall: {'OK' if r['ingest_s'] <= INGEST_VS_RAW * raw['raw_s'] else 'OVER'}; "
              f"parse alone {r['parse_s']:.2f} s)")
    print("\n  peak memory of an ingest (target <= 500 MB): storing + parsing process (pages they share count twice)")
    for label, r in (("runner JUnit", ing_runner), ("plain pytest JUnit", ing_plain)):
        print(f"    {label:<20} {r['peak_mb'] + r['parser_peak_mb']:7.0f} MB   "
              f"({r['peak_mb']:.0f} + {r['parser_peak_mb']:.0f})")
    print("\n  queries on two builds (SQLite, target <= 1 s each)   wall s   CPU s")
    for k in ("summary_s", "diff_s", "op_matrix_s", "leaderboard_s"):
        print(f"    {k[:-2]:<14}                                   {q_sqlite[k]:6.2f}  {q_sqlite[k[:-2] + '_cpu']:6.2f}"
              + (f"   (issue 20: <= {DIFF_TARGET_S} s: {'OK' if q_sqlite[k] <= DIFF_TARGET_S else 'OVER'})"
                 if k == "diff_s" else ""))
    print("  one build's latest results, every field (no target; the site and the gate read these)")
    for k, what in (("latest_rows_s", "read_rows.latest_rows (plain rows)"),
                    ("iter_outcomes_s", "read_rows.iter_outcomes (Outcome objects)"),
                    ("gate_load_s", "ci.pipeline.load_records (gate dicts)")):
        print(f"    {what:<44}     {q_sqlite[k]:6.2f}  {q_sqlite[k[:-2] + '_cpu']:6.2f}")
    print(f"    diff counts: {q_sqlite['diff_counts']}")

    if not args.no_postgres:
        import pg

        server = pg.PgServer()
        try:
            server.start()
        except Exception as exc:  # no server here: say so and keep the SQLite figures
            print(f"\n  PostgreSQL: skipped ({exc})")
        else:
            # Each measurement starts from a checkpointed server, as each SQLite one starts from
            # a fresh file: what the previous one left in the buffers is not written during it.
            try:
                pg_store = run_child("child_store_only", args.n, server.new_database(checkpoint=True), "S")
                pg_ing = run_child("child_ingest", files["runner"], server.new_database(checkpoint=True), "R")
                pg_q = run_child("child_queries", server.new_database(checkpoint=True), files["runner"],
                                 files["runner_b"])
            finally:
                server.stop()
            print("\n  PostgreSQL (COPY bulk path)")
            print(f"    Store.add_outcomes          {pg_store['store_s']:6.2f} s  ({pg_store['store_s'] / raw['raw_s']:.2f}x raw "
                  f"SQLite, {pg_store['store_s'] / store_only['store_s']:.2f}x SQLite's add_outcomes)")
            ratio = pg_ing['ingest_s'] / ing_runner['ingest_s']
            print(f"    ingest runner JUnit         {pg_ing['ingest_s']:6.2f} s  peak {pg_ing['peak_mb'] + pg_ing['parser_peak_mb']:.0f} MB"
                  f"  {ratio:.2f}x SQLite's ingest (target <= {PG_VS_SQLITE}x: {'OK' if ratio <= PG_VS_SQLITE else 'OVER'})")
            for k in ("summary_s", "diff_s", "op_matrix_s", "leaderboard_s"):
                print(f"    {k[:-2]:<14} {pg_q[k]:6.2f} s")
    print(f"\n  machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; on a shared machine wall "
          "times inflate with the load, CPU times and the ratios much less")
    return 0


if __name__ == "__main__":
    sys.exit(main())
