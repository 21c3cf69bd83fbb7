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
"""
from __future__ import annotations

import contextlib
import os

from torchconform import settings as tc_settings

ENV = "TORCHCONFORM_INFLIGHT"
SPACE = 64 * 1024


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


class InFlight:
    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with contextlib.suppress(OSError, AttributeError):
            os.posix_fallocate(self.fd, 0, SPACE)
        self._put(b"0:")

    def _put(self, data: bytes) -> None:
        with contextlib.suppress(OSError):   # never the reason a test fails
            os.pwrite(self.fd, data, 0)

    def pytest_runtest_logstart(self, nodeid, location):
        self._put(_encode(nodeid))

    def pytest_runtest_logfinish(self, nodeid, location):
        self._put(b"0:")

    def pytest_unconfigure(self, config):
        with contextlib.suppress(OSError):
            os.close(self.fd)


def pytest_configure(config):
    path = tc_settings.given(ENV)
    if not path or hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None):
        return   # not asked for; an xdist worker; or an xdist controller (it sees workers die)
    config.pluginmanager.register(InFlight(path), "torchconform-inflight")
