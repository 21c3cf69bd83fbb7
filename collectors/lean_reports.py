"""The xdist controller's memory at 150,000 tests: reports kept lean once recorded.

pytest's terminal reporter keeps every test report it is shown (``stats``) until the
session ends, for its closing counts and summaries.  Under xdist each report arrives
with what the worker attached: torchconform's ``report.tc`` (verdict, test info,
evidence), the test's keywords and its captured output.  Once every hook has seen a
report (this hook runs last), a report that did not fail keeps only what the closing
line counts, and passed set-up and teardown reports (which pytest keeps but never
reads) are let go; a failed one keeps its output for pytest's failure summary in the log.
Measured with bench/crash_scale.py (controller peak RSS, docs/seed-scale.md).
"""
from __future__ import annotations

import pytest


class LeanReports:
    def __init__(self, config):
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report):
        # set-up and teardown reports that passed are kept under the empty category, which
        # pytest ignores ("setup/teardown reports have an empty key"): two of every three reports
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        kept = getattr(terminal, "stats", {}).get("")
        if kept:
            kept.clear()
        if getattr(report, "tc", None) is not None:
            report.tc = None
        report.keywords = {}
        if not report.failed:
            report.sections = []
            if report.passed:
                report.longrepr = None
