#!/usr/bin/env python
"""What the distributed suite costs on refdev, and what refccl costs over plain gloo.

1. Rank start-up: launching 2 ranks (suites/distributed/launch.py) with a program that
   does nothing until every rank has reported, median of --startup-runs, for
   --device refdev (refccl) and cpu (gloo); split into "to the program" (process
   start, imports, device set-up, init_process_group) and the rest (report, teardown).
2. Time per suite part: one ``torchconform run --suite distributed --device refdev
   --refdev-profile full -n 1 --no-db``, its outcome records' durations summed per API
   group (collective_*, ddp, fsdp, dtensor, tensor_parallel, overlap).  --skip-suite
   leaves it out (it takes about 5 minutes).
3. Collective bandwidth on 2 ranks: all_reduce and all_gather_into_tensor of float32
   tensors of 1, 4, 16, 64 MB, refdev tensors (refccl: zero-copy CPU aliases handed to
   gloo) against CPU tensors on a plain gloo group, interleaved in the same ranks (a
   loaded machine's noise falls on both alike); median time over --repeats after
   --warmup, algorithmic bandwidth (all_reduce: the tensor's bytes; all_gather: the
   output's bytes, nccl-tests' convention), and the refdev/gloo time ratio (target
   <= 1.2x; also the ratio of the fastest calls).  Then the per-call cost of a 1-element
   all_reduce on plain gloo, on refccl with CPU tensors (the Python ProcessGroup
   trampoline alone: under "cpu:gloo,refdev:refccl" c10d makes refccl's Python group the
   whole world group, CPU tensors included) and on refccl with refdev tensors
   (trampoline + one alias per tensor), on the 2 ranks and on a 1-rank group (no peer to
   wait for), and cpu_alias / refccl's _alias alone: where a gap would come from.

    .venv/bin/python bench/distributed.py [--skip-suite] [--repeats N] [--startup-runs N]
        [--sizes-mb 1,4,16,64] [--world-size 2]

The rank side of this file (``noop``, ``bandwidth``) is imported by the ranks under the
module name ``tc_bench_distributed``, from a temporary folder on their PYTHONPATH that
links to this file (the bench folder itself cannot go on PYTHONPATH: bench/site.py
would shadow the standard library's ``site``).  Figures are only meaningful on an
otherwise idle machine; the load average is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RANK_MODULE = "tc_bench_distributed"
TARGET = 1.2
MB = 1 << 20
# A fixed per-call cost is read as the best round (the least disturbed by other load).
TINY_ROUNDS = 7
SOLO_ROUNDS = 40


# -- the rank side (runs in every rank, imported as tc_bench_distributed) ---------------
def noop(ctx):
    """The trivial program: when it ran (the launcher's time to reach a program)."""
    return {"at": time.time()}


def _median(xs):
    return statistics.median(xs) if xs else 0.0


def bandwidth(ctx):
    """Per size and collective, each call timed on three paths in turn, every rank
    starting together; returns the raw times:
      gloo        CPU tensors on a plain gloo group (what ``--device cpu`` ranks use)
      refccl_cpu  CPU tensors on the world group, which under "cpu:gloo,refdev:refccl" is
                  refccl's Python ProcessGroup (c10d lets a Python group stand for the
                  whole group): the trampoline without an alias (overhead parts only)
      refdev      refdev tensors on the world group: trampoline + one alias per tensor
    """
    import torch
    import torch.distributed as dist

    world = ctx.world_size
    sizes = [int(s) for s in ctx.params["sizes_mb"]]
    repeats, warmup = int(ctx.params["repeats"]), int(ctx.params["warmup"])
    calls = int(ctx.params["tiny_calls"])
    gloo = dist.new_group(backend="gloo")
    # every rank makes every 1-rank group (new_group is collective), then keeps its own
    solo_gloo = [dist.new_group([r], backend="gloo") for r in range(world)][ctx.rank]
    solo_world = [dist.new_group([r]) for r in range(world)][ctx.rank]
    paths = {"gloo": ("cpu", gloo), "refccl_cpu": ("cpu", None), "refdev": (ctx.device, None)}
    solo = {"gloo": ("cpu", solo_gloo), "refccl_cpu": ("cpu", solo_world), "refdev": (ctx.device, solo_world)}
    out = {"all_reduce": {}, "all_gather": {}, "tiny": {}, "solo": {}, "alias": {},
           "groups": {name: type(group if group is not None else dist.group.WORLD).__name__
                      for name, (_, group) in paths.items()}}

    def timed(fn):
        dist.barrier()
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    def runs(make, names):
        """make(device, group) -> a zero-argument collective; {path: [seconds...]}, interleaved."""
        fns = {name: make(*paths[name]) for name in names}
        times = {name: [] for name in names}
        for i in range(warmup + repeats):
            for name in (names if i % 2 == 0 else names[::-1]):  # no path always goes first
                seconds = timed(fns[name])
                if i >= warmup:
                    times[name].append(seconds)
        return times

    for mb in sizes:
        n = mb * MB // 4

        def reduce_call(dev, group, n=n):
            x = torch.zeros(n, dtype=torch.float32, device=dev)  # zeros: sums stay 0, no inf/denormals
            return lambda: dist.all_reduce(x, group=group)

        def gather_call(dev, group, n=n):
            x = torch.zeros(n, dtype=torch.float32, device=dev)
            y = torch.empty(world * n, dtype=torch.float32, device=dev)
            return lambda: dist.all_gather_into_tensor(y, x, group=group)

        out["all_reduce"][str(mb)] = runs(reduce_call, ["gloo", "refdev"])
        out["all_gather"][str(mb)] = runs(gather_call, ["gloo", "refdev"])

    # Per-call cost: a 1-element all_reduce, many calls back to back (no barrier between
    # them; the collective itself keeps the ranks in step), on the world ...
    def per_call(cases, rounds, n, sync):
        """{path: [seconds per call, one per round]}, the paths interleaved round by round."""
        xs = {name: torch.zeros(1, dtype=torch.float32, device=dev) for name, (dev, _) in cases.items()}
        names, res = list(cases), {name: [] for name in cases}
        for name in names:
            for _ in range(50):
                dist.all_reduce(xs[name], group=cases[name][1])
        for round_ in range(rounds):
            for name in (names if round_ % 2 == 0 else names[::-1]):
                x, group = xs[name], cases[name][1]
                if sync:
                    dist.barrier()
                t = time.perf_counter()
                for _ in range(n):
                    dist.all_reduce(x, group=group)
                res[name].append((time.perf_counter() - t) / n)
        return res

    out["tiny"] = per_call(paths, TINY_ROUNDS, calls, sync=True)

    # ... and on a group of this rank alone: the whole per-call path (c10d front end,
    # dispatcher, the backend; for refccl the Python trampoline and, for refdev tensors,
    # the alias) without waiting on a peer, so a fixed cost is not lost in network noise.
    out["solo"] = per_call(solo, SOLO_ROUNDS, max(calls // 3, 1), sync=False)

    # The alias refccl makes per tensor per call, alone (no communication).
    if ctx.device_type != "cpu":
        from torchconform import refdev
        from torchconform.refdev import distributed as refccl

        x = torch.zeros(1, device=ctx.device)
        ext = refdev._extension()
        for label, fn in (("cpu_alias", ext.cpu_alias), ("refccl._alias", refccl._alias)):
            k = 20000
            t = time.perf_counter()
            for _ in range(k):
                fn(x)
            out["alias"][label] = (time.perf_counter() - t) / k
    return out


# -- the launching side ------------------------------------------------------------------
class Ranks:
    """launch.run_ranks for one device, with this file importable by the ranks."""

    def __init__(self, world_size: int):
        self.world_size = world_size
        self.folder = tempfile.mkdtemp(prefix="tc-bench-dist-")
        link = Path(self.folder) / f"{RANK_MODULE}.py"
        try:
            link.symlink_to(Path(__file__).resolve())
        except OSError:
            shutil.copy(Path(__file__).resolve(), link)

    def close(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def env(self, device: str) -> dict:
        env = {"TORCHCONFORM_DEVICE": device, "TORCHCONFORM_PROFILE": device,
               "PYTHONPATH": os.pathsep.join(p for p in (self.folder, os.environ.get("PYTHONPATH", "")) if p)}
        if device == "refdev":
            env["TORCHCONFORM_REFDEV_PROFILE"] = "full"
        return env

    def run(self, device: str, func: str, params: dict, timeout: float = 900.0) -> list[dict]:
        from torchconform.core.profile import load_profile
        from torchconform.suites.distributed import launch

        device_env = load_profile(device).distributed.get("device_env", "")
        return launch.run_ranks(f"{RANK_MODULE}:{func}", params, size=self.world_size, timeout=timeout,
                                device_env=device_env, extra_env=self.env(device))


def startup(ranks: Ranks, runs: int) -> dict:
    print(f"\n1. rank start-up ({ranks.world_size} ranks, trivial program, median of {runs})")
    print(f"  {'device':<8} {'all reported':>13} {'to program':>11} {'report+exit':>12}   runs (s)")
    medians = {}
    for device in ("cpu", "refdev"):
        total, reach = [], []
        for _ in range(runs):
            t_wall, t0 = time.time(), time.perf_counter()
            reports = ranks.run(device, "noop", {})
            total.append(time.perf_counter() - t0)
            reach.append(max(r["values"]["at"] for r in reports) - t_wall)
        medians[device] = _median(total)
        print(f"  {device:<8} {_median(total):11.2f} s {_median(reach):9.2f} s {_median(total) - _median(reach):10.2f} s"
              f"   {', '.join(f'{t:.2f}' for t in total)}")
    print(f"  refdev/cpu start-up ratio {medians['refdev'] / medians['cpu']:.2f}x "
          f"(+{medians['refdev'] - medians['cpu']:.2f} s per test: loading refdev and registering refccl)")
    return medians


GROUPS = ("ddp", "fsdp", "dtensor", "tensor_parallel", "overlap")


def _group(name: str) -> str:
    base = re.sub(r"\[.*$", "", name).removeprefix("test_")
    if base.startswith("collective_"):
        return base
    for g in GROUPS:
        if base == g or base.startswith(g + "_"):
            return g
    return base


def suite_parts(world_size: int) -> None:
    print("\n2. time per suite part: torchconform run --suite distributed --device refdev --refdev-profile full "
          "-n 1 --no-db --json")
    with tempfile.TemporaryDirectory(prefix="tc-bench-dist-suite-") as tmp:
        jsonl = Path(tmp) / "outcomes.jsonl"
        log = Path(tmp) / "run.log"
        cmd = [str(REPO / ".venv" / "bin" / "torchconform"), "run", "--suite", "distributed", "--device", "refdev",
               "--refdev-profile", "full", "-n", "1", "--no-db", "--json", "--jsonl", str(jsonl),
               "--world-size", str(world_size)]
        if not os.path.exists(cmd[0]):
            cmd[:1] = [sys.executable, "-m", "torchconform"]
        t0 = time.perf_counter()
        with open(log, "w") as err:
            proc = subprocess.run(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=err, text=True)
        wall = time.perf_counter() - t0
        if not jsonl.exists():
            tail = log.read_text(errors="replace")[-1500:]
            print(f"  run exited {proc.returncode} without outcome records; its output ends:\n{tail}")
            return
        groups: dict[str, list[float]] = {}
        outcomes: dict[str, int] = {}
        for line in jsonl.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("type") != "outcome":
                continue
            groups.setdefault(_group(rec.get("name") or rec.get("test_id", "")), []).append(float(rec.get("duration") or 0))
            outcomes[rec.get("outcome", "?")] = outcomes.get(rec.get("outcome", "?"), 0) + 1
    total = sum(sum(v) for v in groups.values())
    count = sum(len(v) for v in groups.values())
    print(f"  exit {proc.returncode}, {wall:.0f} s wall, {count} tests "
          f"({', '.join(f'{k} {v}' for k, v in sorted(outcomes.items()))}), {total:.0f} s in tests")
    print(f"  {'part':<28} {'tests':>5} {'seconds':>9} {'per test':>9} {'share':>6}")
    for name, durs in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {name:<28} {len(durs):5d} {sum(durs):9.1f} {sum(durs) / len(durs):9.2f} "
              f"{100 * sum(durs) / total if total else 0:5.1f}%")
    print(f"  outside the tests (collection, pytest, plugin): {wall - total:.0f} s")


def _rank_median(reports, *keys, of=_median) -> float:
    """The slowest rank's median (a collective is done when every rank is); ``of=min``: its best."""
    values = []
    for r in reports:
        v = r["values"]
        for k in keys:
            v = v[k]
        values.append(of(v))
    return max(values)


def collectives(ranks: Ranks, args) -> None:
    sizes = [int(s) for s in args.sizes_mb.split(",") if s]
    print(f"\n3. collective bandwidth, {ranks.world_size} ranks, float32, median of {args.repeats} after "
          f"{args.warmup} warm-up; refdev tensors on refccl and CPU tensors on a plain gloo group, "
          "interleaved in the same ranks")
    params = {"sizes_mb": sizes, "repeats": args.repeats, "warmup": args.warmup, "tiny_calls": args.tiny_calls}
    t0 = time.perf_counter()
    reports = ranks.run("refdev", "bandwidth", params)
    groups = reports[0]["values"]["groups"]
    print(f"  ({time.perf_counter() - t0:.0f} s for the ranks, start-up included; groups: "
          + ", ".join(f"{k} {v}" for k, v in groups.items()) + ")")
    print(f"  {'collective':<14} {'MB':>4} {'gloo ms':>9} {'refdev ms':>10} {'gloo GB/s':>10} {'refdev GB/s':>12} "
          f"{'ratio':>7} {'best-of ratio':>14}")
    ratios, best = [], []
    for coll, factor in (("all_reduce", 1), ("all_gather", ranks.world_size)):
        for mb in sizes:
            cpu = _rank_median(reports, coll, str(mb), "gloo")
            ref = _rank_median(reports, coll, str(mb), "refdev")
            nbytes = mb * MB * factor
            ratio = ref / cpu if cpu else float("nan")
            ratios.append(ratio)
            lo = _rank_median(reports, coll, str(mb), "refdev", of=min) / _rank_median(reports, coll, str(mb), "gloo", of=min)
            best.append(lo)
            label = coll if coll == "all_reduce" else "all_gather_t"
            print(f"  {label:<14} {mb:4d} {cpu * 1e3:9.2f} {ref * 1e3:10.2f} {nbytes / cpu / 1e9:10.2f} "
                  f"{nbytes / ref / 1e9:12.2f} {ratio:6.2f}x {lo:13.2f}x")
    if not ratios:
        return
    print("  (algorithmic bandwidth: all_reduce the tensor's bytes, all_gather_into_tensor the output's, "
          "over the slowest rank's median time; best-of: the ratio of the fastest calls, less disturbed by other load)")
    worst, geo = max(ratios), statistics.geometric_mean(ratios)
    within = sum(r <= TARGET for r in ratios)
    print(f"  refdev/gloo time: worst {worst:.2f}x, geometric mean {geo:.2f}x, {within} of {len(ratios)} within "
          f"{TARGET:.1f}x (target: every size within {TARGET:.1f}x: {'met' if worst <= TARGET else 'NOT met'}); "
          f"best-of: worst {max(best):.2f}x, geometric mean {statistics.geometric_mean(best):.2f}x")

    tiny = {k: _rank_median(reports, "tiny", k, of=min) for k in ("gloo", "refccl_cpu", "refdev")}
    solo = {k: _rank_median(reports, "solo", k, of=min) for k in ("gloo", "refccl_cpu", "refdev")}
    alias = reports[0]["values"]["alias"]
    print("  per-call cost of a 1-element all_reduce (best round; us per call):")
    print(f"    {'':<34} {'gloo':>8} {'refccl, cpu':>12} {'refccl, refdev':>15} {'trampoline':>11} {'alias':>7}")
    for label, t in ((f"{ranks.world_size} ranks, {TINY_ROUNDS} x {args.tiny_calls} calls", tiny),
                     (f"1-rank group, {SOLO_ROUNDS} x {max(args.tiny_calls // 3, 1)} calls", solo)):
        print(f"    {label:<34} {t['gloo'] * 1e6:8.1f} {t['refccl_cpu'] * 1e6:12.1f} {t['refdev'] * 1e6:15.1f} "
              f"{(t['refccl_cpu'] - t['gloo']) * 1e6:+11.1f} {(t['refdev'] - t['refccl_cpu']) * 1e6:+7.1f}")
    print("    (trampoline: refccl with CPU tensors over plain gloo; alias: refdev over CPU tensors on refccl; "
          "the 1-rank group has no peer to wait for, so it shows the fixed cost itself)")
    print(f"  alias alone, no communication: cpu_alias {alias.get('cpu_alias', 0) * 1e6:.2f} us, refccl._alias "
          f"{alias.get('refccl._alias', 0) * 1e6:.2f} us per tensor")
    over = solo["refdev"] - solo["gloo"]
    smallest = _rank_median(reports, "all_reduce", str(sizes[0]), "gloo")
    if over > 0.5e-6:
        cost = (f"{over * 1e6:.0f} us a call ({(solo['refccl_cpu'] - solo['gloo']) * 1e6:.0f} trampoline, "
                f"{(solo['refdev'] - solo['refccl_cpu']) * 1e6:.0f} alias), which predicts "
                f"{(smallest + over) / smallest:.3f}x at {sizes[0]} MB and less above")
    else:
        cost = "not measurable above this host's noise on the 1-rank group"
    print(f"  why: refccl copies nothing (each tensor is aliased over its own bytes); what it adds is a fixed cost "
          f"per call, the Python ProcessGroup trampoline plus one alias per tensor: {cost}; a measured ratio "
          f"beyond that is the timing noise of a loaded host (load {os.getloadavg()[0]:.1f}; more --repeats)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-suite", action="store_true", help="leave out part 2 (the suite run, about 5 minutes)")
    ap.add_argument("--skip-startup", action="store_true", help="leave out part 1")
    ap.add_argument("--skip-bandwidth", action="store_true", help="leave out part 3")
    ap.add_argument("--startup-runs", type=int, default=3, help="launches per device for part 1 (default 3)")
    ap.add_argument("--repeats", type=int, default=8, help="timed calls per size and device (default 8)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed calls before them (default 2)")
    ap.add_argument("--sizes-mb", default="1,4,16,64", help="tensor sizes in MB (default 1,4,16,64)")
    ap.add_argument("--tiny-calls", type=int, default=300, help="1-element all_reduce calls per timing (default 300)")
    ap.add_argument("--world-size", type=int, default=2)
    args = ap.parse_args(argv)
    import torch

    print(f"distributed bench: {args.world_size} ranks, torch {torch.__version__}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}")
    start = time.perf_counter()
    ranks = Ranks(args.world_size)
    try:
        if not args.skip_startup:
            startup(ranks, args.startup_runs)
        if not args.skip_suite:
            suite_parts(args.world_size)
        if not args.skip_bandwidth:
            collectives(ranks, args)
    finally:
        ranks.close()
    print(f"\nbench wall {time.perf_counter() - start:.0f} s, load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
