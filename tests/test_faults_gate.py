"""Faults: the gate on builds ingested from another runner's plain JUnit XML.

Such builds name no device and their tests carry no repro command, so the gate
cannot rerun a failing test for flaky confirmation.  It must say so in its
report ("not rerun", with why), decide on the outcomes it has (exit 0/1 by its
rules, 2 only for input errors) and store nothing for the reruns it could not
do.  Driven through the console command in child processes, as CI runs it.
"""
import json
import os
import subprocess
import sys

import pytest

from torchconform.db import read_builds
from torchconform.db.opening import open_store

CASE = '<testcase classname="tests.test_mod" name="{name}" file="tests/test_mod.py" time="0.01"{body}'
FAILURE = '><failure message="AssertionError: {name} broke">assert 1 == 2</failure></testcase>'


def junit(path, failing=(), names=("test_a", "test_b", "test_c")):
    """A plain pytest JUnit file: ``names`` pass except ``failing``."""
    cases = [CASE.format(name=n, body=FAILURE.format(name=n) if n in failing else "/>") for n in names]
    path.write_text('<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="pytest" '
                    f'tests="{len(names)}" failures="{len(failing)}" errors="0" skipped="0">\n'
                    + "\n".join(cases) + "\n</testsuite></testsuites>\n")
    return path


def tc(*args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHCONFORM_", "PYTEST_", "GITHUB_"))}
    return subprocess.run([sys.executable, "-m", "torchconform", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def ingested(tmp_path):
    """Builds ``old`` (all pass) and ``new`` (test_b regressed, test_d new and failing)
    ingested from plain JUnit files; returns (db, tmp_path)."""
    db = tmp_path / "results.db"
    old = junit(tmp_path / "old.xml")
    new = junit(tmp_path / "new.xml", failing=("test_b", "test_d"), names=("test_a", "test_b", "test_c", "test_d"))
    for build, path in (("old", old), ("new", new)):
        proc = tc("ingest", path, "--build", build, "--db", db, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    return db, tmp_path


def stored_runs(db) -> dict:
    with open_store(str(db), create=False) as store:
        return {b["name"]: b["runs"] for b in read_builds.list_builds(store)}


def test_failing_tests_that_cannot_be_rerun_are_reported_and_the_gate_decides(ingested):
    db, tmp = ingested
    before = stored_runs(db)
    summary = tmp / "gate.md"
    proc = tc("gate", "--build", "new", "--baseline", "old", "--db", db, "--summary", summary, cwd=tmp)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr == ""
    assert "gate FAILED" in proc.stdout
    text = summary.read_text()
    for where in (proc.stdout, text):
        assert "2 failing tests not rerun for flaky confirmation (no repro command recorded" in where
        assert "`tests/test_mod.py::test_b`" in where and "`tests/test_mod.py::test_d`" in where
    assert "| regression | fail | FAIL |" in text and "| new_test_failing | fail | FAIL |" in text

    again = tc("gate", "--build", "new", "--baseline", "old", "--db", db, "--json", cwd=tmp)
    assert again.returncode == 1, again.stderr
    out = json.loads(again.stdout)
    assert out["exit_code"] == 1 and not out["passed"] and out["flaky"] == []
    assert set(out["not_rerun"]) == {"tests/test_mod.py::test_b", "tests/test_mod.py::test_d"}
    assert all("no repro command" in why for why in out["not_rerun"].values())
    # Nothing was rerun, so no (empty) gate-rerun run was stored by either call.
    assert stored_runs(db) == before == {"old": 1, "new": 1}


def test_gate_passes_by_its_rules_when_the_findings_only_warn(ingested):
    db, tmp = ingested
    config = tmp / "gate.yaml"
    config.write_text("rules:\n  regression: warn\n  new_test_failing: warn\n  coverage_drop: warn\n")
    proc = tc("gate", "--build", "new", "--baseline", "old", "--db", db, "--config", config, cwd=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Findings that only warn are not rerun candidates: nothing to report as not rerun.
    assert "gate PASSED" in proc.stdout and "warn  regression" in proc.stdout and "not rerun" not in proc.stdout
    assert proc.stderr == ""
    assert stored_runs(db) == {"old": 1, "new": 1}


def test_input_errors_still_exit_2_and_store_nothing(ingested):
    db, tmp = ingested
    proc = tc("gate", "--build", "new", "--baseline", "nope", "--db", db, cwd=tmp)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "unknown build 'nope'" in proc.stderr
    assert stored_runs(db) == {"old": 1, "new": 1}
