"""One sweep of the model zoo: select, shard, skip what is stored, run, store as it goes.

``run_sweep(SweepOptions)`` is what ``torchconform sweep --suite models``
calls; tests and bench/ call it directly.  Results are stored one model at a
time (one transaction each), so a sweep killed at any point leaves whole
models behind and ``--resume`` finishes exactly the rest.
"""
from __future__ import annotations

import contextlib
import signal
import socket
import sys
import threading
from dataclasses import dataclass, field

from torchconform.core.breakdown import breakdown, format_breakdown
from torchconform.config import db_url
from torchconform.errors import UserError
from torchconform.suites.models import catalog
from torchconform.suites.models.check import SUITE, VARIANTS, test_id
from torchconform.db.runstate import shard_label
from torchconform.sweep import engines, history, shards
from torchconform.sweep.progress import Progress
from torchconform.sweep.protocol import Settings, Task
from torchconform.core.profile import available_profiles, load_profile, shipped_profile_for
from torchconform.db import counts, locks
from torchconform.db.model_ops import stored
from torchconform.db.opening import open_store


@dataclass
class SweepOptions:
    build: str
    selection: str = "quick"
    device: str = ""                 # "" = the profile's device
    profile: str = ""                # "" = the profile named like the device (refdev by default)
    shards: int = 1
    shard: int = 0
    engine: str = "local"
    ray_address: str = ""
    resume: bool = False
    workers: int = 1
    db: str = ""
    variants: tuple = VARIANTS
    compile_backend: str = ""
    timeout: float = 600.0
    memory_limit_mb: int = 0
    threads: int = 1
    warm_calls: int = 1              # calls after the first that time a passing run warm
    devices: int = 0                 # 0 = ask the backend how many devices there are
    command: str = ""
    retrace: bool = False            # trace every model's operator sets even where the store has them
    progress_stream: object = None
    notes: list = field(default_factory=list)


@dataclass
class SweepReport:
    build: str
    run_id: int
    selected: int                    # models in this shard
    skipped: int                     # models the build already had (resume)
    ran: int
    outcomes: list
    breakdown: dict                  # this run's outcomes
    build_breakdown: dict            # the build's whole models suite (earlier runs included)
    replaced_workers: int = 0
    rescheduled: int = 0             # Ray: tasks run again because their node died
    ran_on: dict = field(default_factory=dict)  # model id -> the worker that ran it (last)


def resolve_profile(device: str, profile: str):
    """The backend profile and device type: ``--profile`` wins, else the device's shipped one
    (skiplists/torchvulkan/ is device vulkan), else the one ``run`` or ``backend init`` wrote
    for it (.torchconform/profiles/<device>.yaml, skiplists/backend_setup.py)."""
    import os

    if not profile and device:
        generated = os.path.join(".torchconform", "profiles", f"{device}.yaml")   # backend_setup.GENERATED_DIR
        profile = shipped_profile_for(device) or (os.path.abspath(generated) if os.path.exists(generated) else "")
        if not profile:
            raise UserError(f"no backend profile for device {device!r}; run `torchconform backend init {device} "
                            f"--module MODULE` (or pass --profile NAME_OR_PATH; shipped: "
                            f"{', '.join(available_profiles())})")
    profile = profile or "refdev"
    prof = load_profile(profile)
    return prof, (device or prof.device)


def plan(all_ids, opts: SweepOptions, store, build: str):
    """(models of this shard, tasks still to run, number of models already stored)."""
    durations = history.per_model(history.earlier_durations(store, SUITE, exclude_build=build))
    mine = shards.select(all_ids, opts.shards, opts.shard, durations)
    stored = history.stored_test_ids(store, build, SUITE)
    tasks, complete = [], 0
    for model_id in mine:
        missing = tuple(v for v in opts.variants if test_id(model_id, v) not in stored)
        if not missing:
            complete += 1
        elif len(missing) < len(opts.variants) and not opts.resume:
            raise UserError(f"build {build!r} already has results for {model_id}; pass --resume to finish "
                            "the build or choose another --build name")
        else:
            tasks.append(Task(model_id=model_id, variants=missing))
    # Longest first (by earlier builds): the last model to finish is a short
    # one, so workers run out of work at nearly the same time.
    tasks.sort(key=lambda t: (-durations.get(t.model_id, 0.0), t.model_id))
    if complete and not opts.resume:
        raise UserError(f"build {build!r} already has results for {complete} of these models; pass --resume "
                        "to finish the build or choose another --build name")
    return mine, tasks, complete


class SweepInterrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT ended the sweep in order: finished models are stored, the run
    is ``interrupted``, the workers are gone; ``--resume`` finishes the build."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _StopOnSignal:
    """The SIGTERM/SIGINT handler of a sweep: raises SweepInterrupted in the main thread,
    except while a finished model is being stored (then right after its commit, so it is
    kept whole); later signals are ignored (they would cut the orderly end short)."""

    def __init__(self):
        self.signum: int | None = None
        self.storing = False

    def __call__(self, signum, frame):
        if self.signum is None:
            self.signum = signum
            if not self.storing:
                raise SweepInterrupted(signum)

    def check(self) -> None:
        if self.signum is not None:
            raise SweepInterrupted(self.signum)


