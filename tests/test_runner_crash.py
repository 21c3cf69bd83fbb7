"""Crash isolation and nothing lost: fixture tests that really segfault, abort,
exit and hang; a run killed half way keeps what finished."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import FIXTURES, REPO, by_name, child_env, run_pytest  # noqa: E402

from torchconform.collectors.sink_jsonl import read_jsonl  # noqa: E402


def test_crash_abort_exit_and_hang_are_recorded_and_the_run_goes_on(tmp_path):
    proc, run, outcomes = run_pytest(
        [FIXTURES / "fx_crash.py", "--tc-device", "cpu", "-n", "2", "--tc-timeout", "4", "-p", "no:randomly"],
        tmp_path, timeout=600)
    got = {k: v.outcome for k, v in by_name(outcomes).items()}
    assert got == {
        "test_before": "pass", "test_segfault": "crash", "test_abort": "crash", "test_exit": "crash",
        "test_hang": "timeout", "test_after": "pass",
    }, proc.stdout[-3000:]
    hang = by_name(outcomes)["test_hang"]
    assert hang.duration >= 4 and "timeout" in hang.message
    assert "crashed while running" in by_name(outcomes)["test_segfault"].message
    assert run["exitstatus"] == 1 and run["total"] == 6


def _wait_for_outcomes(path: Path, n: int, proc, limit=240.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if path.exists():
            count = sum(1 for line in path.read_text().splitlines() if '"type": "outcome"' in line)
            if count >= n:
                return count
        assert proc.poll() is None, "run ended early"
        time.sleep(0.5)
    raise AssertionError(f"fewer than {n} outcomes in {path} after {limit} s")


def _start_slow_run(tmp_path):
    jsonl = tmp_path / "killed.jsonl"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "--rootdir", str(REPO),
           str(FIXTURES / "fx_slow.py"), "--tc-device", "cpu", "--tc-jsonl", str(jsonl)]
    proc = subprocess.Popen(cmd, cwd=REPO, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, jsonl


def test_sigkill_keeps_finished_results(tmp_path):
    proc, jsonl = _start_slow_run(tmp_path)
    try:
        _wait_for_outcomes(jsonl, 5, proc)  # the five fast tests, flushed while the last one hangs
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    run, outcomes = read_jsonl(jsonl)
    assert sorted(o.test_id.split("::")[-1] for o in outcomes) == [f"test_fast[{i}]" for i in range(5)]
    assert all(o.outcome == "pass" for o in outcomes)
    assert run["device"] == "cpu"


def test_sigterm_ends_the_run_in_order(tmp_path):
    proc, jsonl = _start_slow_run(tmp_path)
    try:
        _wait_for_outcomes(jsonl, 5, proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert records[-1]["type"] == "run_end"
    outcomes = {r["test_id"].split("::")[-1]: r["outcome"] for r in records if r["type"] == "outcome"}
    assert outcomes["test_zz_hang"] == "error"  # interrupted while running: never a pass
    assert sum(v == "pass" for v in outcomes.values()) == 5
