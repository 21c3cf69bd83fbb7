"""What every sweep engine speaks: tasks in, results out, as they finish.

An engine (``local``: worker processes on this machine; ``ray``: tasks on a
Ray cluster) takes ``Task``s and calls ``on_result`` once per task with every
outcome of that task, whatever happened to the process that ran it.  The
driver (``sweep/driver.py``) stores each result as it arrives, which is what
makes a killed sweep resumable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from torchconform.core.outcome import Outcome

# Seconds a worker may take to bring up the device before its first model (an engine
# that has waited longer gives up on it); a model's own limit is Settings.timeout.
STARTUP_TIMEOUT = 300.0


@dataclass
class Settings:
    """How every task of one sweep runs (shipped to each worker once)."""
    device: str                      # device type under test: refdev, cpu, neuron, cuda
    profile: str                     # backend profile name or path
    variants: tuple = ("eval", "train", "compile")
    compile_backend: str = ""        # "" = the profile's
    timeout: float = 600.0           # seconds per model, all its runs together
    memory_limit_mb: int = 0         # extra address space per worker beyond its start-up size; 0 = none
    threads: int = 1                 # torch intra-op threads per worker
    warm_calls: int = 1              # calls after the first timed per passing run (check.Clock)
    seed: int = 0
    # Where engines whose tasks store their own outcomes (Ray) write: the store's URL
    # (never printed: it may hold a password) and the sweep's run.
    store_url: str = field(default="", repr=False)
    run_id: int = 0


@dataclass
class Task:
    model_id: str
    variants: tuple = ()             # empty = Settings.variants
    # (variant, torch version, library version) whose operator sets the store has
    # (census/models.py): the worker does not trace those again.
    traced: tuple = ()


@dataclass
class TaskResult:
    model_id: str
    outcomes: list[Outcome] = field(default_factory=list)
    worker: str = ""
    seconds: float = 0.0


class Engine:
    """Base of every sweep engine (sweep/engines.py names them).  Who stores a task's outcomes
    is decided here and nowhere else: the driver stores each result as it arrives, unless
    the engine declares ``writes_results`` (its tasks store their own outcomes into
    ``Settings.store_url``, run ``Settings.run_id``, and the driver only counts them)."""
    name = ""
    writes_results = False

    def connect(self) -> None:
        """Reach what the engine runs on before the sweep stores anything; a UserError
        naming the cause when it cannot.  Nothing to reach for an engine on this machine."""

    def run(self, tasks: Iterable[Task], settings: Settings,
            on_result: Callable[[TaskResult], None]) -> None:
        """Run every task; call ``on_result`` exactly once per task."""
        raise NotImplementedError
