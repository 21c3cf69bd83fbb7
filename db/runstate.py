"""What state a stored run is really in, and whether a build is complete.

``runs.status`` says what the writer last recorded.  A writer killed with
SIGKILL records nothing more, so a ``running`` run on this host whose process
no longer exists is shown as ``lost``; on another host it stays ``running``
(we cannot look), which is just as incomplete.
"""
from __future__ import annotations

import os
import socket

from torchconform.db.models import DONE_STATES, LOST, RUNNING


def pid_alive(pid: int | None) -> bool:
    """Whether process ``pid`` exists on this machine (a zombie counts as gone)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def holder_alive(host: str, pid: int | None, this_host: str | None = None) -> bool | None:
    """True/False for a process on this host; None when it runs elsewhere (unknown)."""
    if host != (this_host or socket.gethostname()):
        return None
    return pid_alive(pid)


def effective_status(status: str, host: str, pid: int | None, this_host: str | None = None) -> str:
    if status == RUNNING and pid and holder_alive(host, pid, this_host) is False:
        return LOST
    return status


def build_complete(statuses) -> bool:
    """A build with at least one run, every run finished or resumed."""
    statuses = list(statuses)
    return bool(statuses) and all(s in DONE_STATES for s in statuses)
