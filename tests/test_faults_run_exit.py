"""A run's faults, part two (issue 34, items 4 and 5), caused for real through ``torchconform
run``: a test calling ``os._exit(0)`` in a serial run, a run stopped by ``-x``/``--maxfail``,
a test leaving a daemon behind (double fork, ``setsid``, 600 s of sleep holding every inherited
descriptor).  Signals: test_faults_run_signals.py; the store and the disk: test_faults_run_store.py.

Each checks: nothing finished lost, nothing stored twice, the build never complete when
tests did not run, the exit status, one line of error, no process left (docs/reliability.md).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from faults_run_support import build_row, child_env, jsonl_ids, no_process_left, one_error, run_args, stored, tc


# -- item 4: os._exit(0) in a serial run ---------------------------------------------------

def test_a_test_calling_os_exit_in_a_serial_run_is_a_crash_and_the_run_incomplete(tmp_path):
    """Before: `run` exited 0 with "1 outcomes, passed 1"; the exiting test recorded nowhere."""
    db = tmp_path / "t.db"
    proc = tc(run_args("fx_exit", "exits", db), tmp_path)
    assert proc.returncode == 3, proc.stderr[-3000:]
    one_error(proc.stderr, "run INCOMPLETE", "fx_exit.py::test_b_exits ended the pytest process (exit status 0)",
              "1 of 3 planned tests not run", "--resume --build exits")
    assert "INCOMPLETE" in proc.stdout and "crash 1" in proc.stdout
    got = stored(db, "exits")
    assert sorted(got) == ["test_a_before", "test_b_exits"]
    assert got["test_a_before"][0] == "pass"
    assert got["test_b_exits"][0] == "crash" and "exit status 0" in got["test_b_exits"][1]
    jsonl = next((tmp_path / ".torchconform" / "runs").glob("exits*.jsonl"))
    assert sorted(i.split("::")[-1] for i in jsonl_ids(jsonl)) == ["test_a_before", "test_b_exits"]
    row = build_row(db, tmp_path, "exits")
    assert row["complete"] is False and row["unfinished_runs"] == 1
    summary = json.loads(tc(["summary", "--build", "exits", "--json", "--db", db], tmp_path).stdout)
    assert summary["unfinished_runs"][0]["status"] == "interrupted"
    # The fix the line gives: --resume runs only the test that never ran; the crash stays a result.
    resumed = tc(run_args("fx_exit", "exits", db, 0, "--resume"), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert sorted(stored(db, "exits")) == ["test_a_before", "test_b_exits", "test_c_after"]
    assert build_row(db, tmp_path, "exits")["complete"] is True
    no_process_left(tmp_path)


@pytest.mark.parametrize("stop", ["-x", "--maxfail=1"])
def test_a_run_stopped_by_x_or_maxfail_is_incomplete_and_resumable(tmp_path, stop):
    """Before: a run -x stopped ended `finished`, so the build looked complete with 1 of 3 tests."""
    db = tmp_path / "t.db"
    args = run_args("fx_maxfail", "stopped", db)
    proc = tc(args[:-1] + [stop, args[-1]], tmp_path)
    assert proc.returncode == 3, proc.stderr[-3000:]
    one_error(proc.stderr, "run INCOMPLETE", "pytest stopped early", "-x or --maxfail",
              "2 of 3 planned tests not run", "--resume --build stopped")
    assert sorted(stored(db, "stopped")) == ["test_a_fails"]
    assert build_row(db, tmp_path, "stopped")["complete"] is False
    summary = json.loads(tc(["summary", "--build", "stopped", "--json", "--db", db], tmp_path).stdout)
    assert summary["unfinished_runs"][0]["status"] == "interrupted"
    resumed = tc(run_args("fx_maxfail", "stopped", db, 0, "--resume"), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]   # only the two unrun tests ran (test_a_fails has its result)
    assert sorted(stored(db, "stopped")) == ["test_a_fails", "test_b_after", "test_c_after"]
    assert build_row(db, tmp_path, "stopped")["complete"] is True
    no_process_left(tmp_path)


# -- item 5: a daemon left behind ------------------------------------------------------------

@pytest.mark.parametrize("workers", [0, 2])
def test_a_daemon_a_test_leaves_behind_is_ended_named_and_never_waited_for(tmp_path, workers):
    """Before: every test finished in 10 s, `run` returned after 613 s (blocked on a pipe
    the daemon inherited), and the daemon lived on."""
    db, pids = tmp_path / "t.db", tmp_path / "daemon.pids"
    started = time.monotonic()
    proc = tc(run_args("fx_daemon", "daemon", db, workers), tmp_path, env=child_env(TC_DAEMON_PIDS=pids),
              timeout=400)
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert took < 300, took   # far from the daemon's 600 s
    (daemon,) = [int(p) for p in pids.read_text().split()]
    assert not Path(f"/proc/{daemon}").exists() or "Z" in Path(f"/proc/{daemon}/stat").read_text().split()[2]
    named = f"torchconform: ended a process the tests left behind: pid {daemon} ("
    assert named in proc.stderr and "own session" in proc.stderr, proc.stderr[-3000:]
    (log,) = (tmp_path / ".torchconform" / "runs").glob("daemon*.log")
    assert named in log.read_text()
    got = stored(db, "daemon")
    assert got == {"test_a_leaves_a_daemon": ("pass", ""), "test_b_after": ("pass", "")}
    assert build_row(db, tmp_path, "daemon")["complete"] is True
    no_process_left(tmp_path)
