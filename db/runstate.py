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


def shard_label(shard: int, shards: int) -> str:
    """``runs.shard`` of shard ``shard`` (0-based) of ``shards``: ``I/N``, or "" unsharded."""
    return f"{shard}/{shards}" if shards > 1 else ""


# The plan a run belongs to, handed to pytest (and the sweep) by the CLI as JSON
# ``[{"suite": S, "shards": N}]``; the run's store sink records it on the build.
PLAN_ENV = "TORCHCONFORM_PLAN"


def plan_steps(text: str | None) -> list[dict]:
    """The steps of a ``PLAN_ENV`` value ([] when unset or not a list of steps)."""
    import json

    try:
        steps = json.loads(text) if text else []
    except ValueError:
        return []
    return [s for s in steps if isinstance(s, dict) and s.get("suite")] if isinstance(steps, list) else []


def planned_runs(plan) -> list[tuple[str, str]]:
    """(suite, shard label) of every run a build's plan (``builds.metadata["plan"]``:
    ``[{"suite": S, "shards": N}, ...]``, written by ``run --suite all`` and sharded
    runs) expects; a malformed plan expects nothing rather than failing a reader."""
    out = []
    for step in plan if isinstance(plan, list) else ():
        if not isinstance(step, dict) or not step.get("suite"):
            continue
        try:
            shards = max(1, int(step.get("shards") or 1))
        except (TypeError, ValueError):
            shards = 1
        out += [(str(step["suite"]), shard_label(i, shards)) for i in range(shards)]
    return list(dict.fromkeys(out))  # a suite named twice expects its runs once


def missing_runs(runs, plan) -> list[tuple[str, str]]:
    """Planned (suite, shard) with no finished or resumed run yet; ``runs`` holds
    (suite, shard, effective status) triples."""
    done = {(suite, shard) for suite, shard, status in runs if status in DONE_STATES}
    return [p for p in planned_runs(plan) if p not in done]


def absent_runs(runs, plan) -> list[tuple[str, str]]:
    """Planned (suite, shard) with no run at all (not started; an unfinished run is
    reported as itself)."""
    started = {(suite, shard) for suite, shard, _ in runs}
    return [p for p in planned_runs(plan) if p not in started]


def build_complete(runs, plan=None) -> bool:
    """A build with at least one run, every run finished or resumed, and every run its
    plan names there (a shard or a suite of the plan not run yet leaves it incomplete).
    ``runs``: (suite, shard, effective status) triples."""
    runs = list(runs)
    return bool(runs) and all(status in DONE_STATES for _, _, status in runs) and not missing_runs(runs, plan)
