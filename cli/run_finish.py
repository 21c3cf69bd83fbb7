"""How ``torchconform run`` follows its pytest to the end and judges whether the run finished.

- ``SafeLog``: pytest's output into the log file; a full disk (or any write error) stops
  the writing, never the run or the CLI (the first error is kept and said).
- ``pump``: reads pytest's output until pytest has ended, never until every holder of
  the pipe has: a process a test left behind inherits it.  Once pytest ended, what is
  left below this process is ended and named (torchconform/leftovers.py), the pipe is
  drained for at most ``DRAIN_SECONDS``, and reading stops (a stranger may hold it).
- ``verdict``: a run finished only when pytest's exit status says so *and* the plugin
  recorded the run's end *and* no sink failed (collectors/recording.py).  Otherwise
  the run stopped early: a test in flight in a serial run (collectors/inflight.py) is
  recorded as ``crash`` with the process's exit status (or, when the CLI killed a pytest
  that had not begun ending after a forwarded signal, as the interrupted-run ``error``),
  the store's run gets what the JSON lines hold and it lacks (``store_end``) and is marked
  ``interrupted``, and the CLI ends with one line ``INCOMPLETE`` naming the cause and
  the number of planned tests not run, and a non-zero exit status.
"""
from __future__ import annotations

import codecs
import contextlib
import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass, field

from torchconform.collectors.inflight import read as read_inflight
from torchconform.collectors.recording import STOP_PREFIX
from torchconform.collectors.testinfo import parse_test_id
from torchconform.core.outcome import CRASH, ERROR, INTERRUPTED_MESSAGE, Outcome
from torchconform.errors import UserError
from torchconform.leftovers import LEFTOVER_PREFIX
from torchconform.procs import describe_exit

DRAIN_SECONDS = 2.0
RUN_PLUGINS = ["-p", "torchconform.collectors.inflight", "-p", "torchconform.collectors.reaper"]
INFLIGHT_ENV = "TORCHCONFORM_INFLIGHT"   # collectors/inflight.py ENV
USAGE_PREFIX = "ERROR: torchconform: "



class SafeLog:
    """A text log whose writes never raise: the first failure is kept in ``error``."""

    def __init__(self, path: str):
        self.path = path
        self.error: str | None = None
        self._fh = open(path, "w", encoding="utf-8", errors="replace")

    def _failed(self, exc: OSError) -> None:
        if self.error is None:
            self.error = f"cannot write pytest's log {self.path}: {exc.strerror or exc}"

    def write(self, text: str) -> None:
        if self.error is not None:
            return
        try:
            self._fh.write(text)
        except OSError as exc:
            self._failed(exc)

    def flush(self) -> None:
        if self.error is None:
            try:
                self._fh.flush()
            except OSError as exc:
                self._failed(exc)

    def close(self) -> None:
        self.flush()
        with contextlib.suppress(OSError):
            self._fh.close()   # after a failure: what the buffer held is dropped, by design

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass
class Pumped:
    usage_error: str | None = None
    stop_reason: str | None = None        # a sink failure the plugin reported
    leftovers: list = field(default_factory=list)   # torchconform.leftovers.Leftover
    held_open: bool = False               # the pipe was still held open when reading stopped


def _line(line: str, log, echo, got: Pumped, last: list) -> None:
    for ours in (STOP_PREFIX, LEFTOVER_PREFIX):
        at = line.find(ours)
        if at > 0:   # written while pytest's line of progress dots was open: a line of its own
            _line(line[:at] + "\n", log, echo, got, last)
            _line(line[at:], log, echo, got, last)
            return
    if line == last[0] and line.strip() == "bringing up nodes...":
        return  # xdist says it again at collection when not on a terminal
    last[0] = line
    if line.startswith(USAGE_PREFIX):
        if got.usage_error is None:
            error = line[len(USAGE_PREFIX):].strip()
            # The skiplist plugin words its errors "torchconform: error: ..." already.
            got.usage_error = error[len("error: "):] if error.startswith("error: ") else error
        return
    log.write(line)
    if line.startswith(STOP_PREFIX):
        if got.stop_reason is None:
            got.stop_reason = line[len(STOP_PREFIX):].strip()
        return   # said once, by the CLI's own INCOMPLETE line
    if echo(line):
        sys.stderr.write(line)


def pump(proc, log, echo, on_exit=None, drain: float = DRAIN_SECONDS) -> Pumped:
    """Copy ``proc``'s output (its stdout pipe, read raw) into ``log`` and the lines ``echo``
    wants to stderr, until ``proc`` has ended and its pipe is drained or ``drain`` seconds
    have passed since; ``on_exit()`` (its result kept in ``leftovers``) runs once it ended."""
    got, last = Pumped(), [None]
    fd = proc.stdout.fileno()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    rest, ended_at = "", None
    while True:
        ready = select.select([fd], [], [], 0.2)[0]
        data = os.read(fd, 65536) if ready else None
        if data == b"":
            break   # every writer is gone
        if data:
            *lines, rest = (rest + decoder.decode(data)).split("\n")
            for line in lines:
                _line(line + "\n", log, echo, got, last)
            log.flush()
        if ended_at is None and proc.poll() is not None:
            if on_exit is not None:
                got.leftovers = list(on_exit() or ())
            ended_at = time.monotonic()
        elif ended_at is not None and time.monotonic() - ended_at > drain:
            got.held_open = True   # someone outside this run holds the pipe: not waited for
            break
    rest += decoder.decode(b"", final=True)
    if rest:
        _line(rest + "\n", log, echo, got, last)
    log.flush()
    if ended_at is None:   # the pipe closed first; what the tests left behind may hold nothing of it
        proc.wait()
        if on_exit is not None:
            got.leftovers = list(on_exit() or ())
    return got


