"""Start one process per rank the way PyTorch's launcher does (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR on loopback, a free MASTER_PORT per test),
wait for them, and say what happened in the classifier's words.

A rank reports through a JSON file (``rank.py``): its values, or its exception.  The
launcher never leaves a process behind: each rank runs in its own session (killed as
a group), dies with its parent (a killed test process takes its ranks with it), and
every exit path here kills and reaps whatever is still running.
"""
from __future__ import annotations

import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from torchconform import settings
from torchconform.core.classify import CRASH_PREFIX, TIMEOUT_PREFIX
from torchconform.procs import describe_exit, die_with_parent

WORLD_SIZE_ENV = "TORCHCONFORM_WORLD_SIZE"
TIMEOUT_ENV = "TORCHCONFORM_DIST_TIMEOUT"
DEFAULT_WORLD_SIZE = 2
DEFAULT_TIMEOUT = 120.0
# After one rank has failed, the others get this long to report before they are
# killed (they are usually blocked in a collective waiting for the failed one, and
# fail there at once: "Connection closed by peer"). Their errors are consequences: the
# rank that failed first in time is the one reported.
PEER_GRACE = 2.0
# A rank's error saying its peer went away (gloo's TCP transport: the socket of a rank that died
# closed) is a consequence, not a cause: a death explains it whatever the clocks say.  Under load
# the launcher may still see the dying rank alive after its peer had already reported the
# closed socket, so "first in time" alone would blame the survivor.
PEER_GONE = re.compile(r"Connection closed by peer|Connection reset by peer|Broken pipe|"
                       r"gloo/transport/tcp/pair\.cc:\d+\] (Read|Write) error")
POLL = 0.02
STDERR_TAIL = 1500


class RankFailure(Exception):
    """A rank's exception, a rank's death or a hang, worded for the classifier."""


@dataclass
class Rank:
    rank: int
    proc: subprocess.Popen
    result_path: str
    stderr_path: str
    report: dict | None = field(default=None)
    seen_alive_at: float = 0.0       # wall clock of the last poll that found it running
    died_at: float | None = None     # a death without a report: the last moment seen alive

    def failed_at(self) -> float | None:
        """When it failed (wall clock): its reported exception's time, or for a death the
        last moment it was seen alive (so a death is never later than the errors it caused
        in its peers); None while it has not failed."""
        if self.report is not None:
            return None if self.report.get("status") == "ok" else float(self.report.get("failed_at") or 0.0)
        return self.died_at

    def read_report(self) -> dict | None:
        if self.report is None and os.path.exists(self.result_path):
            try:
                with open(self.result_path, encoding="utf-8") as fh:
                    self.report = json.load(fh)
            except (OSError, ValueError):  # written by os.replace, so partial means still writing
                return None
        return self.report

    def stderr_tail(self) -> str:
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            return ""
        return text[-STDERR_TAIL:].strip()


def world_size() -> int:
    return settings.get_int(WORLD_SIZE_ENV, 1, what="a rank count",
                            fix=f"use a whole number of ranks, 2 or more (default {DEFAULT_WORLD_SIZE})")


def rank_timeout() -> float:
    """Seconds every rank of one test gets in all (a hung collective ends there)."""
    return settings.get_float(TIMEOUT_ENV, 1e-3, what="a time in seconds", fix="use seconds, e.g. 120")


