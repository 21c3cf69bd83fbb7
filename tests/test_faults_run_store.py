"""A run's faults, part two (issue 34, items 2 and 7), caused for real through ``torchconform
run``: two runs of one build at once, a disk that fills up mid-run (a small tmpfs in a private
mount namespace).  Exits and daemons: test_faults_run_exit.py; signals: test_faults_run_signals.py.

Each checks: nothing finished lost, nothing stored twice, the build never complete when
tests did not run, the exit status, one line of error, no process left (docs/reliability.md).
"""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from support import needs_namespace
from faults_run_support import (TC, build_row, child_env, jsonl_ids, no_process_left, one_error, run_args, stored_ids,
                                tc)


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

@needs_namespace
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
