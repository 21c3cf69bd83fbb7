"""The body of one Ray task: run one model on the worker's device and store its outcomes.

A Ray task writes to the store itself (SQLite on one machine, PostgreSQL across
machines), one outcome per transaction as each run ends, so that the driver is
not the bottleneck of a wide sweep and a worker that dies loses only the run it
was in.  Every write goes through ``db.once.add_outcomes_once`` (a run stored
twice, because Ray ran the model again after its node died, is stored once) and
is retried on a lost connection.

Per Ray worker process, once: the backend is brought up, the memory limit is
set (the address space may grow by ``Settings.memory_limit_mb`` beyond its size
at the first task) and the store is opened.  A model that runs out of memory
stores ``crash`` outcomes for its unfinished runs and ends the worker process
(``EXIT_OOM``), like the local engine's workers: Ray starts a fresh one.
"""
from __future__ import annotations

import os
import sys
import time

from torchconform.sweep.protocol import Settings, Task
from torchconform.core.profile import load_profile
from torchconform.db.models import runs
from torchconform.db.once import add_outcomes_once, retrying, stored_outcomes
from torchconform.db.opening import open_store
from torchconform.suites.models import backend
from torchconform.suites.models.check import run_model, test_id
from torchconform.sweep import failures
from torchconform.sweep.worker import limit_memory

# What a task reports before its result (the driver's clocks: ray_engine._Flight).
RUNNING = "torchconform:task-running"   # the task's body began in a worker
STARTED = "torchconform:model-started"  # the backend is up; the model begins

_STORES: dict = {}
_STATE = {"limited": False, "prepared": set()}


def _store(url: str):
    if url not in _STORES:
        _STORES[url] = open_store(url)
    return _STORES[url]


def _write(settings: Settings, model_id: str, outcomes: list) -> tuple[list, list]:
    def attempt():
        return add_outcomes_once(_store(settings.store_url), settings.run_id, outcomes, lock_key=model_id)

    def dispose(exc):
        # A lost connection leaves dead ones in the pool: start from fresh ones.
        store = _STORES.pop(settings.store_url, None)
        if store is not None:
            store.close()

    return retrying(attempt, on_retry=dispose)


def stored_variants(store, run_id: int, model_id: str, variants) -> dict:
    """variant -> the outcome the run's build already has for it (a rerun of a lost task)."""
    from sqlalchemy import select

    with store.read() as conn:
        build_id = conn.execute(select(runs.c.build_id).where(runs.c.id == run_id)).scalar_one()
        have = stored_outcomes(conn, build_id, [test_id(model_id, v) for v in variants])
    return {o.variant: o for o in have}


def _bring_up(settings: Settings):
    import torch

    profile = load_profile(settings.profile)
    torch.set_num_threads(max(1, settings.threads))
    if settings.profile not in _STATE["prepared"]:
        backend.prepare(profile)
        _STATE["prepared"].add(settings.profile)
    if not _STATE["limited"]:
        limit_memory(settings.memory_limit_mb)
        _STATE["limited"] = True
    return profile


def worker_name() -> str:
    """``ray:<node id, 8 digits>:<pid>``: which node and process ran a task."""
    import ray

    return f"ray:{ray.get_runtime_context().get_node_id()[:8]}:{os.getpid()}"


def run_task(task: Task, settings: Settings):
    """Run the variants of ``task`` the build lacks, storing each outcome as it ends.
    A Ray streaming task: yields ``RUNNING`` as its body begins, ``STARTED`` once the
    backend is up and the model begins, then ``{"worker": worker_name(), "outcomes":
    [...]}``: every outcome of the task's variants (stored now or before) as dicts."""
    yield RUNNING
    variants = tuple(task.variants or settings.variants)
    have = stored_variants(_store(settings.store_url), settings.run_id, task.model_id, variants)
    todo = tuple(v for v in variants if v not in have)
    result = [have[v] for v in variants if v in have]
    if not todo:
        yield {"worker": worker_name(), "outcomes": [o.to_dict() for o in result]}
        return
    profile = _bring_up(settings)
    yield STARTED
    done, current, start = set(), [""], time.monotonic()

    def on_outcome(outcome):
        stored, already = _write(settings, task.model_id, [outcome])
        result.extend(stored or already)
        done.add(outcome.variant)

    try:
        run_model(task.model_id, settings.device, profile, variants=todo,
                  compile_backend=settings.compile_backend or None, seed=settings.seed, traced=task.traced,
                  warm_calls=settings.warm_calls,
                  emit=lambda v: current.__setitem__(0, v), on_outcome=on_outcome)
    except MemoryError:
        lost = failures.crash(task.model_id, todo, done, current[0], settings.device, worker_name(),
                              failures.describe_exit(failures.EXIT_OOM, settings.memory_limit_mb),
                              time.monotonic() - start)
        _write(settings, task.model_id, lost)
        sys.stderr.write(f"torchconform ray worker {os.getpid()}: out of memory in {task.model_id}\n")
        sys.stderr.flush()
        os._exit(failures.EXIT_OOM)
    yield {"worker": worker_name(), "outcomes": [o.to_dict() for o in result]}
