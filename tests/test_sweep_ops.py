"""--suite ops: the runner's pytest path with one shard kept, and --resume skipping what is stored."""
import os
import sqlite3
import subprocess
import sys


def _count(db):
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*), COUNT(DISTINCT test_pk) FROM results").fetchone()


def test_ops_shard_then_resume_runs_nothing_twice(tmp_path):
    db = str(tmp_path / "r.db")
    cmd = [sys.executable, "-m", "torchconform", "sweep", "--suite", "ops", "--selection", "quick",
           "--shards", "60", "--shard", "7", "--build", "ops-nightly", "--device", "cpu", "--db", db,
           "--workers", "1", "--timeout", "120"]
    # Run like a user would: not as part of this (possibly xdist) pytest session.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert "outcomes" in first.stdout, first.stdout + first.stderr
    total, distinct = _count(db)
    assert 0 < total == distinct  # one shard of the quick ops selection, each test once
    again = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert _count(db) == (total, distinct), again.stdout + again.stderr  # nothing of that shard ran again