def free_port() -> int:
    """A loopback port nothing listens on now (the rendezvous binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_env(rank: int, size: int, port: int, device_env: str, extra: dict) -> dict:
    env = dict(os.environ)
    env.update({"RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(size), "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port), "TORCHELASTIC_RUN_ID": f"torchconform-{port}"})
    # the pytest worker's own pinning is not the rank's: each rank gets its own device
    env.pop("PYTEST_XDIST_WORKER", None)
    if device_env:
        env[device_env] = str(rank)
    env.update(extra)
    return env


def _kill(ranks: list[Rank]) -> None:
    for r in ranks:
        if r.proc.poll() is None:
            try:
                os.killpg(r.proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # ended between poll() and killpg(): nothing to kill
                continue
    for r in ranks:
        r.proc.wait()


def run_ranks(program: str, params: dict, *, size: int | None = None, timeout: float | None = None,
              device_env: str = "", extra_env: dict | None = None) -> list[dict]:
    """Run ``program`` ("module:function") on ``size`` ranks; return each rank's report
    (rank order): ``values`` (what the program returned) and ``touched`` (whether the rank
    touched the device; None: it cannot tell).  Raises RankFailure: the first failing rank's exception text, a crash
    (a rank died without reporting) or a timeout, with every rank process killed."""
    size = size or world_size()
    timeout = timeout or rank_timeout()
    folder = tempfile.mkdtemp(prefix="torchconform-dist-")
    port = free_port()
    ranks: list[Rank] = []
    try:
        for rank in range(size):
            result = os.path.join(folder, f"rank{rank}.json")
            stderr = os.path.join(folder, f"rank{rank}.err")
            with open(stderr, "wb") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "torchconform.suites.distributed.rank", program, json.dumps(params), result],
                    env=_rank_env(rank, size, port, device_env, extra_env or {}), stdin=subprocess.DEVNULL,
                    stdout=err, stderr=subprocess.STDOUT, start_new_session=True,
                    preexec_fn=lambda: die_with_parent(signal.SIGKILL))
            ranks.append(Rank(rank, proc, result, stderr))
        return _wait(ranks, program, timeout)
    finally:
        _kill(ranks)
        shutil.rmtree(folder, ignore_errors=True)


def first_failure(failed: list[Rank]) -> Rank:
    """The rank whose failure the test reports: the first in time, a peer-gone error after any
    death (PEER_GONE); on a tie a death (it explains its peers' errors), then the lowest rank."""
    deaths = any(r.report is None for r in failed)

    def consequence(r: Rank) -> bool:
        return deaths and r.report is not None and bool(PEER_GONE.search(str(r.report.get("error", ""))))

    return min(failed, key=lambda r: (consequence(r), r.failed_at(), r.report is not None, r.rank))


def _wait(ranks: list[Rank], program: str, timeout: float) -> list[dict]:
    start = time.monotonic()
    first_failure_seen = None
    for r in ranks:
        r.seen_alive_at = time.time()
    while True:
        pending = []
        for r in ranks:
            report = r.read_report()
            now = time.time()
            code = r.proc.poll()
            if report is None and code is not None:
                report = r.read_report()  # it may have written just before exiting
            if report is None and code is not None:
                if r.died_at is None:
                    r.died_at = r.seen_alive_at
                continue
            if code is None:
                r.seen_alive_at = now
            if report is None or (report.get("status") == "ok" and code is None):
                pending.append(r)
        failed = [r for r in ranks if r.failed_at() is not None]
        if failed and first_failure_seen is None:
            first_failure_seen = time.monotonic()
        if failed and (not pending or time.monotonic() - first_failure_seen > PEER_GRACE):
            _kill(ranks)
            first = first_failure(failed)
            if first.report is None:
                code = first.proc.poll()
                raise RankFailure(f"{CRASH_PREFIX} rank {first.rank} of {len(ranks)} died ({describe_exit(code)}) "
                                  f"running {program}; every rank killed. Its output ends: "
                                  f"{first.stderr_tail()[-600:]}")
            raise RankFailure(f"rank {first.rank} of {len(ranks)}: {first.report.get('error', '')}")
        if not pending:
            return [r.report for r in ranks]
        if time.monotonic() - start > timeout:
            _kill(ranks)
            raise RankFailure(f"{TIMEOUT_PREFIX} {program}: rank(s) {', '.join(str(r.rank) for r in pending)} of "
                              f"{len(ranks)} did not finish within {timeout:g} s (a hung collective?); "
                              "every rank's process killed")
        time.sleep(POLL)
