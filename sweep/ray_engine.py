"""The Ray engine: each model is a Ray task on an existing cluster (``--ray-address``).

Each task asks for one device of the kind under test: Ray's ``neuron_cores``
resource on Trainium, ``num_gpus`` on CUDA, one CPU otherwise (refdev and cpu
live in host memory).  Ray then sets the visible-device variables itself, so
the task uses device index 0 of what it sees.

The tasks store their outcomes themselves (``sweep/ray_task.py``); this driver
side keeps the plan and the progress, and writes only what a task could not:
``crash`` for a task whose worker died, ``timeout`` for one that overran the
model timeout (it is cancelled, which ends its worker; Ray starts another).
The model timeout counts from when the task reports that its model began, as
the local engine's does: time queued behind other tasks, waiting for a worker
or bringing up the backend is not the model's (on a loaded cluster that alone
outlasted a two-minute limit).
A task lost because its *node* died (``NodeDiedError``) is not the model's
fault: it is submitted again, up to ``NODE_LOSS_RETRIES`` times, and runs only
the variants the store does not have yet.  Every write here, like the tasks',
goes through ``db.once``: whatever raced, each run of each model ends in the
store exactly once.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from torchconform.errors import UserError
from torchconform.sweep import failures
from torchconform.sweep.protocol import STARTUP_TIMEOUT, Engine, Settings, Task, TaskResult
from torchconform.core.outcome import Outcome
from torchconform.db.once import add_outcomes_once, retrying
from torchconform.db.opening import open_store
from torchconform.sweep.ray_task import RUNNING, STARTED, run_task, stored_variants

# Ray's resource name per device type; anything else needs only a CPU slot.
DEVICE_RESOURCES = {"neuron": {"resources": {"neuron_cores": 1}}, "cuda": {"num_gpus": 1}}
# How often one model is submitted again after the node running it died.
NODE_LOSS_RETRIES = 3


def task_options(device: str) -> dict:
    # No retries by Ray itself: a worker that died running a model is a crash of that
    # model (retrying a segfault only doubles its cost); node loss is retried here.
    options = {"num_cpus": 1, "max_retries": 0, "retry_exceptions": False}
    options.update(DEVICE_RESOURCES.get(device, {}))
    return options


def required_resources(device: str) -> dict:
    """Each task's request in the names ``ray.cluster_resources()`` uses."""
    options = task_options(device)
    need = {"CPU": options["num_cpus"]}
    if "num_gpus" in options:
        need["GPU"] = options["num_gpus"]
    need.update(options.get("resources", {}))
    return need


# What _next returns for a task's progress mark (it goes on running).
_PENDING = object()


@dataclass
class _Flight:
    """One submitted task and how far it got.  Its clocks follow the local engine's:
    the model timeout counts from when the model began (the worker up, the backend
    brought up), the start-up limit from when the task's body began; a task still
    queued or waiting for a worker is Ray's to place and is never timed out."""
    task: Task
    submitted: float
    running: float | None = None   # the task's body began in a worker
    started: float | None = None   # its model began

    def seconds(self, now: float) -> float:
        return now - (self.started or self.running or self.submitted)

    def overdue(self, now: float, timeout: float, device: str) -> str | None:
        """None while the task may go on; else why it is cancelled now: "" when its model
        overran the timeout (a ``timeout``), a reason when the backend never came up (a
        ``crash``)."""
        if self.started is not None:
            return "" if now - self.started > timeout else None
        if self.running is not None and now - self.running > STARTUP_TIMEOUT:
            return f"did not bring up {device} within {STARTUP_TIMEOUT:g}s"
        return None


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""


