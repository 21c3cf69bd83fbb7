"""Kill the sweep process mid-run; --resume stores every model exactly once."""
import os
import signal
import sqlite3
import subprocess
import sys
import time

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "zoo", "faulty.py")
N = 10


def _stored(db):
    if not os.path.exists(db):
        return []
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            return [r[0] for r in conn.execute(
                "SELECT t.test_id FROM results r JOIN tests t ON t.id = r.test_pk")]
    except sqlite3.OperationalError:
        return []


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _sweep(selection, db, *extra):
    cmd = [sys.executable, "-m", "torchconform", "sweep", "--selection", str(selection), "--build", "nightly",
           "--device", "cpu", "--db", str(db), "--variants", "eval", "--workers", "2", *extra]
    env = dict(os.environ, TC_SLOW_SECONDS="0.5")
    return cmd, env


def test_killed_sweep_resumes_and_stores_each_model_once(tmp_path):
    selection = tmp_path / "models.txt"
    ids = [f"py/{FIXTURE}::slow_{i}" for i in range(N)]
    selection.write_text("\n".join(ids) + "\n")
    db = tmp_path / "r.db"
    cmd, env = _sweep(selection, db)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(_stored(db)) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)  # the controller only: its workers must not outlive it
        proc.wait(30)
        deadline = time.monotonic() + 20
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _group_alive(proc.pid), "a sweep worker outlived the killed controller"
    finally:
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    partial = _stored(db)
    assert 3 <= len(partial) < N, "the sweep must have been killed part-way"

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "--resume" in again.stderr  # no silent duplicates

    resumed = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(partial)} already stored, {N - len(partial)} run" in resumed.stdout
    final = _stored(db)
    assert sorted(final) == sorted(f"models::{i}::eval" for i in ids)  # every model exactly once
