"""Per-test timeout.

Under xdist a worker runs a watchdog thread per test; when the test overruns, the
thread writes a marker file naming the test (so the controller can tell a
timeout from a crash), dumps the stacks to stderr, and ends its own process.
xdist then reports the worker as crashed while running that test, replaces it,
and the run goes on.  A hang inside C code cannot stall the run this way.

Without xdist the process cannot die (it is the whole run), so the main thread
gets a SIGALRM that raises :class:`TestTimeout` (Python-level hangs only).
"""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import time

from torchconform.core.classify import TIMEOUT_PREFIX, TestTimeout

STATE_ENV = "TORCHCONFORM_STATE_DIR"
TIMEOUT_EXIT = 70


def marker_path(state_dir: str, nodeid: str) -> str:
    import hashlib
    return os.path.join(state_dir, "timeout-" + hashlib.sha1(nodeid.encode()).hexdigest() + ".json")


def read_timeout_marker(state_dir: str | None, nodeid: str) -> dict | None:
    if not state_dir:
        return None
    path = marker_path(state_dir, nodeid)
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


class Watchdog:
    """One per process; arm() before a test, disarm() after it."""

    def __init__(self, timeout: float, state_dir: str | None, in_worker: bool):
        self.timeout = float(timeout)
        self.state_dir = state_dir
        self.in_worker = in_worker
        self._timer: threading.Timer | None = None
        self._old_handler = None

    def arm(self, nodeid: str) -> None:
        if self.timeout <= 0:
            return
        if self.in_worker:
            self._timer = threading.Timer(self.timeout, self._expire, args=(nodeid,))
            self._timer.daemon = True
            self._timer.start()
        elif threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM"):
            def _raise(signum, frame, nodeid=nodeid):
                raise TestTimeout(f"{nodeid} exceeded {self.timeout:g} s")
            self._old_handler = signal.signal(signal.SIGALRM, _raise)
            signal.setitimer(signal.ITIMER_REAL, self.timeout)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._old_handler is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old_handler)
            self._old_handler = None

    def _expire(self, nodeid: str) -> None:
        if self.state_dir:
            tmp = marker_path(self.state_dir, nodeid) + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"nodeid": nodeid, "timeout": self.timeout, "time": time.time(), "pid": os.getpid()}, fh)
            os.replace(tmp, marker_path(self.state_dir, nodeid))
        try:
            sys.stderr.write(f"\n{TIMEOUT_PREFIX} {nodeid} exceeded {self.timeout:g} s; stacks follow, worker exits\n")
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            sys.stderr.flush()
        finally:
            os._exit(TIMEOUT_EXIT)
