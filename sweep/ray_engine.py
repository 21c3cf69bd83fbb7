"""The Ray engine: each model is a Ray task on an existing cluster (``--ray-address``).

Each task asks for one device of the kind under test: Ray's ``neuron_cores``
resource on Trainium, ``num_gpus`` on CUDA, one CPU otherwise (refdev and cpu
live in host memory).  Ray then sets the visible-device variables itself, so
the task uses device index 0 of what it sees.  Results come back to this
driver, which stores them as they arrive (shards on several machines write to
the same PostgreSQL store).  A task whose worker dies is recorded as
``crash``; one that overruns the model timeout is cancelled and recorded as
``timeout``, exactly like the local engine.
"""
from __future__ import annotations

import time

from torchconform.errors import UserError
from torchconform.sweep import failures
from torchconform.sweep.protocol import Settings, Task, TaskResult

# Ray's resource name per device type; anything else needs only a CPU slot.
DEVICE_RESOURCES = {"neuron": {"resources": {"neuron_cores": 1}}, "cuda": {"num_gpus": 1}}


def task_options(device: str) -> dict:
    options = {"num_cpus": 1, "max_retries": 0, "retry_exceptions": False}
    options.update(DEVICE_RESOURCES.get(device, {}))
    return options


def run_task(task: Task, settings: Settings) -> list[dict]:
    """Body of one Ray task: bring the backend up (once per Ray worker) and run one model."""
    import torch

    from torchconform.skiplists.profile import load_profile
    from torchconform.suites.models import backend
    from torchconform.suites.models.check import run_model

    profile = load_profile(settings.profile)
    torch.set_num_threads(max(1, settings.threads))
    backend.prepare(profile)
    outcomes = run_model(task.model_id, settings.device, profile, variants=tuple(task.variants or settings.variants),
                         compile_backend=settings.compile_backend or None, seed=settings.seed,
                         traced=task.traced)
    return [o.to_dict() for o in outcomes]


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
        self.replaced = 0

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
        from torchconform.collectors.outcome import Outcome

        tasks = list(tasks)
        if not tasks:
            return
        ray = self.connect()
        remote = ray.remote(run_task).options(**task_options(settings.device))
        limit = self.max_in_flight or len(tasks)
        queue = list(reversed(tasks))
        in_flight: dict = {}
        while queue or in_flight:
            while queue and len(in_flight) < limit:
                task = queue.pop()
                in_flight[remote.remote(task, settings)] = (task, time.monotonic())
            done, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.5)
            for ref in done:
                task, started = in_flight.pop(ref)
                variants = tuple(task.variants or settings.variants)
                seconds = time.monotonic() - started
                try:
                    outcomes = [Outcome.from_dict(d) for d in ray.get(ref)]
                except Exception as exc:  # the worker died (WorkerCrashedError) or the task raised
                    self.replaced += 1
                    text = f"failed in Ray ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
                    outcomes = failures.crash(task.model_id, variants, set(), "", settings.device,
                                              "ray", text, seconds)
                on_result(TaskResult(task.model_id, outcomes, worker="ray", seconds=seconds))
            now = time.monotonic()
            for ref, (task, started) in list(in_flight.items()):
                if now - started > settings.timeout:
                    ray.cancel(ref, force=True)  # kills the worker process running it
                    in_flight.pop(ref)
                    self.replaced += 1
                    variants = tuple(task.variants or settings.variants)
                    on_result(TaskResult(task.model_id, failures.timeout(
                        task.model_id, variants, set(), "", settings.device, settings.timeout, now - started),
                        worker="ray", seconds=now - started))
