"""The xdist controller survives a worker that ends its session holding tests.

pytest-xdist's ``DSession.worker_workerfinished`` (3.x) asserts that a worker which
finished its session in order has no test left assigned: ``assert not crashitem``.
A worker ends its session early, without ``shouldstop``/``shouldfail``, when its
run loop raised (an INTERNALERROR on the worker: a hook that failed, an index into a
collection that differs from the controller's) or a test called ``pytest.exit``
with a status other than 2.  The assertion then raises in the controller's event
loop and ends the whole run (pytest-dev/pytest-xdist#204, #1178).  Here such a
worker is handled as xdist handles one that died: its first assigned test is
reported as crashed while running (``worker_errordown``), the rest go back to the
queue and a replacement starts.

A worker's death after it collected never counts against ``--max-worker-restart``
(each one costs one test, so a run cannot loop); deaths before collection still end
the run at the second (collectors/controller.py, ``pytest_testnodedown``).

Test crashes themselves never reach this path where the fork server runs
(collectors/forkserver.py): there the worker stays up and reports the crash.
"""
from __future__ import annotations

import pytest

ENDED_HOLDING = "the worker ended its session (exit status {status}) with tests still assigned"


class XdistGuard:
    def __init__(self, config):
        self.config = config

    def _dsession(self):
        return self.config.pluginmanager.getplugin("dsession")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session):
        dsession = self._dsession()
        own = getattr(dsession, "worker_workerfinished", None)
        if own is None or not hasattr(dsession, "worker_errordown"):
            return

        def worker_workerfinished(node):
            # xdist's own checks, in its order, up to its assertion (whose text pytest's
            # assertion rewriting changes, so it is avoided rather than caught)
            out = getattr(node, "workeroutput", None) or {}
            sched = dsession.sched
            if out.get("exitstatus") != 2 and not out.get("shouldfail") and not out.get("shouldstop") \
                    and sched is not None and node in sched.nodes:
                crashitem = sched.remove_node(node)   # requeues the node's other tests
                if crashitem:
                    dsession.handle_crashitem(crashitem, node)
                    active = getattr(dsession, "_active_nodes", None)
                    if active is not None:
                        active.add(node)   # worker_errordown removes it (an internal error may have already)
                    # its scheduler entry is gone already: errordown counts it and starts a replacement
                    dsession.worker_errordown(node, ENDED_HOLDING.format(status=out.get("exitstatus")))
                    return None
            return own(node)

        dsession.worker_workerfinished = worker_workerfinished

    @pytest.hookimpl(optionalhook=True, trylast=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        dsession = self._dsession()
        # 0: the controller stopped replacing workers that fail at start-up; keep that
        if dsession is not None and getattr(dsession, "_max_worker_restart", 0) != 0:
            dsession._max_worker_restart = None
