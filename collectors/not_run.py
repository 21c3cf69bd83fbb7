"""Not-run accounting on the pytest side: which tests the run's selection left out, and why
(torchconform/core/not_run.py has the shapes; docs/classification.md, "Not run").

Two sources, both counted in the process that collects (the serial process, or each xdist
worker: every worker collects the same tests, so the controller keeps one tally, never a sum):

* ``pytest_deselected``: whoever deselects is named by where the call came from: pytest's
  ``-k`` / ``-m`` / ``--deselect``, a suite's own collection rule (a file of ``suites/``:
  the selection, e.g. the ops suite's complex64 rule), an upstream spec (``spec_select``).
  A shard's split is not counted (those tests run in another shard of the build), nor is
  ``--resume``'s (the build has them already);
* :func:`uncollected`: a suite that leaves tests out before pytest sees them says how many
  (the ops suite's selection and ``--ops`` instantiate only the OpInfos and dtypes chosen).

The controller puts the run's tally in its run dict (``run["not_run"]``) before the run's end
reaches the sinks (JSON lines, the store's ``not_run`` table).  Under xdist a worker hands its
tally over in ``workeroutput`` when it finishes; a run whose every worker died before
finishing has none.
"""
from __future__ import annotations

import os
import sys

import pytest

from torchconform import settings as tc_settings
from torchconform.core import not_run

WORKER_KEY = "tc_not_run"
# a file of the suites' folder (a sibling of this one) deselecting is a suite's selection rule
_SUITES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "suites") + os.sep
_FRAMES = 40

# Tests suites left out before collection, in this process (see uncollected()).
_UNCOLLECTED: dict = {}


def uncollected(reason: str, count: int, detail: str = "") -> None:
    """A suite left ``count`` tests out before pytest collected them (``reason``: one of
    core.not_run.REASONS).  Harmless without the plugin (nothing reads it then)."""
    not_run.add(_UNCOLLECTED, reason, count, detail)


def reset_uncollected() -> None:
    _UNCOLLECTED.clear()


def _selection_detail(config) -> str:
    return tc_settings.given("TORCHCONFORM_SELECTION") or ""


def deselection_reason(config, frame) -> tuple[str, str] | None:
    """(reason, detail) of a deselection from the call stack above ``frame``; None for one
    that is not a not-run (a shard's split, a resume)."""
    f, depth = frame, 0
    while f is not None and depth < _FRAMES:
        code, module = f.f_code, f.f_globals.get("__name__", "") or ""
        if code.co_name == "deselect_by_keyword":
            return not_run.KEYWORD, getattr(config.option, "keyword", "") or ""
        if code.co_name == "deselect_by_mark":
            return not_run.MARK, getattr(config.option, "markexpr", "") or ""
        if module == "_pytest.main" and code.co_name == "pytest_collection_modifyitems":
            return not_run.DESELECT, ""
        if module.endswith("pytest_shard"):
            return None
        if module.endswith("spec_select"):
            return not_run.SPEC, os.path.basename(tc_settings.given("TORCHCONFORM_UPSTREAM_SPEC") or "")
        if os.path.abspath(code.co_filename).startswith(_SUITES_DIR):
            return not_run.SELECTION, _selection_detail(config)
        f, depth = f.f_back, depth + 1
    return not_run.OTHER, ""


class NotRunTally:
    """Registered in every process of a torchconform run (plugin.py)."""

    def __init__(self, config):
        self.config = config
        self.deselected: dict = {}
        self.from_workers: list[dict] = []

    def pytest_deselected(self, items):
        items = list(items)
        if not items:
            return
        why = deselection_reason(self.config, sys._getframe(1))
        if why is not None:
            not_run.add(self.deselected, why[0], len(items), why[1], items[0].nodeid)

    def tally(self) -> dict:
        """This process's tally: its deselections plus what its suites left out uncollected."""
        out: dict = {}
        for source in (self.deselected, _UNCOLLECTED):
            for reason, e in source.items():
                not_run.add(out, reason, e["count"], e["detail"], e["example"])
        return out

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:          # an xdist worker: the controller counts
            workeroutput[WORKER_KEY] = self.tally()
            return
        controller = self.config.pluginmanager.get_plugin("torchconform-controller")
        if controller is None or not getattr(controller, "started", False):
            return
        got = not_run.merged(self.from_workers) if getattr(controller, "distributed", False) else self.tally()
        if got:
            controller.run["not_run"] = got

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        got = (getattr(node, "workeroutput", None) or {}).get(WORKER_KEY)
        if got:
            self.from_workers.append(got)
