"""Helpers of the run-fault tests (tests/test_faults_run_exit.py, test_faults_run_signals.py,
test_faults_run_store.py; issue 34): ``torchconform run`` of one fixture of tests/fixtures/faults,
the one error line it prints, what the store and the JSON lines hold, and no process left
behind (tests/ is on sys.path: no package)."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import REPO, child_env  # noqa: E402,F401 (child_env: for the test files)

from torchconform.collectors.sink_jsonl import read_jsonl  # noqa: E402

FX = REPO / "tests" / "fixtures" / "faults"
TC = [sys.executable, "-m", "torchconform"]


def run_args(fixture: str, build: str, db, workers: int = 0, *more: str) -> list[str]:
    """``torchconform run`` of one fixture file (the ops suite, cut to nothing by -k)."""
    db_args = ["--db", str(db)] if db else ["--no-db"]
    return ["run", "--device", "cpu", "--ops", "abs", "-n", str(workers), *db_args, "--build", build,
            "-k", fixture, *more, "--", str(FX / f"{fixture}.py")]


def tc(args, cwd, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(TC + [str(a) for a in args], cwd=cwd, env=env or child_env(), capture_output=True,
                          text=True, timeout=timeout)


def one_error(stderr: str, *words: str) -> str:
    """The single ``torchconform: error:`` line, holding ``words``; no traceback."""
    assert "Traceback" not in stderr, stderr[-4000:]
    lines = [ln for ln in stderr.splitlines() if ln.startswith("torchconform: error:")]
    assert len(lines) == 1, stderr[-4000:]
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def stored_ids(db: Path, build: str) -> list[str]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in con.execute(
            "SELECT t.test_id FROM results r JOIN tests t ON t.id = r.test_pk JOIN builds b ON b.id = r.build_id "
            "WHERE b.name = ?", (build,))]
    finally:
        con.close()


def stored(db: Path, build: str) -> dict[str, tuple[str, str]]:
    """test name -> (outcome, message) of ``build``, each stored once."""
    ids = stored_ids(db, build)
    assert len(ids) == len(set(ids)), "a test stored twice"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT t.test_id, v.outcome, v.message FROM results r JOIN tests t ON t.id = r.test_pk "
            "JOIN result_values v ON v.id = r.value_id JOIN builds b ON b.id = r.build_id WHERE b.name = ?", (build,))
        return {tid.split("::")[-1]: (outcome, message or "") for tid, outcome, message in rows}
    finally:
        con.close()


def build_row(db: Path, cwd: Path, build: str) -> dict:
    proc = tc(["builds", "--json", "--db", db], cwd)
    assert proc.returncode == 0, proc.stderr
    return {r["name"]: r for r in json.loads(proc.stdout)}[build]


def jsonl_ids(path: Path) -> list[str]:
    _, outcomes = read_jsonl(path)
    ids = [o.test_id for o in outcomes]
    assert len(ids) == len(set(ids)), "a test recorded twice"
    return ids


def processes_in(folder: Path) -> list[str]:
    """Live processes (not this one) whose working directory is ``folder``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.readlink(f"/proc/{entry}/cwd") == str(folder):
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z":
                    found.append(f"{entry}: {Path(f'/proc/{entry}/cmdline').read_bytes()[:200]!r}")
        except OSError:
            continue
    return found


def no_process_left(folder: Path, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while processes_in(folder) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not processes_in(folder), processes_in(folder)


def wait_for_mark(proc: subprocess.Popen, mark: Path, poll: float = 0.1) -> None:
    """Until the fixture's test writes ``mark`` (it is then in the state the test acts on);
    fails if ``proc`` ends first or after 300 s."""
    deadline = time.monotonic() + 300
    while not mark.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the ignoring test never started"
        time.sleep(poll)
