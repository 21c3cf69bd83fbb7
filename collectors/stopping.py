"""Stopping a run: the flag a SIGTERM/SIGINT sets, the handler that sets it, and ending
the xdist workers (SIGTERM, then SIGKILL after a grace).  The controller installs the
handler; the recording sinks stop the run when the store fails."""
from __future__ import annotations

import contextlib
import signal
import threading
import time

# Seconds a worker gets to end after SIGTERM before SIGKILL (a test may ignore SIGTERM).
STOP_GRACE_SECONDS = 1.0


def stop_workers(config, grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM every local xdist worker process now, SIGKILL those still there ``grace``
    seconds later (remote gateways are left to xdist)."""
    dsession = config.pluginmanager.getplugin("dsession")
    group = getattr(getattr(dsession, "nodemanager", None), "group", None)
    stopping = []
    for gateway in list(group or ()):
        popen = getattr(getattr(gateway, "_io", None), "popen", None)
        if popen is not None and popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended between poll and terminate
                popen.terminate()
                stopping.append(popen)
    deadline = time.monotonic() + grace
    for popen in stopping:
        with contextlib.suppress(Exception):   # subprocess.TimeoutExpired: it ignored SIGTERM
            popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                popen.kill()


# Set once the run was told to stop (SIGTERM / SIGINT).
INTERRUPTED = threading.Event()


def _raise_interrupt(signum, frame):
    INTERRUPTED.set()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def early_stop(session, config, planned, recorded: int) -> str | None:
    """Why pytest ended the run before its planned tests ran, when the user asked it to stop
    early (``-x``, ``--maxfail``: pytest's ``shouldfail``/``shouldstop``, on the session or on
    xdist's controller); None when every planned test ran or the stop is one the runner
    itself reports (a signal, a failed sink, workers that could not start)."""
    if INTERRUPTED.is_set() or planned is None or recorded >= int(planned):
        return None
    dsession = config.pluginmanager.getplugin("dsession")
    for why in (session.shouldfail, session.shouldstop, getattr(dsession, "shouldstop", None)):
        if why and not str(why).startswith("torchconform"):
            return f"pytest stopped early ({why}: -x or --maxfail)" if isinstance(why, str) \
                else "pytest stopped early (-x or --maxfail)"
    return None
