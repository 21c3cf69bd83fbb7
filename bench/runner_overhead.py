#!/usr/bin/env python
"""Runner overhead: the same fixed ops selection with plain pytest and with the
torchconform plugin, and the plugin's -n 2 speedup.

    .venv/bin/python bench/runner_overhead.py [--device refdev] [--ops a,b,...] [-k EXPR] [--repeat 3]
                                             [--dispatch-watch]

Plain pytest gets the device the way a hand-written conftest would (a tiny
``-p`` plugin calling ``torchconform.refdev.load()`` and PYTORCH_TESTING_DEVICE_ONLY_FOR);
the plugin run adds classification, the watchdog and the JSON-lines sink.
Prints wall times (best of --repeat), the plugin/plain ratio (target <= 1.03) and
the serial / -n 2 speedup (target >= 1.8x on 2 cores).  Figures are only
meaningful on an otherwise idle machine.

``--dispatch-watch`` adds the serial plugin run with the dispatcher observer on for every
test (collectors/dispatchwatch.py; TORCHCONFORM_DISPATCH_WATCH=always, as a backend with a
boxed CPU fallback has it) and with it off (=0): the ratio to plain pytest (target <= 1.05)
and whether both runs stored the same outcomes (the observer must never change a test;
host_only, which only the observer can decide on some backends, set aside).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "suites" / "ops" / "test_ops.py"

LOADER = '''
def pytest_configure(config):
    from torchconform import refdev
    refdev.load()
'''


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd, env) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the whole process tree).  CPU time is the
    steadier overhead figure on a shared machine; speedup needs wall time."""
    start, cpu0 = time.perf_counter(), _child_cpu()
    proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed, cpu = time.perf_counter() - start, _child_cpu() - cpu0
    if proc.returncode not in (0, 1):
        sys.exit(f"runner_overhead: command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return elapsed, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="refdev", choices=("refdev", "cpu"))
    ap.add_argument("--ops", default="", help="OpInfo names (default: the quick selection)")
    ap.add_argument("-k", dest="keyword", default="",
                    help="pytest -k expression (default: none, the whole quick selection; a small subset such as "
                         "'test_compare_cpu_ and not grad' runs faster but is dominated by the start-up every "
                         "process pays, which no parallel runner can share)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dispatch-watch", action="store_true",
                    help="also measure the dispatcher observer on every test, and compare outcomes with it off")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="tc-bench-"))
    (tmp / "tc_bench_loader.py").write_text(LOADER)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHCONFORM_", "PYTORCH_TESTING_"))}
    base_env.update(TORCHCONFORM_SELECTION="quick", TORCHCONFORM_DEVICE=args.device)
    if args.ops:
        base_env["TORCHCONFORM_OPS"] = args.ops
    common = [sys.executable, "-m", "pytest", str(SUITE), "-q", "-p", "no:cacheprovider", "-o", "addopts=",
              "--rootdir", str(REPO)] + (["-k", args.keyword] if args.keyword else [])

    plain_env = dict(base_env, PYTORCH_TESTING_DEVICE_ONLY_FOR=args.device,
                     PYTHONPATH=os.pathsep.join([str(tmp), base_env.get("PYTHONPATH", "")]))
    plain = common + ["-p", "no:torchconform"] + (["-p", "tc_bench_loader"] if args.device == "refdev" else [])
    plugin = common + ["--tc-device", args.device]
    # A failure a declared trait may explain is rerun at the end with the trait off (a child
    # pytest): more tests run, not overhead on the same tests, so the ratio leaves it out.
    base_env["TORCHCONFORM_TRAIT_RERUNS"] = "0"

    def best(cmd, env, label):
        walls, cpus = [], []
        for i in range(args.repeat):
            jsonl = tmp / f"{label.replace(' ', '_')}-{i}.jsonl"
            extra = ["--tc-jsonl", str(jsonl)] if "--tc-device" in cmd else []
            wall, cpu = timed(cmd + extra, env)
            walls.append(wall)
            cpus.append(cpu)
            print(f"  {label:<22} run {i + 1}: {wall:7.2f} s wall, {cpu:7.2f} s CPU", flush=True)
        return min(walls), min(cpus)

    print(f"runner overhead on {args.device}: selection quick" + (f", -k {args.keyword!r}" if args.keyword else "")
          + (f", ops {args.ops}" if args.ops else ""))
    t_plain, c_plain = best(plain, plain_env, "plain pytest")
    t_plugin, c_plugin = best(plugin, base_env, "pytest + torchconform")
    t_par, c_par = best(plugin + ["-n", "2"], base_env, "torchconform -n 2")
    if args.dispatch_watch:
        t_obs, c_obs = best(plugin, dict(base_env, TORCHCONFORM_DISPATCH_WATCH="always"), "observer on")
        best(plugin, dict(base_env, TORCHCONFORM_DISPATCH_WATCH="0"), "observer off")
        same, total, differ = _same_outcomes(tmp / "observer_on-0.jsonl", tmp / "observer_off-0.jsonl")
    load = os.getloadavg()[0]
    print(f"plain pytest            {t_plain:8.2f} s wall  {c_plain:8.2f} s CPU")
    print(f"with torchconform       {t_plugin:8.2f} s wall  {c_plugin:8.2f} s CPU   "
          f"ratio {t_plugin / t_plain:5.3f} wall, {c_plugin / c_plain:5.3f} CPU  (target <= 1.03)")
    print(f"with torchconform -n 2  {t_par:8.2f} s wall  {c_par:8.2f} s CPU   "
          f"speedup {t_plugin / t_par:4.2f}x  (target >= 1.8x on 2 idle cores)")
    if args.dispatch_watch:
        print(f"observer on every test  {t_obs:8.2f} s wall  {c_obs:8.2f} s CPU   "
              f"ratio {t_obs / t_plain:5.3f} wall, {c_obs / c_plain:5.3f} CPU  (target <= 1.05)")
        print(f"outcomes with and without the observer: {same} of {total} identical"
              + ("" if not differ else "; differ: " + ", ".join(differ[:5])))
    print(f"load average now {load:.1f} on {os.cpu_count()} CPUs" + ("  (machine busy: wall figures unreliable)"
                                                                      if load > 0.5 * (os.cpu_count() or 1) else ""))
    return 0


def _same_outcomes(a: Path, b: Path) -> tuple[int, int, list[str]]:
    """Tests whose (outcome, kind, missing_op) agree between two JSON-lines runs; a
    host_only kind counts as a plain pass (only an observer decides it on some devices)."""
    def read(path):
        got = {}
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if "test_id" in rec and "outcome" in rec:
                kind = "" if rec.get("kind") == "host_only" else rec.get("kind", "")
                got[rec["test_id"]] = (rec["outcome"], kind, rec.get("missing_op", ""))
        return got
    left, right = read(a), read(b)
    differ = sorted(t for t in left.keys() | right.keys() if left.get(t) != right.get(t))
    return len(left.keys() | right.keys()) - len(differ), len(left.keys() | right.keys()), differ


if __name__ == "__main__":
    sys.exit(main())
