"""The Ray engine: each model is a Ray task on an existing cluster (``--ray-address``).

Each task asks for one device of the kind under test: Ray's ``neuron_cores``
resource on Trainium, ``num_gpus`` on CUDA, one CPU otherwise (refdev and cpu
live in host memory).  Ray then sets the visible-device variables itself, so
the task uses device index 0 of what it sees.

The tasks store their outcomes themselves (``sweep/ray_task.py``); this driver
side keeps the plan and the progress, and writes only what a task could not:
``crash`` for a task whose worker died, ``timeout`` for one that overran the
model timeout (it is cancelled, which ends its worker; Ray starts another).
A task lost because its *node* died (``NodeDiedError``) is not the model's
fault: it is submitted again, up to ``NODE_LOSS_RETRIES`` times, and runs only
the variants the store does not have yet.  Every write here, like the tasks',
goes through ``db.once``: whatever raced, each run of each model ends in the
store exactly once.
"""
from __future__ import annotations

import time

from torchconform.errors import UserError
from torchconform.sweep import failures
from torchconform.sweep.protocol import Settings, TaskResult

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


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""


class RayEngine:
    name = "ray"

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
        from torchconform.db.store import open_store
        from torchconform.sweep.ray_task import run_task

        tasks = list(tasks)
        if not tasks:
            return
        if not settings.store_url or not settings.run_id:
            raise ValueError("the Ray engine's tasks store their outcomes: Settings.store_url and run_id are needed")
        ray = self.connect()
        remote = ray.remote(run_task).options(**task_options(settings.device))
        limit = self.max_in_flight or len(tasks)
        queue = list(reversed(tasks))
        in_flight: dict = {}
        lost_nodes: dict[str, int] = {}
        store = open_store(settings.store_url)
        try:
            while queue or in_flight:
                while queue and len(in_flight) < limit:
                    task = queue.pop()
                    in_flight[remote.remote(task, settings)] = (task, time.monotonic())
                done, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.5)
                for ref in done:
                    task, started = in_flight.pop(ref)
                    result = self._collect(ray, ref, task, started, settings, store, lost_nodes)
                    if result is None:
                        queue.append(task)  # its node died: run it (what is left of it) elsewhere
                    else:
                        on_result(result)
                now = time.monotonic()
                for ref, (task, started) in list(in_flight.items()):
                    if now - started > settings.timeout:
                        ray.cancel(ref, force=True)  # kills the worker process running it
                        in_flight.pop(ref)
                        self.replaced += 1
                        on_result(self._lost(task, settings, store, now - started, timeout=True))
        finally:
            store.close()

    def _collect(self, ray, ref, task, started, settings, store, lost_nodes):
        """The task's result; None when its node died and it should run again."""
        from ray.exceptions import NodeDiedError

        from torchconform.collectors.outcome import Outcome

        seconds = time.monotonic() - started
        try:
            reply = ray.get(ref)
            outcomes = [Outcome.from_dict(d) for d in reply["outcomes"]]
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
        return TaskResult(task.model_id, outcomes, worker=reply["worker"], seconds=seconds, stored=True)

    @staticmethod
    def _lost(task, settings, store, seconds, why: str = "", timeout: bool = False) -> TaskResult:
        """Store crash/timeout outcomes for the runs of ``task`` the store lacks; the result
        holds every outcome of its variants as stored (the task may have stored some)."""
        from torchconform.db.once import add_outcomes_once, retrying
        from torchconform.sweep.ray_task import stored_variants

        variants = tuple(task.variants or settings.variants)
        have = stored_variants(store, settings.run_id, task.model_id, variants)
        if timeout:
            lost = failures.timeout(task.model_id, variants, set(have), "", settings.device,
                                    settings.timeout, seconds)
        else:
            lost = failures.crash(task.model_id, variants, set(have), "", settings.device, "ray", why, seconds)
        stored, already = retrying(lambda: add_outcomes_once(store, settings.run_id, lost, lock_key=task.model_id))
        outcomes = [have[v] for v in variants if v in have] + stored + [o for o in already if o.variant not in have]
        return TaskResult(task.model_id, outcomes, worker="ray", seconds=seconds, stored=True)
