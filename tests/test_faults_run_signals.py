"""A run's faults, part two (issue 34: the SIGTERM bound), caused for real through
``torchconform run``: a test ignoring SIGTERM when the run is cancelled (``-n 2`` and serial),
and the stop's parts on their own (the workers' escalation, the serial child's, the record
made whole after pytest was killed).  Exits and daemons: test_faults_run_exit.py; the store
and the disk: test_faults_run_store.py.

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
import time
from pathlib import Path

import pytest
from faults_run_support import (TC, build_row, child_env, jsonl_ids, no_process_left, one_error, run_args, stored,
                                tc, wait_for_mark)

from torchconform.collectors.sink_jsonl import read_jsonl
from torchconform.core.outcome import INTERRUPTED_MESSAGE as INTERRUPTED


# -- the SIGTERM bound with a test ignoring SIGTERM ------------------------------------------

def test_sigterm_stops_a_run_whose_test_ignores_sigterm_within_the_bound(tmp_path):
    """Before: a test ignoring SIGTERM delayed the run's own SIGTERM stop to 13 s."""
    db, mark = tmp_path / "t.db", tmp_path / "ignoring"
    proc = subprocess.Popen(TC + run_args("fx_ignore_term", "cancelled", db, workers=2), cwd=tmp_path,
                            env=child_env(TC_TERM_MARK=mark), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for_mark(proc, mark)
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
        wait_for_mark(proc, mark, poll=0.05)   # written by the test once it ignores SIGTERM
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


# -- the stop's parts on their own --------------------------------------------------------

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
