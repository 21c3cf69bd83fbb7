#!/usr/bin/env python
"""Cost of the perf suite: one `torchconform run --suite perf` into a scratch store, and the wall
time it took per operator.

    .venv/bin/python bench/perf_suite.py [--device refdev] [--selection quick|full] [--ops a,b,...]
                                         [--calls N] [--refdev-profile P] [--db URL]
                                         [--variants eager,compiled]

Prints the run's wall time (start-up, collection and teardown included), the tests' own time
(the stored durations: set-up, timing, leak check), both per operator x dtype test, the five most
expensive tests, and the timed calls per test (2 sides x (1 + N) per direction).  With the
compiled variant (``--variants eager,compiled``: TORCHCONFORM_PERF_VARIANTS), also each variant's
own time per operator and the compiled first calls (compile + first result, device and CPU).
Figures depend on the machine's load: the load average is printed beside them.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="refdev")
    p.add_argument("--selection", default="quick", choices=("quick", "full"))
    p.add_argument("--ops", default=None, help="OpInfo names (default: the selection)")
    p.add_argument("--calls", type=int, default=None, help="warm calls per side (TORCHCONFORM_PERF_CALLS; default 5)")
    p.add_argument("--refdev-profile", default=None)
    p.add_argument("--db", default=None, help="store to keep the run in (default: a scratch SQLite file)")
    p.add_argument("--variants", default=None,
                   help="perf variants to time: eager, compiled (TORCHCONFORM_PERF_VARIANTS; default eager)")
    args = p.parse_args(argv)

    from torchconform.core.outcome import SKIPPED
    from torchconform.db import perf as perf_db
    from torchconform.db import read_rows
    from torchconform.db.opening import open_store

    with tempfile.TemporaryDirectory(prefix="tc-perf-bench-") as tmp:
        db = args.db or f"sqlite:///{tmp}/bench.db"
        build = f"perf-bench-{int(time.time())}"
        cmd = [sys.executable, "-m", "torchconform", "run", "--suite", "perf", "--selection", args.selection,
               "--device", args.device, "--build", build, "--db", db, "--jsonl", f"{tmp}/run.jsonl"]
        if args.ops:
            cmd += ["--ops", args.ops]
        if args.refdev_profile:
            cmd += ["--refdev-profile", args.refdev_profile]
        env = dict(os.environ)
        if args.calls:
            env["TORCHCONFORM_PERF_CALLS"] = str(args.calls)
        if args.variants:
            env["TORCHCONFORM_PERF_VARIANTS"] = args.variants
        load_before = os.getloadavg()
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        load_after = os.getloadavg()
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
            return proc.returncode
        with open_store(db, create=False) as store:
            outcomes = list(read_rows.iter_outcomes(store, build))
            rows = perf_db.build_rows(store, build)
    tests = len(outcomes)
    timed = {o.op for o in outcomes if o.outcome not in SKIPPED}
    own = sum(o.duration for o in outcomes)
    calls = rows[0]["calls"] if rows else 0
    print(f"perf suite, {args.selection}{' --ops ' + args.ops if args.ops else ''} on {args.device}: {tests} tests "
          f"(operator x dtype x variant), {len(timed)} operators timed, {len(rows)} timings (forward + backward)")
    print(f"  wall {wall:.1f} s in all: {wall / max(tests, 1):.2f} s per test; the tests' own time {own:.1f} s: "
          f"{own / max(tests, 1):.2f} s per test (start-up and collection {max(wall - own, 0):.1f} s)")
    print(f"  timed calls per timing: 2 sides x (1 first + {calls} warm) = {2 * (1 + calls)}")
    for o in sorted(outcomes, key=lambda o: -o.duration)[:5]:
        print(f"  {o.duration:7.2f} s  {o.op} {o.dtype} ({o.outcome})")
    _print_variants(outcomes, rows)
    print(f"  load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
          f"({os.cpu_count()} CPUs)")
    return 0


def _print_variants(outcomes, rows) -> None:
    """Per variant (test_perf: eager, test_perf_compiled: compiled): tests, their own time per
    operator, and for compiled the first calls (compile + first result) per side."""
    by_variant = {}
    for o in outcomes:
        by_variant.setdefault(o.variant, []).append(o.duration)
    if len(by_variant) < 2 and "perf_compiled" not in by_variant:
        return
    for variant, durations in sorted(by_variant.items()):
        print(f"  variant {variant}: {len(durations)} tests, own time {sum(durations):.1f} s, "
              f"{sum(durations) / len(durations):.2f} s per operator x dtype (max {max(durations):.2f} s)")
    compiled = [r for r in rows if r.get("variant") == "compiled"]
    if compiled:
        dev = sorted(r["dev_first"] for r in compiled if r["dev_first"] is not None)
        cpu = sorted(r["cpu_first"] for r in compiled if r["cpu_first"] is not None)
        print(f"  compiled first call (compile + first result): device median {dev[len(dev) // 2]:.3f} s, "
              f"max {dev[-1]:.3f} s; CPU median {cpu[len(cpu) // 2]:.3f} s, max {cpu[-1]:.3f} s "
              f"({len(compiled)} operators)")


if __name__ == "__main__":
    sys.exit(main())