def name_leftovers(leftovers, log) -> None:
    """Name each process the run left behind that this process ended, in the log and on stderr
    (the same line collectors/reaper.py writes for those a test process ended itself)."""
    for p in leftovers:
        line = f"{LEFTOVER_PREFIX}{p.describe()}\n"
        log.write(line)
        sys.stderr.write(line)
    log.flush()


def inflight_path(jsonl: str) -> str:
    return (jsonl[:-len(".jsonl")] if jsonl.endswith(".jsonl") else jsonl) + ".inflight"


def test_in_flight(path: str, outcomes, run: dict, device: str, suite: str, outcome: str, message: str):
    """The Outcome (``outcome``, ``message``) of the test a serial run's pytest was in when
    its process ended without ending the test (None: none was in flight, or it has an
    outcome already); the marker file is removed either way."""
    nodeid = read_inflight(path)
    with contextlib.suppress(OSError):
        os.unlink(path)
    if nodeid is None or any(o.test_id == nodeid for o in outcomes):
        return None
    info = parse_test_id(nodeid, device)
    return Outcome(test_id=nodeid, outcome=outcome, suite=run.get("suite") or suite, file=info["file"],
                   cls=info["cls"], name=info["name"], op=info["op"], variant=info["variant"], dtype=info["dtype"],
                   device=info["device"] or device, message=message)


def crash_of_test_in_flight(path: str, rc: int, outcomes, run: dict, device: str, suite: str):
    """The test that ended a serial run's process: ``crash`` with the process's exit status."""
    return test_in_flight(path, outcomes, run, device, suite, CRASH,
                          f"the test ended the pytest process: {describe_exit(rc)} (a serial run has no crash "
                          "isolation; -n 1 or more runs each test in a worker)")


def interrupted_test_in_flight(path: str, outcomes, run: dict, device: str, suite: str):
    """The test a serial pytest was in when the CLI killed it for not ending after a forwarded
    signal: the interrupted-run ``error`` the orderly end (and -n 2) records."""
    return test_in_flight(path, outcomes, run, device, suite, ERROR, INTERRUPTED_MESSAGE)


def append_jsonl(path: str, outcome) -> str | None:
    """Add ``outcome`` to the run's JSON lines; the error (one line) if it cannot."""

    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"type": "outcome", **outcome.to_dict()}, sort_keys=True) + "\n")
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    return None


def store_end(db: str, build: str, pid: int, rc: int, recorded=()) -> str | None:
    """In the store: the outcomes of ``recorded`` (what pytest ``pid`` recorded, plus its test
    in flight) that the run it left ``running`` lacks are added (a killed pytest may have
    stored less than it wrote), then that run is marked ``interrupted`` with exit status
    ``rc``; the error (one line) if it cannot."""
    # SQLAlchemy and the store: imported only when a run ended early, for start-up time.
    from sqlalchemy import select

    from torchconform.db.models import RUNNING, builds, results, runs, tests
    from torchconform.db.opening import open_store

    try:
        with open_store(db, create=False) as store:
            if recorded:
                with store.read() as conn:
                    run_id = conn.execute(select(runs.c.id).join(builds, builds.c.id == runs.c.build_id).where(
                        builds.c.name == build, runs.c.pid == pid, runs.c.status == RUNNING)
                        .order_by(runs.c.id.desc()).limit(1)).scalar_one_or_none()
                    have = set() if run_id is None else set(conn.execute(
                        select(tests.c.test_id).join(results, results.c.test_pk == tests.c.id)
                        .where(results.c.run_id == run_id)).scalars())
                missing = {o.test_id: o for o in recorded if o.test_id not in have}
                if run_id is not None and missing:
                    store.add_outcomes(run_id, list(missing.values()))
            store.mark_interrupted(build, pid, rc)
    except UserError as exc:
        return str(exc)
    return None


def finished(rc: int, run: dict, got: Pumped) -> bool:
    """pytest says it finished, the plugin recorded the run's end, and no sink failed."""
    # The store's tables bring SQLAlchemy: imported when a run has ended, for start-up time.
    from torchconform.db.models import FINISHED_EXIT_STATUSES

    return rc in FINISHED_EXIT_STATUSES and run.get("exitstatus") is not None and got.stop_reason is None


def exit_status(rc: int, forwarded_signal: int | None) -> int:
    """The CLI's exit status for a run that stopped early: never 0."""
    if forwarded_signal is not None:
        return 128 + forwarded_signal
    if rc < 0:
        return 128 - rc
    return rc if rc not in (0, 1, 5) else 3


def incomplete_line(rc: int, forwarded_signal: int | None, got: Pumped, crash, planned, recorded: int,
                    build: str, db: str | None, notes: list[str]) -> str:
    """The one line a run that stopped early ends with: cause, tests not run, the fix."""
    if forwarded_signal is not None:
        cause = f"stopped by {signal.Signals(forwarded_signal).name}"
    elif got.stop_reason:
        cause = got.stop_reason
    elif crash is not None:
        cause = f"test {crash.test_id} ended the pytest process ({describe_exit(rc)}); recorded as crash"
    elif rc in (0, 1, 5):
        cause = f"pytest ended ({describe_exit(rc)}) without recording the run's end"
    else:
        cause = f"pytest ended early ({describe_exit(rc)})"
    if planned is not None:
        left = f"{max(0, int(planned) - recorded)} of {planned} planned tests not run"
    else:
        left = "collection did not finish, so how many tests did not run is unknown"
    fix = (f"finish it with `torchconform run --resume --build {build}` (same options)" if db
           else "run it again")
    more = "".join(f"; {n}" for n in notes if n)
    return f"run INCOMPLETE: {cause}; {left}{more}; {fix}"
