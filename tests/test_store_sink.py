"""StoreSink: the runner plugin streaming outcomes into the store."""
import os
import subprocess
import sys

import pytest

from pg import db_url, pg_server  # noqa: F401  (fixtures)
from torchconform.core.outcome import Outcome
from torchconform.db import read_builds
from torchconform.db.sink import StoreSink, build_metadata
from torchconform.db.opening import open_store
from support import child_env

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "store")

RUN = {"build": "b1", "suite": "ops", "selection": "quick", "device": "refdev", "profile": "young-backend",
       "backend_profile": "refdev", "command_line": "python -m pytest suites/ops", "host": "ci-1",
       "start_time": "2026-01-01T00:00:00Z", "shard": "1/2", "torch_version": "2.13.0", "torch_git": "abc"}


def test_sink_hooks_store_batches_and_complete_the_run_at_the_end(db_url):
    sink = StoreSink(db_url, config=None)
    sink.pytest_torchconform_run_start(None, RUN)
    sink.pytest_torchconform_outcomes(None, [Outcome(f"t{i}", "pass") for i in range(3)])
    sink.pytest_torchconform_outcomes(None, [Outcome("m", "skip_backend", kind="missing_op", missing_op="aten::x")])
    with open_store(db_url) as store:
        # Mid-run: both batches are committed, the run is not complete yet.
        assert read_builds.summary(store, "b1")["total"] == 4
        assert read_builds.list_builds(store)[0]["complete"] is False
    sink.pytest_torchconform_run_end(None, {**RUN, "exitstatus": 1}, 1)
    # A second shard of the same build on another machine appends its own run.
    other = StoreSink(db_url, config=None)
    other.pytest_torchconform_run_start(None, {**RUN, "shard": "2/2", "host": "ci-2"})
    other.pytest_torchconform_outcomes(None, [Outcome("t9", "fail")])
    other.pytest_torchconform_run_end(None, RUN, 0)
    with open_store(db_url) as store:
        info = read_builds.build_info(store, "b1")
        s = read_builds.summary(store, "b1")
    assert [(r["shard"], r["host"], r["exit_status"], r["results"]) for r in info["runs"]] == [
        ("1/2", "ci-1", 1, 4), ("2/2", "ci-2", 0, 1)]
    assert info["complete"] and s["total"] == 5 and s["missing_ops"] == [{"op": "aten::x", "tests": 1}]
    assert (info["torch_version"], info["torch_git"], info["device"], info["profile"]) == (
        "2.13.0", "abc", "refdev", "young-backend")
    assert info["runs"][0]["command"] == "python -m pytest suites/ops"
    assert info["metadata"] == {"backend_profile": "refdev"}


def test_sink_rejects_a_bad_database_before_tests_run(tmp_path):
    with pytest.raises(pytest.UsageError, match="torchconform: cannot open database .*alice:\\*\\*\\*@"):
        StoreSink("postgresql+psycopg://alice:pw1@127.0.0.1:1/x", config=None)
    assert "pw1" not in str(build_metadata({"host": "x"}))


def _pytest(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, timeout=240, cwd=cwd, env=child_env(**(env or {})))


def test_real_pytest_run_with_the_plugin_then_a_killed_run(tmp_path):
    """The runner plugin with --tc-db: a full run, then a run killed by SIGKILL."""
    db = str(tmp_path / "runs.db")
    full = _pytest(os.path.join(FIXTURES, "sample_suite.py"), "--tc-device", "cpu", "--tc-db", db,
                   "--tc-build", "full", cwd=str(tmp_path))
    assert full.returncode == 1, full.stdout[-2000:] + full.stderr[-2000:]
    killed = _pytest(os.path.join(FIXTURES, "killed_suite.py"), "--tc-device", "cpu", "--tc-db", db,
                     "--tc-build", "killed", cwd=str(tmp_path), env={"TC_KILL_AFTER": "5"})
    assert killed.returncode == -9
    with open_store(db) as store:
        builds = {b["name"]: b for b in read_builds.list_builds(store)}
        full_summary = read_builds.summary(store, "full")
        killed_summary = read_builds.summary(store, "killed")
    assert builds["full"]["complete"] and builds["full"]["device"] == "cpu"
    assert full_summary["total"] == 11
    assert full_summary["outcomes"]["xfail"] == 1 and full_summary["outcomes"]["skip_eligibility"] == 1
    # Everything that finished before the kill is stored; the run stays visibly incomplete.
    assert killed_summary["total"] == 5 and killed_summary["outcomes"]["pass"] == 5
    assert builds["killed"]["complete"] is False
