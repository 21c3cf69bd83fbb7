"""Which test a serial run is running, kept where its supervisor can read it after the
process is gone.

In a serial run (``-n 0``) the tests run in pytest's own process: a test that ends it
(``os._exit(0)``, a C library's ``exit()``, an abort, a segfault) leaves no report and no
run end, and pytest's exit status may even be 0.  ``torchconform run`` loads this plugin
(``-p torchconform.collectors.inflight``) with ``TORCHCONFORM_INFLIGHT`` naming a file:
the node id of the test in flight is written there when the test starts and cleared
when it ends (one ``pwrite`` each, into space allocated up front so a full disk cannot
refuse it), and the CLI records that test as ``crash`` with the process's exit status
(cli/run_finish.py).  Under xdist the controller sees a worker die with its test and
this plugin does nothing.

The file's last byte (``ENDING_AT``) says pytest is ending its run: set when a stop
(SIGTERM, Ctrl-C) reached the session as it should, or when the session finishes.  A
test that ignores SIGTERM (or swallows the interrupt) leaves it unset: the CLI kills
pytest then instead of waiting out its grace (``ending``, cli/run_child.py).
"""
from __future__ import annotations

import contextlib
import os

import pytest

from torchconform import settings as tc_settings

ENV = "TORCHCONFORM_INFLIGHT"
SPACE = 64 * 1024
ENDING_AT = SPACE - 1   # one byte: 1 once pytest is ending its run


def _encode(nodeid: str) -> bytes:
    data = nodeid.encode("utf-8", "surrogateescape")
    return f"{len(data)}:".encode() + data


def read(path: str) -> str | None:
    """The node id in flight when the writer stopped, or None (none, or no file)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    head, sep, rest = data.partition(b":")
    if not sep or not head.isdigit() or int(head) == 0 or len(rest) < int(head):
        return None
    return rest[:int(head)].decode("utf-8", "surrogateescape")


def ending(path: str) -> bool | None:
    """Whether the serial pytest writing ``path`` has begun ending its run; None when there
    is no such file (not a serial run, or pytest has not configured this plugin yet)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(ENDING_AT)
            return fh.read(1) == b"\x01"
    except OSError:
        return None


class InFlight:
    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with contextlib.suppress(OSError, AttributeError):
            os.posix_fallocate(self.fd, 0, SPACE)
        self._put(b"0:")

    def _put(self, data: bytes, at: int = 0) -> None:
        with contextlib.suppress(OSError):   # never the reason a test fails
            os.pwrite(self.fd, data, at)

    def pytest_runtest_logstart(self, nodeid, location):
        self._put(_encode(nodeid))

    def pytest_runtest_logfinish(self, nodeid, location):
        self._put(b"0:")

    def pytest_keyboard_interrupt(self, excinfo):
        self._put(b"\x01", ENDING_AT)   # the stop reached the session: pytest ends its run in order

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        self._put(b"\x01", ENDING_AT)

    def pytest_unconfigure(self, config):
        with contextlib.suppress(OSError):
            os.close(self.fd)


def pytest_configure(config):
    path = tc_settings.given(ENV)
    if not path or hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None):
        return   # not asked for; an xdist worker; or an xdist controller (it sees workers die)
    config.pluginmanager.register(InFlight(path), "torchconform-inflight")
