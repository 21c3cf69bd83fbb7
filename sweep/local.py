"""The local engine: N worker processes on this machine, each pinned to one device.

A worker may die at any moment (segfault, abort, out of memory, a hung
device): the controller notices through the process sentinel or the model's
deadline, records the interrupted model as ``crash`` or ``timeout``, and
starts a replacement worker on the same device index.  The sweep itself
never dies with a worker.
"""
from __future__ import annotations

import multiprocessing
import os
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait

from torchconform.core.outcome import Outcome
from torchconform.errors import UserError
from torchconform.sweep import failures
from torchconform.sweep.protocol import STARTUP_TIMEOUT, Engine, Settings, Task, TaskResult
from torchconform.sweep.worker import main as worker_main

# A worker that dies this many times in a row before reporting "ready" means
# the backend cannot start at all: stop instead of looping.
MAX_STARTUP_FAILURES = 3


@dataclass
class _Slot:
    index: int                       # slot number; also the device index it is pinned to
    device_index: int | None
    generation: int = 0
    proc: multiprocessing.Process | None = None
    conn: object = None
    ready: bool = False
    device: str = ""                 # the device string the worker reported (e.g. refdev:1)
    spawned: float = 0.0
    task: Task | None = None
    variants: tuple = ()
    current: str = ""
    done: set = field(default_factory=set)
    outcomes: list = field(default_factory=list)
    started: float = 0.0

    @property
    def name(self) -> str:
        return f"w{self.index}" + (f".{self.generation}" if self.generation else "")


