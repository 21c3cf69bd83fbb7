"""Benchmark the model sweep: 1 vs 2 local workers, and the cost of worker isolation.

    .venv/bin/python bench/sweep.py [--device refdev] [--selection quick] [--variants eval,train,compile]

Prints:
- wall time of the selection with 1 and with 2 local workers, and the speedup
  (target >= 1.8x on 2 cores);
- the same sweep with no worker: the same driver and store writes, the
  models run one after another in one fresh process set up like a worker
  (threads, backend, device string), and the per-model overhead of
  isolation: (1-worker wall - worker start-up - in-process wall) / models,
  as a fraction of the in-process per-model time (target <= 10 %).  Worker
  start-up (importing torch and transformers, bringing the device up) is
  paid once per worker, not per model, so it is measured and shown
  separately.  The baseline runs in a fresh process, not in this one, so it
  pays the same first-use costs as a worker (each model's lazy imports,
  dynamo's first compile); the controller side's one-off imports are paid
  before any timing, in both.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from torchconform.sweep.protocol import Engine


def _cpu() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _sweep(selection, device, variants, workers, compile_backend, db, engine="local"):
    from torchconform.sweep.driver import SweepOptions, run_sweep

    start = time.perf_counter()
    label = workers if engine == "local" else engine
    report = run_sweep(SweepOptions(build=f"bench-{label}", selection=selection, device=device, engine=engine,
                                    variants=variants, workers=workers, db=db, timeout=600,
                                    compile_backend=compile_backend,
                                    progress_stream=open(os.devnull, "w")))
    return time.perf_counter() - start, report


class _InlineEngine(Engine):
    """The baseline: the same models run one after another in this process, no worker.

    Set up exactly like a sweep worker (thread count, backend, device string,
    a first tensor on the device), so the only difference left is the isolation."""
    name = "inline"

    def __init__(self, settings):
        import torch

        from torchconform.core.profile import load_profile
        from torchconform.suites.models import backend
        from torchconform.sweep.worker import device_string

        self.profile = load_profile(settings.profile)
        torch.set_num_threads(max(1, settings.threads))
        backend.prepare(self.profile)
        self.device = device_string(settings, 0, self.profile.worker_env)
        torch.empty(1, device=self.device)

    def run(self, tasks, settings, on_result) -> None:
        from torchconform.suites.models.check import run_model
        from torchconform.sweep.protocol import TaskResult

        for task in tasks:
            start = time.monotonic()
            outcomes = run_model(task.model_id, self.device, self.profile,
                                 variants=tuple(task.variants or settings.variants),
                                 compile_backend=settings.compile_backend or None, seed=settings.seed,
                                 warm_calls=settings.warm_calls)
            on_result(TaskResult(model_id=task.model_id, outcomes=outcomes, worker="inline",
                                 seconds=time.monotonic() - start))


def _warm_driver(device, selection, db):
    """Pay the once-per-process costs of the sweep's controller side (importing torch,
    transformers, the store; creating a database) before anything is timed: they are
    neither per model nor part of the isolation."""
    from torchconform.config import db_url
    from torchconform.db.opening import open_store
    from torchconform.suites.models import catalog
    from torchconform.sweep.driver import resolve_profile
    from torchconform.sweep.engines import device_count

    profile, device = resolve_profile(device, "")
    device_count(profile, device)
    catalog.select(selection)
    open_store(db_url(db)).close()


def _in_process_child(conn, selection, device, variants, compile_backend, tmp):
    """Runs in a fresh process, like a worker, so that first-use costs (lazy imports of
    each model's module, dynamo's first compile) are paid here exactly as in a worker."""
    from torchconform.sweep import driver, engines
    from torchconform.sweep.protocol import Settings

    _warm_driver(device, selection, os.path.join(tmp, "warm-inproc.db"))
    profile, dev = driver.resolve_profile(device, "")
    engine = _InlineEngine(Settings(device=dev, profile=profile.path or profile.name))
    engines.register("inproc", lambda opts, prof, device: engine)  # same driver, same store writes
    took, report = _sweep(selection, device, variants, 1, compile_backend, os.path.join(tmp, "inproc.db"), engine="inproc")
    conn.send((took, report.ran))


def _in_process(selection, device, variants, compile_backend, tmp):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_in_process_child, args=(child, selection, device, variants, compile_backend, tmp))
    proc.start()
    took, n = _receive(parent, child, proc, "in-process baseline")
    proc.join(30)
    return took, n


def _receive(parent, child, proc, what: str):
    """The child's one message; its death (EOF on the pipe) ends the bench instead of
    hanging it, which needs this process's copy of the child's end closed."""
    child.close()
    try:
        return parent.recv()
    except EOFError:
        proc.join(30)
        raise SystemExit(f"{what} process died (exit code {proc.exitcode}) before reporting") from None


def _startup(device):
    """Seconds for one worker to come up and report ready (an empty selection would skip it)."""
    import multiprocessing

    from torchconform.sweep.driver import resolve_profile
    from torchconform.sweep.protocol import Settings
    from torchconform.sweep.worker import main as worker_main

    profile, device = resolve_profile(device, "")
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    start = time.perf_counter()
    proc = ctx.Process(target=worker_main, args=(child, "bench", Settings(device=device, profile=profile.path), None))
    proc.start()
    msg = _receive(parent, child, proc, "worker start-up")
    took = time.perf_counter() - start
    parent.send(None)
    proc.join(30)
    if msg[0] != "ready":
        raise SystemExit(f"worker failed to start: {msg}")
    return took


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="refdev")
    ap.add_argument("--selection", default="quick")
    ap.add_argument("--variants", default="eval,train,compile")
    ap.add_argument("--compile-backend", default="")
    args = ap.parse_args(argv)
    variants = tuple(v for v in args.variants.split(",") if v)

    with tempfile.TemporaryDirectory() as tmp:
        # Warm caches (the device extension build, Python bytecode) so no run pays them.
        _startup(args.device)
        startup = min(_startup(args.device) for _ in range(2))
        _warm_driver(args.device, args.selection, os.path.join(tmp, "warm.db"))
        load_before = os.getloadavg()[0]
        cpu0 = _cpu()
        one, report = _sweep(args.selection, args.device, variants, 1, args.compile_backend,
                             os.path.join(tmp, "one.db"))
        cpu1 = _cpu()
        two, _ = _sweep(args.selection, args.device, variants, 2, args.compile_backend,
                        os.path.join(tmp, "two.db"))
        cpu2 = _cpu()
        inproc, n = _in_process(args.selection, args.device, variants, args.compile_backend, tmp)
        cpu3 = _cpu()
    cpu_one, cpu_two, cpu_in = cpu1 - cpu0, cpu2 - cpu1, cpu3 - cpu2

    speedup = one / two
    per_model_inproc = inproc / n
    per_model_overhead = (one - startup - inproc) / n
    print(f"models: {n} ({args.selection}), runs per model: {','.join(variants)}, device: {args.device}, "
          f"cpus: {os.cpu_count()}")
    print(f"load average before/after: {load_before:.1f} / {os.getloadavg()[0]:.1f} "
          "(wall-clock figures assume an idle machine)")
    print(f"1 worker   : {one:8.1f} s wall  {cpu_one:8.1f} s cpu")
    print(f"2 workers  : {two:8.1f} s wall  {cpu_two:8.1f} s cpu")
    print(f"speedup    : {speedup:8.2f} x   (target >= 1.8x on 2 cores)")
    print(f"in process : {inproc:8.1f} s wall  {cpu_in:8.1f} s cpu  ({per_model_inproc:.2f} s per model)")
    print(f"worker start-up, once per worker: {startup:.1f} s")
    print(f"isolation overhead per model: {per_model_overhead:+.3f} s = "
          f"{per_model_overhead / per_model_inproc:+.1%} of in-process (target <= 10 %)")
    print(f"isolation overhead incl. one start-up: {(one - inproc) / inproc:+.1%} wall, "
          f"{(cpu_one - cpu_in) / cpu_in:+.1%} cpu")
    return 0


if __name__ == "__main__":
    sys.exit(main())