@contextlib.contextmanager
def stop_on_signals():
    stop = _StopOnSignal()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signals reach the main thread only
        return
    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def run_sweep(opts: SweepOptions) -> SweepReport:
    import torch

    bad = [v for v in opts.variants if v not in VARIANTS]
    if bad or not opts.variants:
        raise UserError(f"unknown variant(s) {', '.join(bad) or '(none)'}; choose from {', '.join(VARIANTS)}")
    shards.check_shard(opts.shards, opts.shard)
    prof, device = resolve_profile(opts.device, opts.profile)
    all_ids = catalog.select(opts.selection, opts.notes)
    engine = engines.make(opts.engine, opts, prof, device)
    engine.connect()  # an unreachable cluster is a user error before anything is stored

    store = open_store(db_url(opts.db or None))
    label = shard_label(opts.shard, opts.shards)
    try:
        with stop_on_signals() as stop:
            # Plan first: a refused sweep (results already there, no --resume) stores nothing.
            plan(all_ids, opts, store, opts.build)
            # One live sweep of these models per build: a second one (a --resume while
            # this one runs) is refused instead of running the rest twice.
            with locks.held(store, opts.build, locks.holder_name(SUITE, opts.shard, opts.shards)) as lock:
                # Again under the lock: what a sweep that ended meanwhile stored is not run twice.
                mine, tasks, complete = plan(all_ids, opts, store, opts.build)
                if not opts.retrace:
                    _mark_traced(store, tasks, torch.__version__)
                store.ensure_build(opts.build, append=True, torch_version=torch.__version__, device=device,
                                   profile=prof.name, backend=prof.backend_module or device)
                run_id = store.start_run(opts.build, suite=SUITE, selection=opts.selection, shard=label,
                                         host=socket.gethostname(), command=opts.command,
                                         planned=sum(len(t.variants) for t in tasks))
                report = _run(opts, engine, store, run_id, lock, stop, prof, device, mine, tasks, complete)
                # The build is whole again once this shard's models are all stored: the earlier
                # runs that did not finish (killed, interrupted) were resumed, not lost.
                wanted = {test_id(m, v) for m in mine for v in opts.variants}
                if wanted <= history.stored_test_ids(store, opts.build, SUITE):
                    store.mark_resumed(opts.build, SUITE, shard=label or None)
            return report
    finally:
        store.close()


def _mark_traced(store, tasks, torch_version: str) -> None:
    """Tell each task which operator sets the store has (db/model_ops.py): the worker
    traces only the others (its own torch and library versions decide, not ours)."""
    have = stored(store, [t.model_id for t in tasks], torch_version)
    for task in tasks:
        task.traced = have.get(task.model_id, ())


def _run(opts, engine, store, run_id, lock, stop, prof, device, mine, tasks, complete) -> SweepReport:
    settings = Settings(device=device, profile=prof.path or prof.name, variants=tuple(opts.variants),
                        compile_backend=opts.compile_backend, timeout=opts.timeout,
                        memory_limit_mb=opts.memory_limit_mb, threads=opts.threads,
                        warm_calls=opts.warm_calls, store_url=store.url, run_id=run_id)
    progress = Progress(len(tasks), stream=opts.progress_stream or sys.stderr)
    collected: list = []
    ran_on: dict = {}
    variants_of = {t.model_id: t.variants for t in tasks}

    def on_result(result) -> None:
        if lock.lost.is_set():
            raise UserError(f"another sweep took the lock on build {opts.build!r} over (this one stalled for "
                            "over a minute); this one stopped: let that one finish the build")
        # Store first: once this returns the model survives a kill of the sweep.
        wanted = {test_id(result.model_id, v) for v in variants_of.get(result.model_id, ())}
        outcomes = [o for o in result.outcomes if o.test_id in wanted]
        if not engine.writes_results:
            stop.storing = True
            try:
                store.add_outcomes(run_id, outcomes)
            finally:
                stop.storing = False
        collected.extend(outcomes)
        ran_on[result.model_id] = result.worker
        progress.update(outcomes)
        stop.check()  # a signal that came while storing ends the sweep now

    status = 2  # an error (a UserError, a bug) ends the run as interrupted
    try:
        engine.run(tasks, settings, on_result)
        status = 0
    except KeyboardInterrupt as exc:
        status = 128 + getattr(exc, "signum", signal.SIGINT)
        raise
    finally:
        progress.close()
        store.finish_run(run_id, status)

    whole = counts.summary_by(store, opts.build, "suite").get(SUITE) or breakdown(opts.build, [])
    return SweepReport(build=opts.build, run_id=run_id, selected=len(mine), skipped=complete,
                       ran=len(tasks), outcomes=collected, breakdown=breakdown(opts.build, collected),
                       build_breakdown=whole, replaced_workers=getattr(engine, "replaced", 0),
                       rescheduled=getattr(engine, "rescheduled", 0), ran_on=ran_on)


def render(report: SweepReport) -> str:
    head = (f"sweep of build {report.build}: {report.selected} models in this shard, "
            f"{report.skipped} already stored, {report.ran} run; the build's models suite:")
    return head + "\n" + format_breakdown(report.build_breakdown)
