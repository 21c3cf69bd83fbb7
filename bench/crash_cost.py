#!/usr/bin/env python
"""What one crash costs, with and without the fork server (collectors/forkserver.py).

    .venv/bin/python bench/crash_cost.py [--workdir DIR] [--files 10] [--tests 3000] [--crashes 6]
        [--import torch.testing._internal.common_device_type]

On a generated tree (bench/crash_tree.py; each file imports what an upstream test file
does) it measures:
1. collection, per worker: a process that sets refdev up and collects every file
   (``pytest --collect-only`` with the plugin): wall time and peak RSS;
2. the cost of one crash: the same tree run with ``-n 2`` on refdev twice per mode, once
   calm (the crashing tests pass) and once with ``--crashes`` segfaults; cost =
   (crashing wall - calm wall) / crashes, for ``--tc-fork-server off`` (xdist replaces
   the worker, which collects every file again) and ``on``; plus how often each file was
   collected, and the fork server's own recovery times.

The machine's load average is printed: figures are comparable only on an idle machine.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import crash_tree  # noqa: E402

BASE = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-p", "no:randomly"]


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHCONFORM_", "PYTEST_XDIST"))}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def collection(root: Path, paths: list[str]) -> tuple[float, float, int]:
    """One worker's collection: refdev set up, every file imported and collected."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "print(round(time.perf_counter() - t, 3), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
            "p.returncode, p.stdout.strip().splitlines()[-1] if p.stdout.strip() else '')")
    cmd = [sys.executable, "-c", code, *BASE, "--collect-only", "--rootdir", str(root), *paths, "--tc-device", "refdev"]
    out = subprocess.run(cmd, cwd=root, env=_env(), capture_output=True, text=True, check=True).stdout.split(None, 3)
    return float(out[0]), int(out[1]) / 1024, out[3] if len(out) > 3 else ""


def run(root: Path, paths: list[str], mode: str, calm: bool, work: Path) -> dict:
    log = work / f"collect-{mode}-{int(calm)}.log"
    recovery = work / f"recovery-{mode}-{int(calm)}.jsonl"
    jsonl = work / f"out-{mode}-{int(calm)}.jsonl"
    for p in (log, recovery, jsonl):
        p.unlink(missing_ok=True)
    cmd = [*BASE, "--rootdir", str(root), *paths, "--tc-device", "refdev", "-n", "2", "--max-worker-restart", "1000",
           "--tc-timeout", "120", "--tc-fork-server", mode, "--tc-jsonl", str(jsonl)]
    env = _env(**{crash_tree.COLLECT_LOG_ENV: log, crash_tree.CALM_ENV: "1" if calm else "0",
                  "TORCHCONFORM_FORK_RECOVERY_LOG": recovery})
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"pytest failed ({proc.returncode}): {proc.stdout[-2000:]}")
    collections_per_file = collections.Counter(line.split()[1] for line in log.read_text().splitlines())
    rec = [json.loads(line)["seconds"] for line in recovery.read_text().splitlines()] if recovery.exists() else []
    crashes = sum(1 for line in jsonl.read_text().splitlines() if '"outcome": "crash"' in line)
    return {"wall": wall, "cpu": cpu, "collections": sum(collections_per_file.values()), "crashes": crashes, "recovery": rec,
            "internalerror": "INTERNALERROR" in proc.stdout}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a new temporary one)")
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--tests", type=int, default=3000)
    ap.add_argument("--crashes", type=int, default=6)
    ap.add_argument("--import", dest="heavy", default="torch.testing._internal.common_device_type",
                    help="what each generated file imports, like an upstream test file ('' for nothing)")
    args = ap.parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="crash-cost-")).resolve()
    if REPO in work.parents or work == REPO:
        raise SystemExit(f"--workdir {work} is inside the repository; use a scratch folder outside it")
    root = work / "tree"
    only_segfaults = dict({kind: 0 for kind in crash_tree.SHARES}, segv=args.crashes)
    crash_tree.generate(str(root), args.tests, files=args.files, classes=5, counts=only_segfaults,
                        heavy_import=args.heavy)
    paths = sorted(p.name for p in root.glob("test_gen*.py"))
    print(f"tree: {root}: {args.tests} tests in {len(paths)} files (each imports {args.heavy or 'nothing'}), "
          f"{args.crashes} segfaults; load average {os.getloadavg()[0]:.2f}")
    wall, rss, last = collection(root, paths)
    print(f"collection per worker (refdev set up + {len(paths)} files): {wall:.1f} s, peak RSS {rss:.0f} MiB ({last})")
    for mode in ("off", "on"):
        calm = run(root, paths, mode, True, work)
        crashy = run(root, paths, mode, False, work)
        cost = (crashy["wall"] - calm["wall"]) / max(1, crashy["crashes"])
        cpu_cost = (crashy["cpu"] - calm["cpu"]) / max(1, crashy["crashes"])
        rec = crashy["recovery"]
        extra = (f"; fork server recovery median {statistics.median(rec) * 1000:.0f} ms, max {max(rec) * 1000:.0f} ms"
                 if rec else "")
        print(f"fork server {mode:3}: calm {calm['wall']:.1f} s, with {crashy['crashes']} crashes {crashy['wall']:.1f} s "
              f"-> {cost:.2f} s per crash (CPU: calm {calm['cpu']:.0f} s, crashing {crashy['cpu']:.0f} s, "
              f"{cpu_cost:.2f} CPU s per crash); files collected {calm['collections']} / {crashy['collections']} times"
              f"{extra}; INTERNALERROR: {'yes' if crashy['internalerror'] else 'no'}"
              f" (load average {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
