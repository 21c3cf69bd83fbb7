"""A run's faults, part two (issue 34, items 2, 4, 5, 7 and the SIGTERM bound), caused for
real through ``torchconform run``: a disk that fills up mid-run (a small tmpfs in a private
mount namespace), a test calling ``os._exit(0)`` in a serial run, a test leaving a daemon
behind (double fork, ``setsid``, 600 s of sleep holding every inherited descriptor), a test
ignoring SIGTERM when the run is cancelled (``-n 2`` and serial), two runs of one build at once.

Each checks: nothing finished lost, nothing stored twice, the build never complete when
tests did not run, the exit status, one line of error, no process left (docs/reliability.md).
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import REPO, child_env  # noqa: E402

from torchconform.collectors.sink_jsonl import read_jsonl  # noqa: E402
from torchconform.core.outcome import INTERRUPTED_MESSAGE as INTERRUPTED  # noqa: E402

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


# -- the SIGTERM bound with a test ignoring SIGTERM ------------------------------------------

def test_sigterm_stops_a_run_whose_test_ignores_sigterm_within_the_bound(tmp_path):
    """Before: a test ignoring SIGTERM delayed the run's own SIGTERM stop to 13 s."""
    db, mark = tmp_path / "t.db", tmp_path / "ignoring"
    proc = subprocess.Popen(TC + run_args("fx_ignore_term", "cancelled", db, workers=2), cwd=tmp_path,
                            env=child_env(TC_TERM_MARK=mark), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 300
        while not mark.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the ignoring test never started"
            time.sleep(0.1)
        time.sleep(0.5)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
    # No wall-clock verdict (it would depend on load): the run ended although its test ignores
    # SIGTERM for 120 s (communicate's 60 s above), and the escalation itself is checked by
    # test_stop_workers_kills_a_worker_that_ignores_sigterm below.
    assert took < 120, f"took {took:.1f} s to stop"
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    one_error(err, "run INCOMPLETE", "stopped by SIGTERM", "planned tests not run")
    got = stored(db, "cancelled")
    assert got["test_ignores_sigterm"][0] == "error"   # the interrupted-run placeholder, never a pass
    assert all(o == "pass" for name, (o, _) in got.items() if name.startswith("test_quick"))
    assert build_row(db, tmp_path, "cancelled")["complete"] is False
    no_process_left(tmp_path)


def _results_by_run(db: Path, build: str) -> list[list[str]]:
    """The test names each run of ``build`` stored, oldest run first."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT r.run_id, t.test_id FROM results r JOIN tests t ON t.id = r.test_pk "
                           "JOIN builds b ON b.id = r.build_id WHERE b.name = ? ORDER BY r.run_id", (build,))
        runs: dict[int, list[str]] = {}
        for run_id, test_id in rows:
            runs.setdefault(run_id, []).append(test_id.split("::")[-1])
        return [sorted(names) for _, names in sorted(runs.items())]
    finally:
        con.close()


@pytest.mark.parametrize("how", ["ignore", "handler", "obey"])
def test_sigterm_stops_a_serial_run_whose_test_ignores_sigterm_in_about_2_s(tmp_path, how):
    """Before: the CLI forwarded SIGTERM, pytest never saw it (the test had replaced its
    handler) and the CLI killed it after its 20 s grace.  ``obey``: pytest's own orderly
    stop, which the CLI must leave alone (never killed), recording the same."""
    db, mark = tmp_path / "t.db", tmp_path / "ignoring"
    proc = subprocess.Popen(TC + run_args("fx_serial_term", "serial", db), cwd=tmp_path,
                            env=child_env(TC_TERM_MARK=mark, TC_TERM_HOW=how), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not mark.exists():   # written by the test once it ignores SIGTERM
            assert proc.poll() is None and time.monotonic() < deadline, "the ignoring test never started"
            time.sleep(0.05)
        pytest_pid = int(mark.read_text())
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"serial run ({how}) stopped {took:.2f} s after SIGTERM")
    # No wall-clock verdict (it would depend on load): the escalation is proven by its own words
    # below ("was killed"), which the CLI says only when it killed pytest after ESCALATE_SECONDS.
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    line = one_error(err, "run INCOMPLETE", "stopped by SIGTERM", "1 of 3 planned tests not run",
                     "--resume --build serial")
    killed = ("was killed, its test in flight " in line and
              "fx_serial_term.py::test_b_ignores_sigterm recorded as interrupted" in line)
    assert killed is (how != "obey"), line
    assert "INCOMPLETE" in out
    assert not Path(f"/proc/{pytest_pid}").exists() or " Z " in Path(f"/proc/{pytest_pid}/stat").read_text()
    assert stored(db, "serial") == {"test_a_before": ("pass", ""), "test_b_ignores_sigterm": ("error", INTERRUPTED)}
    (jsonl,) = (tmp_path / ".torchconform" / "runs").glob("serial*.jsonl")
    assert sorted(i.split("::")[-1] for i in jsonl_ids(jsonl)) == ["test_a_before", "test_b_ignores_sigterm"]
    assert {o.name: (o.outcome, o.message) for o in read_jsonl(jsonl)[1]}["test_b_ignores_sigterm"] == \
        ("error", INTERRUPTED)
    assert not (tmp_path / ".torchconform" / "runs" / (jsonl.stem + ".inflight")).exists()
    assert build_row(db, tmp_path, "serial")["complete"] is False
    summary = json.loads(tc(["summary", "--build", "serial", "--json", "--db", db], tmp_path).stdout)
    assert summary["unfinished_runs"][0]["status"] == "interrupted"
    no_process_left(tmp_path)
    # --resume runs the test that was in flight and the one never run (here the test just passes).
    resumed = tc(run_args("fx_serial_term", "serial", db, 0, "--resume"), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _results_by_run(db, "serial") == [["test_a_before", "test_b_ignores_sigterm"],
                                             ["test_b_ignores_sigterm", "test_c_after"]]
    assert build_row(db, tmp_path, "serial")["complete"] is True
    no_process_left(tmp_path)


# -- item 7: two runs of one build at once ----------------------------------------------------

def _lock_held(db: Path) -> bool:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return con.execute("SELECT count(*) FROM build_locks").fetchone()[0] > 0
        finally:
            con.close()
    except sqlite3.Error:
        return False


def test_a_second_run_of_a_build_being_written_is_refused_in_one_line(tmp_path):
    """Before: both ran every test to the end (48 results for 24 tests), sharing one log."""
    db = tmp_path / "t.db"
    first = subprocess.Popen(TC + run_args("fx_slow_few", "twice", db), cwd=tmp_path, env=child_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not _lock_held(db):
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()[-3000:]
            time.sleep(0.1)
        second = tc(run_args("fx_slow_few", "twice", db), tmp_path)
        assert first.poll() is None, "the first run ended before the second was tried: no overlap"
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert second.returncode == 2
    line = one_error(second.stderr, "build 'twice' is being written by another run or sweep",
                     f"pid {first.pid}", "another --build name")
    assert len(second.stderr.strip().splitlines()) == 1, line
    assert first.returncode == 0, err[-3000:]
    ids = stored_ids(db, "twice")
    assert len(ids) == 8 and len(set(ids)) == 8
    assert build_row(db, tmp_path, "twice")["complete"] is True
    runs = tmp_path / ".torchconform" / "runs"
    assert sorted(p.name for p in runs.iterdir()) == ["twice.jsonl", "twice.log"]   # the refused run left nothing

    # Without a store nothing is shared either: two runs at once get a log and records each.
    both = [subprocess.Popen(TC + run_args("fx_slow_few", "free", None), cwd=tmp_path, env=child_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in both:
        p.communicate(timeout=300)
        assert p.returncode == 0
    logs = sorted(runs.glob("free*.log"))
    assert [p.name for p in logs] == ["free.2.log", "free.log"]
    for log in logs:
        assert log.read_text().count("8 passed") == 1
        assert len(jsonl_ids(log.with_suffix(".jsonl"))) == 8
    no_process_left(tmp_path)


# -- item 2: the disk fills up during a run ----------------------------------------------------

def _namespace_runs() -> bool:
    import shutil

    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.mark.skipif(not _namespace_runs(), reason="no private mount namespace here (unshare -Urm + mount tmpfs)")
def test_a_disk_that_fills_up_during_a_run_stops_it_incomplete_and_loses_nothing_recorded(tmp_path):
    """Before: an INTERNALERROR in pytest's log, the run stopped at 260 of 597 tests, and
    `run` printed "260 outcomes" with no INCOMPLETE and exited 0."""
    disk, after = tmp_path / "disk", tmp_path / "after"
    disk.mkdir()
    script = tmp_path / "fault.sh"
    args = " ".join(f"'{a}'" for a in run_args("fx_fill", "full", disk / "s.db"))
    script.write_text("set -e\n" + textwrap.dedent(f"""
        mount -t tmpfs -o size=4m tmpfs {disk}
        cd {disk}
        set +e
        TC_FILL_DIR={disk} {sys.executable} -m torchconform {args} > {tmp_path}/out.txt 2> {tmp_path}/err.txt
        echo $? > {tmp_path}/rc.txt
        set -e
        rm -f {disk}/filler {disk}/filler-tail
        cp -a {disk} {after}
    """))
    result = subprocess.run(["unshare", "-Urm", "sh", str(script)], cwd=tmp_path, env=child_env(),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rc, err = int((tmp_path / "rc.txt").read_text()), (tmp_path / "err.txt").read_text()
    out = (tmp_path / "out.txt").read_text()
    assert rc == 2, err[-3000:]
    line = one_error(err, "run INCOMPLETE", "cannot record outcomes", "disk full", "planned tests not run")
    assert "INCOMPLETE" in out
    db = after / "s.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    ids = stored_ids(db, "full")
    names = sorted(i.split("::")[-1] for i in ids)
    assert len(ids) == len(set(ids))   # nothing stored twice
    # nothing finished and recorded lost: every test before the filler is stored and in the records
    assert names == [f"test_a_before[{i}]" for i in range(10)]
    (jsonl,) = (after / ".torchconform" / "runs").glob("full*.jsonl")
    assert set(jsonl_ids(jsonl)) >= set(ids)
    not_run = 41 - len(jsonl_ids(jsonl))
    assert f"{not_run} of 41 planned tests not run" in line and not_run >= 30
    row = build_row(db, tmp_path, "full")
    assert row["complete"] is False
    no_process_left(tmp_path)


def test_stop_workers_kills_a_worker_that_ignores_sigterm():
    """The run's stop escalates: a worker process still there after the grace is SIGKILLed."""
    from types import SimpleNamespace

    from torchconform.collectors.stopping import stop_workers

    code = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"
    ignoring = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    obeying = subprocess.Popen([sys.executable, "-c", "print('ready', flush=True); import time; time.sleep(120)"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert ignoring.stdout.readline().strip() == "ready" and obeying.stdout.readline().strip() == "ready"
        gateways = [SimpleNamespace(_io=SimpleNamespace(popen=p)) for p in (ignoring, obeying)]
        dsession = SimpleNamespace(nodemanager=SimpleNamespace(group=gateways))
        config = SimpleNamespace(pluginmanager=SimpleNamespace(getplugin=lambda name: dsession))
        stop_workers(config, grace=0.5)
        assert ignoring.wait(timeout=60) == -signal.SIGKILL
        assert obeying.wait(timeout=60) == -signal.SIGTERM
    finally:
        for p in (ignoring, obeying):
            if p.poll() is None:
                p.kill()
            p.stdout.close()


@pytest.mark.parametrize("began", [False, True, None])
def test_forward_signals_kills_a_child_not_ending_after_escalate_and_leaves_one_ending_its_grace(began):
    """The serial run's escalation (cli/run_child.py): a child that has not begun ending
    (``ending()`` False) is SIGKILLed ``escalate`` seconds after the forwarded signal; one
    that has (True) or that cannot tell (None: -n 2, the sweep) keeps the whole grace."""
    from torchconform.procs import forward_signals

    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        with forward_signals(child, grace=60, escalate=0.2, ending=lambda: began) as seen:
            os.kill(os.getpid(), signal.SIGTERM)   # what a CI cancel sends the CLI
            if began is False:
                assert child.wait(timeout=60) == -signal.SIGKILL and seen.killed
            else:
                with pytest.raises(subprocess.TimeoutExpired):
                    child.wait(timeout=1.5)
                assert not seen.killed and seen.signal == signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()


def test_store_end_adds_what_a_killed_pytest_wrote_but_did_not_store_each_once(tmp_path):
    """The record made whole after the CLI killed pytest (cli/run_finish.store_end): the
    JSON lines' outcomes the run lacks (a last batch the store never committed) and the test
    in flight are added, what it has is not added again, and the run is ``interrupted``."""
    from torchconform.cli.run_finish import store_end
    from torchconform.core.outcome import ERROR, PASS, Outcome
    from torchconform.db.opening import open_store

    db = tmp_path / "t.db"
    a, b = (Outcome(test_id=f"f.py::test_{n}", outcome=PASS, suite="ops") for n in "ab")
    c = Outcome(test_id="f.py::test_c", outcome=ERROR, suite="ops", message=INTERRUPTED)
    with open_store(str(db)) as store:
        store.ensure_build("killed", append=True)
        run_id = store.start_run("killed", suite="ops", pid=4242)
        store.add_outcomes(run_id, [a])
    assert store_end(str(db), "killed", 4242, -signal.SIGKILL, [a, b, c]) is None
    assert stored(db, "killed") == {"test_a": ("pass", ""), "test_b": ("pass", ""), "test_c": ("error", INTERRUPTED)}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone() == ("interrupted",)
    finally:
        con.close()