class LocalEngine(Engine):
    """Worker processes on this machine; the driver stores what they report."""
    name = "local"

    def __init__(self, workers: int = 1, devices: int = 1):
        if workers < 1:
            raise UserError(f"--workers {workers} must be at least 1; pass --workers 1 or more")
        self.workers = workers
        self.devices = max(1, devices)
        self._ctx = multiprocessing.get_context("spawn")  # no forked copies of a live device runtime
        self.replaced = 0
        self._queue: deque = deque()     # tasks not yet handed to a worker

    # -- worker lifecycle ----------------------------------------------------------
    def _spawn(self, slot: _Slot, settings: Settings) -> None:
        parent, child = self._ctx.Pipe()
        slot.generation += 1 if slot.proc is not None else 0
        proc = self._ctx.Process(target=worker_main, args=(child, slot.name, settings, slot.device_index, os.getpid()),
                                 name=f"torchconform-sweep-{slot.name}", daemon=True)
        proc.start()
        child.close()
        slot.proc, slot.conn, slot.ready, slot.spawned = proc, parent, False, time.monotonic()

    def _kill(self, slot: _Slot) -> None:
        if slot.proc is not None and slot.proc.is_alive():
            slot.proc.kill()
        if slot.proc is not None:
            slot.proc.join(10)
        if slot.conn is not None:
            slot.conn.close()

    # -- the controller loop -------------------------------------------------------------
    def run(self, tasks, settings: Settings, on_result) -> None:
        queue = deque(tasks)
        self._queue = queue
        if not queue:
            return
        n = min(self.workers, len(queue))
        slots = [_Slot(index=i, device_index=(i % self.devices) if settings.device != "cpu" else None)
                 for i in range(n)]
        startup_failures = 0
        try:
            for slot in slots:
                self._spawn(slot, settings)
            while queue or any(s.task for s in slots):
                for slot in slots:
                    if slot.ready and slot.task is None and queue:
                        self._assign(slot, queue.popleft(), settings)
                live = [s for s in slots if s.proc is not None]
                ready = wait([s.conn for s in live] + [s.proc.sentinel for s in live], timeout=0.5)
                now = time.monotonic()
                for slot in live:
                    if slot.conn in ready or slot.proc.sentinel in ready:
                        self._drain_or_fail(slot, settings, on_result)
                    if not slot.proc.is_alive():
                        self._drain_or_fail(slot, settings, on_result)  # what it sent before dying
                        if not slot.ready:
                            startup_failures += 1
                            if startup_failures >= MAX_STARTUP_FAILURES:
                                raise UserError(
                                    f"sweep workers for {settings.device} died {startup_failures} times while "
                                    f"starting (it {failures.describe_exit(slot.proc.exitcode)}); "
                                    "check the device with `torchconform doctor`")
                        else:
                            startup_failures = 0
                        self._worker_died(slot, settings, on_result, respawn=bool(queue))
                    elif slot.task is not None and now - slot.started > settings.timeout:
                        self._drain_or_fail(slot, settings, on_result)
                        if slot.task is not None:
                            self._timed_out(slot, settings, on_result, respawn=bool(queue))
                    elif not slot.ready and now - slot.spawned > STARTUP_TIMEOUT:
                        raise UserError(f"a sweep worker did not bring up {settings.device} within "
                                        f"{STARTUP_TIMEOUT:g}s; check the device with `torchconform doctor`")
        finally:
            for slot in slots:
                if slot.proc is not None and slot.proc.is_alive() and slot.conn is not None:
                    try:
                        slot.conn.send(None)
                    except (OSError, ValueError):
                        pass  # the worker already exited: nothing to tell it
            deadline = time.monotonic() + 5
            for slot in slots:
                if slot.proc is not None:
                    slot.proc.join(max(0.0, deadline - time.monotonic()))
                    self._kill(slot)

    @staticmethod
    def _pending(slot: _Slot) -> bool:
        try:
            return slot.conn.poll()
        except (OSError, ValueError):
            return False

    def _assign(self, slot: _Slot, task: Task, settings: Settings) -> None:
        slot.task, slot.variants = task, tuple(task.variants or settings.variants)
        slot.current, slot.done, slot.outcomes, slot.started = "", set(), [], time.monotonic()
        slot.conn.send(task)

    def _drain_or_fail(self, slot: _Slot, settings: Settings, on_result) -> None:
        fatal = self._drain(slot, settings, on_result)
        if fatal:
            raise UserError(f"the {settings.device} backend failed to start in a sweep worker: {fatal}; "
                            "check it with `torchconform doctor`")

    def _drain(self, slot: _Slot, settings: Settings, on_result) -> str:
        """Read every message the worker has sent; returns a fatal start-up error, if any."""
        while self._pending(slot):
            try:
                msg = slot.conn.recv()
            except (EOFError, OSError):
                return ""  # the worker is gone; the caller sees it through is_alive()
            kind = msg[0]
            if kind == "ready":
                slot.ready, slot.device = True, msg[1]["device"]
            elif kind == "fatal":
                return msg[1]
            elif kind == "start":
                slot.current = msg[2]
            elif kind == "outcome":
                outcome = Outcome.from_dict(msg[2])
                slot.outcomes.append(outcome)
                slot.done.add(outcome.variant)
            elif kind == "done":
                self._finish(slot, settings, on_result, slot.outcomes)
        return ""

    def _finish(self, slot: _Slot, settings: Settings, on_result, outcomes: list) -> None:
        result = TaskResult(model_id=slot.task.model_id, outcomes=list(outcomes), worker=slot.name,
                            seconds=time.monotonic() - slot.started)
        slot.task, slot.current, slot.done, slot.outcomes = None, "", set(), []
        # Hand a live worker its next model before storing this one: the store
        # write (a committed transaction) then overlaps the next model instead
        # of leaving the worker idle.  A dead or killed worker gets nothing here.
        if self._queue and slot.ready and slot.proc is not None and slot.proc.is_alive():
            self._assign(slot, self._queue.popleft(), settings)
        on_result(result)

    def _worker_died(self, slot: _Slot, settings: Settings, on_result, respawn: bool) -> None:
        if slot.task is not None:
            text = failures.describe_exit(slot.proc.exitcode, settings.memory_limit_mb)
            lost = failures.crash(slot.task.model_id, slot.variants, slot.done, slot.current,
                                  slot.device or settings.device,
                                  slot.name, text, time.monotonic() - slot.started)
            self._finish(slot, settings, on_result, slot.outcomes + lost)
        self._replace(slot, settings, respawn)

    def _timed_out(self, slot: _Slot, settings: Settings, on_result, respawn: bool) -> None:
        self._kill(slot)
        lost = failures.timeout(slot.task.model_id, slot.variants, slot.done, slot.current,
                                slot.device or settings.device,
                                settings.timeout, time.monotonic() - slot.started)
        self._finish(slot, settings, on_result, slot.outcomes + lost)
        self._replace(slot, settings, respawn)

    def _replace(self, slot: _Slot, settings: Settings, respawn: bool) -> None:
        """Retire a dead or killed worker; start a new one on the same device if work is left."""
        self._kill(slot)
        self.replaced += 1
        if respawn:
            self._spawn(slot, settings)
        else:
            slot.proc, slot.conn, slot.ready = None, None, False
