"""StoreSink: the runner plugin's sink that streams outcomes into the store.

Registered by the torchconform pytest plugin (controller process only) when
``--tc-db`` is given.  Each batch the plugin flushes becomes one transaction, so
a killed run keeps everything flushed before it died; the run is marked
ended (end time, exit status, ``finished`` or ``interrupted``) only in
``pytest_torchconform_run_end``; a run killed before that stays ``running``
with this process's pid, which readers show as ``lost`` once it is gone.

Several shards of one build (same ``--tc-build`` on several machines or
processes) each add their own run to the same build: the sink always appends.
"""
from __future__ import annotations

import socket
from datetime import datetime, timezone

from torchconform import settings as tc_settings
from torchconform.core.coverage import RunCoverage
from torchconform.db.coverage import write_changes
from torchconform.db.not_run import write_run
from torchconform.db.runstate import PLAN_ENV, plan_steps
from torchconform.db.opening import open_store
from torchconform.errors import UserError

# Keys of the plugin's ``run`` dict that describe the run rather than the build.
RUN_KEYS = {"build", "suite", "selection", "shard", "host", "command", "command_line", "start", "start_time",
            "end", "end_time", "counts", "exitstatus", "total", "outcomes"}


def build_metadata(run: dict) -> dict:
    """Build-level metadata from the run dict (torch/backend/device/branch...)."""
    meta = {}
    for key, value in run.items():
        if key in RUN_KEYS or value in (None, "", [], {}):
            continue
        meta[key] = value
    return meta


def default_build_name(run: dict) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{run.get('suite') or 'run'}-{run.get('device') or 'device'}-{stamp}"


class StoreSink:
    """pytest plugin object implementing the runner's three torchconform hooks."""

    def __init__(self, url: str | None, config=None):
        self.config = config
        # Open (and create or check the schema) now, so a bad --tc-db fails before any test runs;
        # a corrupt file too (the store checks itself before its first write).
        try:
            self.store = open_store(url)
            self.store.check_sound()
        except UserError as exc:
            import pytest

            raise pytest.UsageError(f"torchconform: {exc}") from None
        self.run_id: int | None = None
        self.build: str | None = None
        self.stored = 0
        self.coverage = RunCoverage()

    def pytest_torchconform_run_start(self, config, run):
        self.build = run.get("build") or default_build_name(run)
        self.build_id = self.store.ensure_build(self.build, append=True, **build_metadata(run))
        plan = plan_steps(tc_settings.given(PLAN_ENV))
        if plan:  # runs of a plan or shards of a suite: the build waits for all of them
            self.store.add_plan(self.build, plan)
        command = run.get("command") or run.get("command_line") or ""
        self.run_id = self.store.start_run(
            self.build, suite=run.get("suite") or "", selection=run.get("selection") or "",
            shard=run.get("shard") or "", host=run.get("host") or socket.gethostname(), command=command)

    def pytest_torchconform_planned(self, config, run, planned):
        if self.run_id is not None:
            self.store.set_planned(self.run_id, planned)

    def pytest_torchconform_outcomes(self, config, outcomes):
        if self.run_id is None or not outcomes:
            return
        # The overloads the batch's tests reached (the coverage audit, db/coverage.py), written
        # in the batch's own transaction: a killed run keeps the coverage of what it stored.
        self.coverage.add(outcomes)
        changes = self.coverage.take_changes()
        with self.store.write() as conn:
            self.stored += self.store.add_outcomes(self.run_id, outcomes, conn=conn)
            if changes:
                write_changes(conn, self.run_id, self.build_id, changes)

    def pytest_torchconform_run_end(self, config, run, exitstatus):
        if self.run_id is None:
            return
        if run.get("not_run"):   # what the selection left out, per reason (db/not_run.py): counts, not results
            with self.store.write() as conn:
                write_run(conn, self.run_id, self.build_id, run["not_run"])
        self.store.finish_run(self.run_id, int(exitstatus))
        self.run_id = None
        self.store.close()
