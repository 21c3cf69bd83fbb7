"""A run that cannot record its outcomes stops, and says why in one line.

The sinks (JSON lines, JUnit, the store) write from inside pytest's hooks; a full disk,
a store that went read-only or corrupt, a lost database server make them raise there.
Unguarded, that is an INTERNALERROR in the middle of the run (or a silently dead flush
thread), the run goes on running tests whose outcomes go nowhere, and the end of the run
is never recorded.  This plugin wraps the four ``pytest_torchconform_*`` hooks: when a
sink raises, the run is told to stop (as after ``-x``; under xdist its workers are
stopped at once, what they had in flight is not a result), one line
``torchconform: run stopped: cannot record outcomes: <cause>`` goes to pytest's output
(``torchconform run`` reads it back as the cause of its INCOMPLETE line), and pytest
ends with exit status 2 (interrupted).

What a failed write leaves: each store batch is one transaction (rolled back whole);
JSON lines are written in order, so the file is a prefix of the run; the sinks are
called newest first (the store before the JSON lines), so a batch the store refused is
not in the JSON lines either.  Nothing finished and recorded is lost, nothing is stored
twice, and the run is never ``finished``: the store's run stays ``running`` (read as
``lost`` once the process is gone) unless the CLI can mark it ``interrupted``.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import traceback

import pytest

from torchconform.errors import UserError

STOP_PREFIX = "torchconform: run stopped: "


def _cause(exc: BaseException) -> str:
    """One line for a sink's failure: a UserError's own line, an OSError's file and reason,
    else the exception's type and text (its traceback goes to the log)."""
    if isinstance(exc, UserError):
        return str(exc)
    if isinstance(exc, OSError):
        name = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        reason = exc.strerror or str(exc)
        fix = "; free space on that disk and resume the run" if exc.errno == 28 else ""
        return f"cannot write{name}: {reason}{fix}"
    try:
        text = " ".join(str(exc).split())
    except Exception:
        text = "<unprintable>"
    return f"{type(exc).__name__}: {text}"[:2000]


def say(config, line: str) -> None:
    """``line`` on pytest's real stderr (the CLI's pipe), whatever pytest is capturing now."""
    capman = config.pluginmanager.getplugin("capturemanager")
    try:
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            print(line, file=sys.stderr, flush=True)
    except Exception:   # noqa: BLE001 - capture in a state we cannot leave: say it where we can
        print(line, file=sys.__stderr__, flush=True)


class RecordingGuard:
    """Registered beside the controller plugin (the process that owns the sinks)."""

    def __init__(self, config):
        self.config = config
        self.session = None
        self.failure: str | None = None   # the first sink failure, one line
        self._lock = threading.Lock()

    def pytest_sessionstart(self, session):
        self.session = session

    def _failed(self, exc: BaseException, what: str) -> None:
        with self._lock:
            first = self.failure is None
            if first:
                self.failure = _cause(exc)
        if not first:
            return
        if not isinstance(exc, (UserError, OSError)):
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        # One line, to pytest's output (the CLI's log, and its screen: it starts with "torchconform: ").
        say(self.config, f"{STOP_PREFIX}cannot record outcomes ({what}): {self.failure}")
        self._stop(f"torchconform: cannot record outcomes: {self.failure}")

    def _stop(self, why: str) -> None:
        if self.session is not None and not self.session.shouldstop:
            self.session.shouldstop = why
        dsession = self.config.pluginmanager.getplugin("dsession")
        if dsession is not None:
            if not getattr(dsession, "shouldstop", None):
                dsession.shouldstop = why
            # Workers would run their queued tests to the end, recording nothing: stop them
            # now; what they had in flight is an interrupted test, not a crash.
            from torchconform.collectors.stopping import INTERRUPTED, stop_workers

            INTERRUPTED.set()
            try:
                stop_workers(self.config)
            except Exception:   # noqa: BLE001 - the stop is best effort; xdist's own shutdown follows
                pass

    def _guard(self, what: str):
        try:
            return (yield)
        except Exception as exc:   # noqa: BLE001 - any sink failure ends the run the same way
            self._failed(exc, what)
            return None

    @pytest.hookimpl(wrapper=True)
    def pytest_torchconform_run_start(self, config, run):
        return (yield from self._guard("run start"))

    @pytest.hookimpl(wrapper=True)
    def pytest_torchconform_planned(self, config, run, planned):
        return (yield from self._guard("planned count"))

    @pytest.hookimpl(wrapper=True)
    def pytest_torchconform_outcomes(self, config, outcomes):
        return (yield from self._guard(f"a batch of {len(outcomes)}"))

    @pytest.hookimpl(wrapper=True)
    def pytest_torchconform_run_end(self, config, run, exitstatus):
        return (yield from self._guard("run end"))
