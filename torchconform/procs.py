"""Child processes that never outlive the process that started them.

The CLI (``run``) and the sweep driver start pytest or worker processes.  When
a CI runner cancels a job it sends SIGTERM (then SIGKILL); when someone kills
the parent with SIGKILL, nothing of it runs any more.  Two rules cover both:

- ``die_with_parent`` (a ``preexec_fn``): Linux delivers SIGTERM to the child the
  moment its parent dies, however it died (``prctl(PR_SET_PDEATHSIG)``).  Where
  the platform has no such call, children can watch a pipe instead
  (``parent_gone``).
- ``forward_signals(proc)``: while the parent waits, SIGTERM and SIGINT are
  passed on to the child, which ends its run in order (finished results kept);
  the parent then waits ``grace`` seconds and kills it if it did not stop.  A caller
  that can tell whether the child began ending (``ending``) has it killed after
  ``escalate`` seconds instead when it did not (a test ignoring SIGTERM).
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading

PR_SET_PDEATHSIG = 1

# Settings of the *original* run that must not leak into a rerun of some of its tests (the
# gate's flaky confirmation, the trait reruns): a rerun streaming into the store under its
# own build name, or appending to the original JSONL/JUnit files, would corrupt the build
# being judged; a rerun sharing the run's watchdog folder would leave its markers there.
# Likewise xdist's worker variables: a child that believes it is an xdist worker never
# writes the controller's JSON lines.  And the run's in-flight file (collectors/inflight.py): a
# rerun would truncate it, losing the run's test in flight and its "ending" mark.
SCRUBBED_ENV = ("TORCHCONFORM_DB", "TORCHCONFORM_BUILD", "TORCHCONFORM_JUNIT", "TORCHCONFORM_JSONL",
                "TORCHCONFORM_SHARD", "TORCHCONFORM_STATE_DIR", "TORCHCONFORM_INFLIGHT", "PYTEST_ADDOPTS",
                "PYTEST_CURRENT_TEST")
SCRUBBED_PREFIXES = ("PYTEST_XDIST_",)


def rerun_env(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment less SCRUBBED_ENV / SCRUBBED_PREFIXES, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV and not k.startswith(SCRUBBED_PREFIXES)}
    env.update(extra)
    return env
# Seconds a child gets to end its run after a forwarded signal before it is killed.
GRACE_SECONDS = 20.0


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In a child (``preexec_fn`` or its first lines): get ``sig`` when the parent dies."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    # The parent may have died before prctl took effect: then we were re-parented already.
    if os.getppid() == 1:
        os.kill(os.getpid(), sig)


def describe_exit(code: int | None) -> str:
    """How a process ended, from its exit status (a signal as a negative number, the
    way subprocess reports it): ``killed by SIGSEGV``, ``exit status 3``."""
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}" + (" (out of memory, or killed by hand?)" if -code == signal.SIGKILL else "")
    return f"exit status {code}"


def parent_gone(parent_pid: int) -> bool:
    """Whether the process that started us is gone (we were re-parented)."""
    return os.getppid() != parent_pid


class Forwarded:
    """What ``forward_signals`` saw: the first signal passed on (None: none), and whether it
    killed the child ``escalate`` seconds later because the child had not begun ending."""

    def __init__(self):
        self.signal: int | None = None
        self.killed = False


@contextlib.contextmanager
def forward_signals(proc: subprocess.Popen, grace: float = GRACE_SECONDS,
                    signals=(signal.SIGTERM, signal.SIGINT), escalate: float | None = None, ending=None):
    """Pass SIGTERM/SIGINT on to ``proc`` while the block runs; kill it ``grace`` seconds
    after the first one if it is still running, or ``escalate`` seconds after it when
    ``ending()`` then says it has not begun ending its run (False; None: cannot tell, so
    the grace holds).  Only in the main thread (elsewhere the block runs without forwarding)."""
    seen = Forwarded()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def _kill_late():
        waited = 0.0
        if escalate is not None and ending is not None:
            waited = min(escalate, grace)
            try:
                proc.wait(timeout=waited)
                return
            except subprocess.TimeoutExpired:
                if ending() is False:
                    # pytest shares this process's group: only its pid is killed; what it
                    # started is ended with the run's other leftovers (torchconform/leftovers.py).
                    seen.killed = True
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    return
        try:
            proc.wait(timeout=max(0.0, grace - waited))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    def _forward(signum, frame):
        if proc.poll() is not None:
            return
        if seen.signal is not None:
            return  # the child is ending already; the grace timer kills it if it hangs
        seen.signal = signum
        with contextlib.suppress(ProcessLookupError):
            # The child turns its first SIGTERM or SIGINT into an orderly end of its run and
            # ignores the rest (a terminal's Ctrl-C reaches it as well as this one).
            proc.send_signal(signal.SIGTERM)
        threading.Thread(target=_kill_late, name="torchconform-grace", daemon=True).start()

    old = {s: signal.signal(s, _forward) for s in signals}
    try:
        yield seen
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
