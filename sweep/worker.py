"""The worker side of the local engine: one process, many models, one at a time.

Messages to the controller (over a multiprocessing Pipe):
  ("ready", info)               the backend is up; info = {"device": ..., "pid": ...}
  ("fatal", text)               the backend could not be brought up
  ("start", model_id, variant)  a run begins (so a crash can be pinned on it)
  ("outcome", model_id, dict)   a run ended
  ("done", model_id)            every run of the model ended
The controller sends Task objects, or None to stop.

Running out of memory ends the process with EXIT_OOM, like the kernel's OOM
killer would: a process whose allocations fail is not trusted with the next
model.
"""
from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time

from torchconform import procs
from torchconform.sweep.failures import EXIT_OOM

# Exit status of a worker whose controller is gone; seconds between its checks.
EXIT_ORPHANED = 3
PARENT_POLL_SECONDS = 1.0


def _address_space() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def limit_memory(extra_mb: int) -> None:
    """Cap the address space at what the process uses now plus ``extra_mb``.

    Relative to the start-up size because importing torch alone maps a few
    GiB of address space that is never touched.
    """
    import resource

    if extra_mb <= 0:
        return
    limit = _address_space() + extra_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def device_string(settings, index: int | None, pin_env: str) -> str:
    """The device a worker uses: pinned through the profile's variable (then the
    process sees its device as index 0) or addressed by index."""
    if index is None or settings.device == "cpu":
        return settings.device
    return settings.device if pin_env else f"{settings.device}:{index}"


def _watch_parent(parent_pid: int) -> None:
    while not procs.parent_gone(parent_pid):
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(EXIT_ORPHANED)


def die_with_parent(parent_pid: int) -> None:
    """End the moment the controller does, however it died, even in the middle of a
    (hung) model: a killed sweep leaves no worker behind running models nobody stores.

    SIGKILL on Linux (nothing of a worker's is worth saving: the controller stores);
    a thread watching the parent covers other platforms and a controller that died
    before the signal was set up."""
    procs.die_with_parent(signal.SIGKILL)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="torchconform-parent-watch",
                     daemon=True).start()


def main(conn, name: str, settings, index: int | None, parent_pid: int | None = None) -> None:
    die_with_parent(parent_pid or os.getppid())
    # SIGTERM/SIGINT (a CI cancel reaches the whole process group, Ctrl-C too) are the
    # controller's to handle: it ends the sweep in order and then stops its workers.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
    faulthandler.enable()  # a segfault prints the Python stack to stderr before dying
    try:
        # imported inside the try, after the signals are set: a failing import is the worker's reported error
        import torch

        from torchconform.core.profile import load_profile
        from torchconform.suites.models import backend
        from torchconform.suites.models.check import run_model

        profile = load_profile(settings.profile)
        if index is not None and profile.worker_env:
            os.environ[profile.worker_env] = str(index)
        torch.set_num_threads(max(1, settings.threads))
        backend.prepare(profile)
        device = device_string(settings, index, profile.worker_env)
        torch.empty(1, device=device)  # fail here, once, if the device is unusable
        limit_memory(settings.memory_limit_mb)
    except Exception as exc:
        conn.send(("fatal", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", {"device": device, "pid": os.getpid()}))

    while True:
        try:
            task = conn.recv()
        except EOFError:  # the controller is gone
            return
        if task is None:
            return
        variants = tuple(task.variants or settings.variants)
        try:
            run_model(task.model_id, device, profile, variants=variants,
                      compile_backend=settings.compile_backend or None, seed=settings.seed, traced=task.traced,
                      warm_calls=settings.warm_calls,
                      emit=lambda v: conn.send(("start", task.model_id, v)),
                      on_outcome=lambda o: conn.send(("outcome", task.model_id, o.to_dict())))
        except MemoryError:
            sys.stderr.write(f"torchconform worker {name}: out of memory in {task.model_id}\n")
            sys.stderr.flush()
            os._exit(EXIT_OOM)
        conn.send(("done", task.model_id))
