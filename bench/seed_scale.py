#!/usr/bin/env python
"""The seed-scale per-build run: one build from every suite on refdev, then its gate,
site and ingest, with the figures the seed's evaluation asks for.

    .venv/bin/python bench/seed_scale.py --pytorch-src SRC [--files a,b] [-n 2] [--db DB] [--build B]
        [--shards N --shard I] [--resume] [--report-only] [--ratios-only] [--ratio-files a,b] [--suite-set all]

Steps (each can be left out):
1. ``torchconform run --suite-set all`` (ops full, modules full, upstream files of SRC, models full)
   into build B, sampling the memory of every pytest controller and worker; with
   ``--shards N --shard I`` only that shard (run the others later, on this or other
   machines, with the same --build and --db: the build is complete when all have run); a run
   longer than a session is interrupted (SIGTERM) and finished later with ``--resume``.
2. When the build is complete (``--report-only`` goes straight here): the seed-style
   breakdown, outcomes against the 150,000 target, wall time and tests per second per
   suite, then ``gate --baseline latest``, ``site`` and an ``export``/``ingest`` round trip
   of this real build, each timed.
3. Ratios on the same upstream files (``--ratio-files``, default test_indexing):
   plain pytest vs pytest + torchconform, serial (target <= 1.03x), and the plugin's
   ``-n 2`` speedup over serial (target >= 1.9x on 2 cores).

Figures are only meaningful on an otherwise idle machine; the load average is printed.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from proc_rss import Sampler, table  # noqa: E402
from runner_overhead import LOADER, timed  # noqa: E402

TC = [sys.executable, "-m", "torchconform"]
SEED_TARGET = 150_000
DEFAULT_FILES = "test_ops,test_binary_ufuncs,test_reductions,test_indexing,test_tensor_creation_ops"


class MemorySampler(Sampler):
    """Peak resident memory of every pytest controller of ``build`` (a process running
    ``-m pytest ... --tc-build build``) and of its workers (its children), sampled from /proc
    every ``every`` seconds."""

    def __init__(self, build: str, every: float = 0.5):
        super().__init__(every)
        self.build = build  # only this build's pytest processes: others may run on the machine
        self.controller: dict[str, int] = {}   # suite -> peak KiB
        self.workers: dict[str, dict[int, int]] = {}  # suite -> {worker pid: peak KiB}

    def sample(self) -> None:
        procs = table(argv=True)
        for pid, (_, rss, argv) in procs.items():
            if "pytest" not in argv or "--tc-suite" not in argv or "--tc-build" not in argv:
                continue
            if argv[argv.index("--tc-build") + 1] != self.build:
                continue
            suite = argv[argv.index("--tc-suite") + 1]
            self.controller[suite] = max(self.controller.get(suite, 0), rss)
            for child, (ppid, child_rss, _) in procs.items():
                if ppid == pid:
                    peaks = self.workers.setdefault(suite, {})
                    peaks[child] = max(peaks.get(child, 0), child_rss)


def tc(args, **kw):
    return subprocess.run(TC + [str(a) for a in args], cwd=kw.pop("cwd", REPO), capture_output=True, text=True, **kw)


def seconds(run: dict) -> float:
    if not run["started"] or not run["ended"]:
        return 0.0
    parse = lambda s: datetime.fromisoformat(s.rstrip("Z"))  # noqa: E731
    return (parse(run["ended"]) - parse(run["started"])).total_seconds()


def run_forwarding_sigterm(cmd, **kw) -> tuple[int, str, bool]:
    """Run ``cmd``, passing a SIGTERM sent to this script on to it (a session's stop, a CI
    job's cancel): the run then ends in order, keeping what finished.  Returns its exit
    status, its standard output, and whether a SIGTERM came."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, **kw)
    terminated = []

    def forward(signum, frame):
        terminated.append(signum)
        proc.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        out, _ = proc.communicate()
    finally:
        signal.signal(signal.SIGTERM, previous)
    return proc.returncode, out, bool(terminated)


def run_build(args) -> bool:
    """The run step; False when it was stopped by SIGTERM (resume it later)."""
    cmd = ["run", "--suite-set", args.suite_set, "--build", args.build, "--db", args.db, "-n", args.workers,
           "--pytorch-src", args.pytorch_src, "--files", args.files]
    if args.shards > 1:
        cmd += ["--shards", args.shards, "--shard", args.shard]
    if args.resume:
        cmd += ["--resume"]
    print(f"seed_scale: torchconform {' '.join(map(str, cmd))}", flush=True)
    start = time.perf_counter()
    with MemorySampler(args.build) as memory, open(Path(args.workdir) / "run.log", "a") as log:
        code, out, terminated = run_forwarding_sigterm(TC + [str(a) for a in cmd], cwd=args.workdir, stderr=log)
    wall = time.perf_counter() - start
    print(out)
    print(f"run: {wall:.0f} s wall, exit {code} (progress in {Path(args.workdir) / 'run.log'})"
          + ("; stopped by SIGTERM: finish it with --resume" if terminated else ""))
    for suite in sorted(memory.controller):
        workers = memory.workers.get(suite, {})
        print(f"  peak memory {suite:<9} controller {memory.controller[suite] / 1024:7.0f} MiB, workers "
              + ", ".join(f"{kib / 1024:.0f}" for kib in sorted(workers.values(), reverse=True)[:8]) + " MiB")
    return not terminated


def report(args) -> bool:
    from torchconform.core.breakdown import format_breakdown
    from torchconform.config import db_url
    from torchconform.db import counts, read_builds
    from torchconform.db.opening import open_store

    with open_store(db_url(args.db), create=False) as store:
        info = read_builds.build_info(store, args.build)
        total = read_builds.summary(store, args.build)
        by_suite = counts.summary_by(store, args.build, "suite")
    print(format_breakdown(total, top=10))
    print(f"outcomes {total['total']:,} (target {SEED_TARGET:,}: {'met' if total['total'] >= SEED_TARGET else 'NOT met'})")
    for suite, b in by_suite.items():
        runs = [r for r in info["runs"] if r["suite"] == suite]
        wall = sum(seconds(r) for r in runs)
        rate = b["total"] / wall if wall else 0.0
        print(f"  {suite:<9} {b['total']:>8,} outcomes in {len(runs)} run(s), {wall:8.0f} s wall, {rate:7.1f} tests/s")
    if not info["complete"]:
        print("build incomplete (shards or plan steps still to run): gate, site and ingest wait for it")
        return False
    work = Path(args.workdir)
    for label, cmd in (("gate", ["gate", "--build", args.build, "--baseline", "latest", "--allow-no-baseline",
                                 "--reruns", "0", "--db", args.db, "--summary", work / "gate.md"]),
                       ("site", ["site", "--out", work / "site", "--db", args.db]),
                       ("export", ["export", "--build", args.build, "--format", "junit", "--db", args.db,
                                   "--out", work / "build.xml"])):
        start = time.perf_counter()
        proc = tc(cmd, cwd=work)
        print(f"{label:<7} {time.perf_counter() - start:7.2f} s  exit {proc.returncode}"
              + (f"  {proc.stderr.strip().splitlines()[-1]}" if proc.returncode not in (0, 1) and proc.stderr else ""))
    copy = work / "ingest-copy.db"
    copy.unlink(missing_ok=True)
    start = time.perf_counter()
    proc = tc(["ingest", work / "build.xml", "--build", args.build, "--db", copy], cwd=work)
    print(f"ingest  {time.perf_counter() - start:7.2f} s  exit {proc.returncode}  ({proc.stdout.strip()})")
    return True


def ratios(args) -> None:
    """Plain pytest vs the plugin, and -n 2 vs serial, on the same upstream files."""
    from torchconform.suites.upstream import pytest_args

    tmp = Path(tempfile.mkdtemp(prefix="tc-seed-"))
    (tmp / "tc_bench_loader.py").write_text(LOADER)
    files = pytest_args(args.pytorch_src, files=args.ratio_files, check_version=False)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHCONFORM_", "PYTORCH_TESTING_"))}
    common = [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    plain_env = dict(base, PYTORCH_TESTING_DEVICE_ONLY_FOR="refdev", PYTORCH_TESTING_DEVICE_FOR_CUSTOM="privateuse1",
                     PYTHONPATH=os.pathsep.join([str(tmp), base.get("PYTHONPATH", "")]))
    # Plain pytest: the same files on refdev the way a hand-written conftest would run them,
    # without any of our plugins (the upstream suite's hooks are part of what is measured).
    ours = {"torchconform.suites.upstream.plugin", "torchconform.collectors.skiplist_plugin"}
    bare = [a for i, a in enumerate(common) if a not in ours and not (a == "-p" and common[i + 1] in ours)]
    plain = timed(bare + ["-p", "no:torchconform", "-p", "tc_bench_loader"], plain_env)
    serial = timed(common + ["--tc-device", "refdev", "--tc-jsonl", str(tmp / "serial.jsonl")], base)
    parallel = timed(common + ["--tc-device", "refdev", "--tc-jsonl", str(tmp / "par.jsonl"), "-n", "2"], base)
    print(f"ratios on {args.ratio_files}:")
    print(f"  plain pytest            {plain[0]:8.1f} s wall {plain[1]:8.1f} s CPU")
    print(f"  pytest + torchconform   {serial[0]:8.1f} s wall {serial[1]:8.1f} s CPU   ratio "
          f"{serial[0] / plain[0]:.3f} wall, {serial[1] / plain[1]:.3f} CPU (target <= 1.03)")
    print(f"  torchconform -n 2       {parallel[0]:8.1f} s wall                speedup {serial[0] / parallel[0]:.2f}x "
          "(target >= 1.9x)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pytorch-src", required=True, help="PyTorch source checkout (its test/ files are run)")
    ap.add_argument("--files", default=DEFAULT_FILES, help=f"upstream files (default {DEFAULT_FILES})")
    ap.add_argument("--suite-set", default="all", help="plan name or file (default all)")
    ap.add_argument("-n", dest="workers", type=int, default=2)
    ap.add_argument("--db", default="", help="results store (default WORKDIR/seed.db)")
    ap.add_argument("--build", default="", help="build name (default seed-<UTC time>)")
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "tc-seed-scale"))
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--shard", type=int, default=0)
    ap.add_argument("--resume", action="store_true",
                    help="finish --build where an earlier (interrupted) invocation stopped: `run --resume`")
    ap.add_argument("--report-only", action="store_true", help="skip the run: report on --build")
    ap.add_argument("--ratios-only", action="store_true", help="only the plugin/plain and -n 2 ratios")
    ap.add_argument("--no-ratios", action="store_true")
    ap.add_argument("--ratio-files", default="test_indexing")
    args = ap.parse_args(argv)
    args.pytorch_src = os.path.abspath(args.pytorch_src)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    args.db = os.path.abspath(args.db or str(Path(args.workdir) / "seed.db"))
    args.build = args.build or datetime.utcnow().strftime("seed-%Y%m%dT%H%M%SZ")
    print(f"seed_scale: build {args.build}, store {args.db}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    if not args.ratios_only:
        if not args.report_only and not run_build(args):
            return 128 + signal.SIGTERM
        report(args)
    if not args.no_ratios:
        ratios(args)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
