"""JUnit XML sink: standard JUnit, classification carried as ``<properties>``.

Any JUnit reader sees ordinary pass/failure/error/skipped test cases; torchconform's
ingest reads the ``tc.*`` properties back (documented in docs/classification.md).
The file is rewritten atomically at every flush, so a killed run still leaves a
valid file holding what finished.
"""
from __future__ import annotations

import os
import socket
import time
import xml.etree.ElementTree as ET

from torchconform.collectors.outcome import (
    CRASH, ERROR, FAIL, SKIP_BACKEND, SKIP_ELIGIBILITY, TIMEOUT, XFAIL, Outcome,
)

# Property names written per test case (ingest reads these back).
PROPERTY_FIELDS = (
    ("tc.outcome", "outcome"), ("tc.kind", "kind"), ("tc.missing_op", "missing_op"),
    ("tc.fallback_ops", "fallback_ops"), ("tc.skiplist_entry", "skiplist_entry"),
    ("tc.op", "op"), ("tc.variant", "variant"), ("tc.dtype", "dtype"), ("tc.device", "device"),
    ("tc.suite", "suite"), ("tc.test_id", "test_id"), ("tc.repro", "repro"), ("tc.attempt", "attempt"),
)


def _classname(o: Outcome) -> str:
    mod = o.file[:-3] if o.file.endswith(".py") else o.file
    mod = mod.replace("/", ".").replace("\\", ".")
    return f"{mod}.{o.cls}" if o.cls else mod


def testcase_element(o: Outcome) -> ET.Element:
    tc = ET.Element("testcase", classname=_classname(o), name=o.name or o.test_id,
                    time=f"{o.duration:.3f}", file=o.file)
    props = ET.SubElement(tc, "properties")
    for pname, field in PROPERTY_FIELDS:
        value = getattr(o, field)
        if isinstance(value, list):
            value = ",".join(value)
        if value not in ("", None, 0) or field == "outcome":
            ET.SubElement(props, "property", name=pname, value=str(value))
    if o.outcome == FAIL:
        ET.SubElement(tc, "failure", message=o.message, type="fail").text = o.message
    elif o.outcome in (ERROR, CRASH, TIMEOUT):
        ET.SubElement(tc, "error", message=o.message, type=o.outcome).text = o.message
    elif o.outcome in (SKIP_ELIGIBILITY, SKIP_BACKEND):
        ET.SubElement(tc, "skipped", message=o.message, type=o.kind or o.outcome)
    elif o.outcome == XFAIL:
        ET.SubElement(tc, "skipped", message=o.message, type="pytest.xfail")
    return tc


def junit_counts(outcomes: list[Outcome]) -> dict:
    """The <testsuite> counters JUnit readers expect, from outcome records."""
    counts = {"tests": len(outcomes), "failures": 0, "errors": 0, "skipped": 0}
    for o in outcomes:
        if o.outcome == FAIL:
            counts["failures"] += 1
        elif o.outcome in (ERROR, CRASH, TIMEOUT):
            counts["errors"] += 1
        elif o.outcome in (SKIP_ELIGIBILITY, SKIP_BACKEND, XFAIL):
            counts["skipped"] += 1
    return counts


def write_junit(path, run: dict, outcomes: list[Outcome]) -> None:
    counts = junit_counts(outcomes)
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name=f"torchconform.{run.get('suite') or 'tests'}",
                          timestamp=str(run.get("start_time", "")), hostname=str(run.get("host") or socket.gethostname()),
                          time=f"{sum(o.duration for o in outcomes):.3f}", **{k: str(v) for k, v in counts.items()})
    props = ET.SubElement(suite, "properties")
    for key in ("build", "suite", "selection", "device", "profile", "shard", "torch_version", "branch", "commit"):
        if run.get(key) not in (None, ""):
            ET.SubElement(props, "property", name=f"tc.run.{key}", value=str(run[key]))
    for o in outcomes:
        suite.append(testcase_element(o))
    ET.indent(root)
    tmp = f"{path}.tmp{os.getpid()}"
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, path)


class JunitSink:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self.run: dict = {}
        self.outcomes: list[Outcome] = []
        self._last_write = 0.0

    # Rewriting the whole file is O(n); doing it at most every few seconds keeps
    # a full run linear while a killed run still leaves a recent, valid file.
    REWRITE_EVERY = 10.0

    def pytest_torchconform_run_start(self, config, run):
        self.run = dict(run)

    def pytest_torchconform_outcomes(self, config, outcomes):
        self.outcomes.extend(outcomes)
        if time.monotonic() - self._last_write >= self.REWRITE_EVERY:
            write_junit(self.path, self.run, self.outcomes)
            self._last_write = time.monotonic()

    def pytest_torchconform_run_end(self, config, run, exitstatus):
        self.run = dict(run)
        write_junit(self.path, self.run, self.outcomes)