class RayEngine(Engine):
    name = "ray"
    writes_results = True   # each task stores its outcomes itself (ray_task.py); lost ones in _lost

    def __init__(self, address: str = "", device: str = "cpu", max_in_flight: int = 0):
        try:
            import ray  # noqa: F401
        except ImportError:
            raise UserError("--engine ray needs Ray; pip install 'torchconform[ray]' or use --engine local")
        self.address = address
        self.device = device
        self.max_in_flight = max_in_flight
        self.replaced = 0                # workers lost (crash, out of memory, timeout)
        self.rescheduled = 0             # tasks submitted again after their node died

    def connect(self):
        import ray

        if not ray.is_initialized():
            try:
                ray.init(address=self.address or "auto", ignore_reinit_error=True, log_to_driver=False)
            except ConnectionError as exc:
                raise UserError(f"cannot reach a Ray cluster at {self.address or 'auto'} ({exc}); "
                                "start one with `ray start --head` or pass --ray-address HOST:PORT")
        return ray

    def run(self, tasks, settings: Settings, on_result) -> None:
        tasks = list(tasks)
        if not tasks:
            return
        if not settings.store_url or not settings.run_id:
            raise ValueError("the Ray engine's tasks store their outcomes: Settings.store_url and run_id are needed")
        ray = self.connect()
        self._check_resources(ray)
        # A streaming task: it reports when its body begins and when its model begins
        # (ray_task.RUNNING, ray_task.STARTED), then its result.
        remote = ray.remote(run_task).options(num_returns="streaming", **task_options(settings.device))
        limit = self.max_in_flight or len(tasks)
        queue = list(reversed(tasks))
        in_flight: dict = {}
        lost_nodes: dict[str, int] = {}
        store = open_store(settings.store_url)
        try:
            while queue or in_flight:
                while queue and len(in_flight) < limit:
                    task = queue.pop()
                    in_flight[remote.remote(task, settings)] = _Flight(task, time.monotonic())
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.5)
                for gen in ready:
                    flight = in_flight[gen]
                    result = self._next(ray, gen, flight, settings, store, lost_nodes)
                    if result is _PENDING:
                        continue  # a progress mark: the task goes on
                    del in_flight[gen]
                    if result is None:
                        queue.append(flight.task)  # its node died: run it (what is left of it) elsewhere
                    else:
                        on_result(result)
                now = time.monotonic()
                for gen, flight in list(in_flight.items()):
                    why = flight.overdue(now, settings.timeout, settings.device)
                    if why is not None:
                        ray.cancel(gen, force=True)  # kills the worker process running it
                        del in_flight[gen]
                        self.replaced += 1
                        on_result(self._lost(flight.task, settings, store, flight.seconds(now),
                                             why=why, timeout=flight.started is not None))
        finally:
            store.close()

    def _check_resources(self, ray) -> None:
        """A task asking for a resource no node has would wait forever (a task that has
        not begun is never timed out): say so at once."""
        have = ray.cluster_resources()
        for name, amount in required_resources(self.device).items():
            if have.get(name, 0) < amount:
                raise UserError(f"the Ray cluster at {self.address or 'auto'} has no {name!r} resource, which each "
                                f"{self.device} task asks for; start its nodes with it (`ray start ... "
                                f"--resources` or --num-gpus) or sweep another device")

    def _next(self, ray, gen, flight, settings, store, lost_nodes):
        """What the task reported now: ``_PENDING`` for a progress mark, its result, or
        None when its node died and it should run again."""
        from ray.exceptions import NodeDiedError

        task = flight.task
        seconds = flight.seconds(time.monotonic())
        try:
            reply = ray.get(next(gen))
            if reply == RUNNING:
                flight.running = time.monotonic()
                return _PENDING
            if reply == STARTED:
                flight.started = time.monotonic()
                return _PENDING
            outcomes = [Outcome.from_dict(d) for d in reply["outcomes"]]
        except StopIteration:  # the task ended without its result (run_task always yields one)
            self.replaced += 1
            return self._lost(task, settings, store, seconds, why="ended without reporting its outcomes")
        except NodeDiedError as exc:
            lost_nodes[task.model_id] = lost_nodes.get(task.model_id, 0) + 1
            if lost_nodes[task.model_id] <= NODE_LOSS_RETRIES:
                self.rescheduled += 1
                return None
            return self._lost(task, settings, store, seconds, why=f"lost its node {lost_nodes[task.model_id]} "
                              f"times (NodeDiedError: {_first_line(exc)})")
        except Exception as exc:  # the worker died (WorkerCrashedError, OOM) or the task raised
            self.replaced += 1
            return self._lost(task, settings, store, seconds, why=f"failed in Ray ({type(exc).__name__}: "
                              f"{_first_line(exc)})")
        return TaskResult(task.model_id, outcomes, worker=reply["worker"], seconds=seconds)

    @staticmethod
    def _lost(task, settings, store, seconds, why: str, timeout: bool = False) -> TaskResult:
        """Store crash/timeout outcomes for the runs of ``task`` the store lacks; the result
        holds every outcome of its variants as stored (the task may have stored some)."""
        variants = tuple(task.variants or settings.variants)
        have = stored_variants(store, settings.run_id, task.model_id, variants)
        if timeout:
            lost = failures.timeout(task.model_id, variants, set(have), "", settings.device,
                                    settings.timeout, seconds)
        else:
            lost = failures.crash(task.model_id, variants, set(have), "", settings.device, "ray", why, seconds)
        stored, already = retrying(lambda: add_outcomes_once(store, settings.run_id, lost, lock_key=task.model_id))
        outcomes = [have[v] for v in variants if v in have] + stored + [o for o in already if o.variant not in have]
        return TaskResult(task.model_id, outcomes, worker="ray", seconds=seconds)
