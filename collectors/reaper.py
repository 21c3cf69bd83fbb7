"""Daemons the tests leave behind end with the process that ran the tests.

Loaded by ``torchconform run`` (``-p torchconform.collectors.reaper``) in every process
that runs tests: an xdist worker, or pytest itself in a serial run.  That process adopts
the orphans of its descendants (``PR_SET_CHILD_SUBREAPER``: a double fork or ``setsid``
changes nothing), and when its session ends it ends every process below it that left
its process group or session (a daemon; ordinary subprocesses in its own group, such
as a compile worker pool, are left to their owners and to the CLI's final sweep), naming
each on its output (the run's log).  This is what keeps a daemon that kept xdist's
channel to the worker open from holding the run's end hostage; ``torchconform run``
ends whatever is left once pytest has ended (cli/run_finish.py).
"""
from __future__ import annotations

import os

import pytest

from torchconform.collectors.recording import say
from torchconform.leftovers import LEFTOVER_PREFIX, become_subreaper, descendants, end_leftovers


class Reaper:
    def __init__(self):
        self.pgid, self.sid = os.getpgid(0), os.getsid(0)

    def _detached(self, p) -> bool:
        try:
            return os.getpgid(p.pid) != self.pgid or os.getsid(p.pid) != self.sid or p.ppid != os.getpid()
        except OSError:
            return False

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        if not any(self._detached(p) for p in descendants()):
            return
        ended = end_leftovers(settle=0.0, keep=lambda p: not self._detached(p))
        for p in ended:
            say(session.config, f"{LEFTOVER_PREFIX}{p.describe()}")


def pytest_configure(config):
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return   # an xdist controller runs no tests
    if become_subreaper():
        config.pluginmanager.register(Reaper(), "torchconform-reaper")
