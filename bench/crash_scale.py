#!/usr/bin/env python
"""Scale by simulation: a crash-heavy build of 150,000 generated tests in one run.

    .venv/bin/python bench/crash_scale.py [--workdir DIR] [--tests 150000] [--files 60] [-n 2]
        [--timeout 2] [--memory-limit-mb 512] [--db DB] [--build B]

1. Generates (bench/crash_tree.py) an upstream-like tree into a scratch folder outside
   the repository: ``--tests`` fast tests in ``--files`` files, classes named as
   ``instantiate_device_type_tests`` names them, with a known truth per test: passes, fails,
   eligibility and backend skips, about 1 % segfaults, 0.2 % aborts, 0.2 % hangs past the
   per-test timeout, 0.2 % memory hogs past ``--memory-limit-mb``, and a few tests that print
   megabytes.
2. Runs it with ``torchconform run --suite upstream -n 2`` on refdev into one build,
   sampling the peak RSS of the pytest controller, its xdist workers and their forked test
   processes, and collecting the fork server's recovery times.
3. Exports the build as JUnit and ingests it again (timed: ingest), gates the build against
   the previous build of its series (else against that re-ingested copy) (timed: gate) and
   generates the site (timed: site).
4. Prints: outcomes stored vs generated, lost / duplicated / misclassified (each by its
   truth: crashes naming their signal, hogs the limit), wall time, crashes and their median
   / p95 recovery, peak RSS, and the load average (the figures are comparable only on an
   otherwise idle machine).

Targets (docs/seed-scale.md): equal, 0 lost/duplicated/misclassified, wall <= 25 min on 2
cores, recovery median <= 2 s, controller <= 1 GiB.  Exit status 1 when the truth is not met.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import crash_tree  # noqa: E402
from proc_rss import TreeRss, pytest_child_of  # noqa: E402

TC = [sys.executable, "-m", "torchconform"]


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHCONFORM_", "PYTEST_XDIST"))}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def timed(cmd, cwd, env=None) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run([*TC, *map(str, cmd)], cwd=cwd, env=env or _env(), capture_output=True, text=True)
    return time.perf_counter() - start, proc


def p95(values):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(0.95 * (len(values) - 1))))] if values else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/torchconform-crash-scale", help="scratch folder outside the repository")
    ap.add_argument("--tests", type=int, default=150_000)
    ap.add_argument("--files", type=int, default=60)
    ap.add_argument("--classes", type=int, default=10, help="classes per file")
    ap.add_argument("-n", "--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=2.0, help="per-test timeout (the hangs' cost), seconds")
    ap.add_argument("--memory-limit-mb", type=int, default=512)
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--db", default=None, help="results store (default WORKDIR/crash-scale.db)")
    ap.add_argument("--build", default=None, help="build name (default crash-scale-<UTC time>)")
    args = ap.parse_args(argv)

    work = Path(args.workdir).resolve()
    if work == REPO or REPO in work.parents:
        raise SystemExit(f"--workdir {work} is inside the repository; use a scratch folder outside it")
    work.mkdir(parents=True, exist_ok=True)
    src = work / "checkout"
    db = args.db or str(work / "crash-scale.db")
    build = args.build or "crash-scale-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")

    t = time.perf_counter()
    truth = crash_tree.generate(str(src / "test"), args.tests, files=args.files, classes=args.classes,
                                seed=args.seed, hog_mib=4 * args.memory_limit_mb)
    kinds = collections.Counter(outcome for outcome, _ in truth.values())
    print(f"generated {len(truth)} tests in {args.files} files under {src} in {time.perf_counter() - t:.1f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))

    names = ",".join(f"test_gen{f:03d}" for f in range(args.files) if (src / "test" / f"test_gen{f:03d}.py").exists())
    collect_log, recovery_log = work / f"{build}.collections", work / f"{build}.recovery.jsonl"
    jsonl = work / f"{build}.jsonl"
    cmd = [*TC, "run", "--suite", "upstream", "--pytorch-src", str(src), "--files", names, "-n", str(args.workers),
           "--timeout", f"{args.timeout:g}", "--memory-limit-mb", str(args.memory_limit_mb), "--db", db,
           "--build", build, "--jsonl", str(jsonl)]
    env = _env(**{crash_tree.COLLECT_LOG_ENV: collect_log, "TORCHCONFORM_FORK_RECOVERY_LOG": recovery_log})
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with TreeRss(pytest_child_of(proc.pid), every=1.0) as rss:
        out, _ = proc.communicate()
    wall = time.perf_counter() - start
    load_end = os.getloadavg()
    log = Path(str(jsonl)[:-len(".jsonl")] + ".log")
    log_text = log.read_text(errors="replace") if log.exists() else ""
    print(out.rstrip()[-1500:])
    if proc.returncode != 0:
        print(f"run failed: exit status {proc.returncode}")

    from torchconform.db.read_rows import iter_outcomes
    from torchconform.db.opening import open_store

    with open_store(db if "://" in db else f"sqlite:///{db}", create=False) as store:
        outcomes = list(iter_outcomes(store, build))
    result = crash_tree.compare(truth, crash_tree.stored_by_id(outcomes, "test/"))
    crashes = sum(1 for o in outcomes if o.outcome in ("crash", "timeout"))
    recovery = [json.loads(line)["seconds"] for line in recovery_log.read_text().splitlines()] \
        if recovery_log.exists() else []
    collected = collections.Counter(line.split()[1] for line in collect_log.read_text().splitlines()) \
        if collect_log.exists() else collections.Counter()

    # ingest (the build exported and read back), gate, site
    xml = work / f"{build}.xml"
    export_s, p = timed(["export", "--build", build, "--format", "junit", "--db", db, "--out", xml], work)
    ingest_s, p_ingest = timed(["ingest", xml, "--build", build + "-roundtrip", "--db", db], work)
    gate_s, p_gate = timed(["gate", "--build", build, "--baseline", "latest", "--db", db], work)
    baseline = "the previous build of its series"
    if p_gate.returncode == 2:   # no earlier build in the series: against the re-ingested copy
        gate_s, p_gate = timed(["gate", "--build", build, "--baseline", build + "-roundtrip", "--db", db], work)
        baseline = "its re-ingested copy (no earlier build in its series)"
    site_s, p_site = timed(["site", "--out", work / "site", "--db", db], work)

    print()
    print(f"outcomes stored {result['stored']} of {result['generated']} generated: lost {result['lost']}, "
          f"duplicated {result['duplicated']}, extra {result['extra']}, misclassified {result['misclassified']}")
    if any(result["examples"].values()):
        print("  examples: " + json.dumps(result["examples"])[:2000])
    print(f"INTERNALERROR in pytest's output: {'yes' if 'INTERNALERROR' in log_text else 'no'}; "
          f"xdist worker replacements: {log_text.count('replacing crashed worker')}")
    print(f"wall time of the run: {wall / 60:.1f} min ({len(truth) / wall:.0f} tests/s) with -n {args.workers}")
    if recovery:
        print(f"crashes and timeouts: {crashes}; recovery (a dead test process to the next one ready): "
              f"median {statistics.median(recovery):.3f} s, p95 {p95(recovery):.3f} s, max {max(recovery):.3f} s "
              f"({len(recovery)} recoveries)")
    else:
        print(f"crashes and timeouts: {crashes}; no fork server recoveries logged")
    per_file = sorted(set(collected.values()))
    print(f"collections per file: {per_file} (one per xdist worker: {per_file == [args.workers]})")
    workers = sorted(rss.children.values(), reverse=True)
    print(f"peak RSS: controller {rss.root:.0f} MiB, xdist workers {', '.join(f'{w:.0f}' for w in workers[:4])} MiB, "
          f"a forked test process {rss.grandchild:.0f} MiB (shared pages counted)")
    print(f"export {export_s:.1f} s; ingest {ingest_s:.1f} s (exit {p_ingest.returncode}); "
          f"gate vs {baseline} {gate_s:.1f} s (exit {p_gate.returncode}); site {site_s:.1f} s (exit {p_site.returncode})")
    for label, pp in (("ingest", p_ingest), ("gate", p_gate), ("site", p_site)):
        if pp.returncode not in (0, 1):
            print(f"  {label}: {(pp.stderr or pp.stdout).strip()[-500:]}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in load_end)}")
    ok = (result["stored"] == result["generated"] and not any(result[k] for k in ("lost", "duplicated", "extra",
                                                                                     "misclassified")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
