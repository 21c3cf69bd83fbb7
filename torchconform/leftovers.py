"""Processes a run leaves behind: found, named and ended when the run ends.

A test may start a daemon (double fork, ``setsid``, its own process group) and never end
it.  Unattended, it outlives the run, holds whatever it inherited (the pipe ``torchconform
run`` reads pytest's output from: the CLI would wait for it for as long as it sleeps) and
keeps a device or memory busy.  ``become_subreaper`` (Linux ``PR_SET_CHILD_SUBREAPER``)
makes every orphan of this process's descendants a child of this process instead of init,
however it detached (a new session or process group changes nothing), so once pytest has
ended, whatever remains below this process was left behind by the run: ``end_leftovers``
names each (pid, command line, whether it had its own session or group), sends SIGTERM,
SIGKILL after a short grace to those that remain, and reaps them.  Elsewhere (no such call)
nothing is found and nothing is ended.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Callable

PR_SET_CHILD_SUBREAPER = 36
# How an ended leftover is named, in the run's log and on the CLI's stderr.
LEFTOVER_PREFIX = "torchconform: ended a process the tests left behind: "

# Seconds the run's own stragglers (xdist workers of a killed pytest) get to go by themselves,
# then the rest get after SIGTERM before SIGKILL.
SETTLE_SECONDS = 1.0
TERM_GRACE_SECONDS = 1.0


def become_subreaper() -> bool:
    """Adopt the orphans of this process's descendants; False where the platform cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@dataclass
class Leftover:
    pid: int
    ppid: int
    command: str
    own_session: bool
    own_group: bool

    def describe(self) -> str:
        how = "own session" if self.own_session else ("own process group" if self.own_group else "")
        return f"pid {self.pid} ({self.command}{', ' + how if how else ''})"


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgid, sid) of ``pid``, None when gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        argv = []
    text = " ".join(argv) or "?"
    return text if len(text) <= 120 else text[:117] + "..."


def descendants(root: int | None = None) -> list[Leftover]:
    """Live (not zombie) processes below ``root`` (default: this process)."""
    root = os.getpid() if root is None else root
    table: dict[int, tuple[str, int, int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                table[int(entry)] = st
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        state, ppid, pgid, sid = table[pid]
        if state == "Z":
            continue
        parent = table.get(ppid)
        found.append(Leftover(pid, ppid, _command(pid), own_session=sid == pid or (parent is not None and sid != parent[3]),
                              own_group=pgid == pid or (parent is not None and pgid != parent[2])))
    return sorted(found, key=lambda p: p.pid)


def reap_children() -> None:
    """Reap this process's exited children that nobody waits for (adopted orphans)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    me = os.getpid()
    for entry in entries:
        if not entry.isdigit():
            continue
        st = _stat(int(entry))
        if st is not None and st[0] == "Z" and st[1] == me:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(int(entry), os.WNOHANG)


def _signal_all(procs: list[Leftover], sig: int) -> None:
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, sig)


def _wait_gone(pids: set[int], seconds: float) -> set[int]:
    """Wait up to ``seconds`` for ``pids`` to end (reaping those adopted); those still alive."""
    deadline = time.monotonic() + seconds
    while True:
        reap_children()
        alive = {p.pid for p in descendants()} & pids
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def end_leftovers(settle: float = SETTLE_SECONDS, grace: float = TERM_GRACE_SECONDS,
                  keep: Callable[[Leftover], bool] | None = None) -> list[Leftover]:
    """Once the run's pytest has ended: every process still below this one (but those
    ``keep`` keeps), each named; those that do not go within ``settle`` seconds get
    SIGTERM, then SIGKILL after ``grace``.  Returns the processes ended (empty: none)."""
    def targets() -> list[Leftover]:
        return [p for p in descendants() if keep is None or not keep(p)]

    first = targets()
    if not first:
        reap_children()
        return []
    _wait_gone({p.pid for p in first}, settle)
    ended: dict[int, Leftover] = {}
    for _ in range(5):   # a leftover may fork while it is being ended
        procs = targets()
        if not procs:
            break
        for p in procs:
            ended.setdefault(p.pid, p)
        _signal_all(procs, signal.SIGTERM)
        alive = _wait_gone({p.pid for p in procs}, grace)
        if alive:
            _signal_all([p for p in procs if p.pid in alive], signal.SIGKILL)
            _wait_gone(alive, grace)
    reap_children()
    return sorted(ended.values(), key=lambda p: p.pid)
