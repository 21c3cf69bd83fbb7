"""Faults of the store (issue 34, items 1 and 2): every one a user can meet is one line
naming the store, the cause and the fix, a non-zero exit, and nothing half-written.

Each fault is real: a disk that fills up (a small tmpfs in a private mount namespace), a
read-only file (a user who may not write it) and a read-only file system, a store with
64 KiB of its middle overwritten and one with a single page header smashed, a write lock
held past the wait by another process, a PostgreSQL database that accepts no writes.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
from gen_outcomes import synthetic_outcomes, write_junit_file  # noqa: E402

from pg import pg_server  # noqa: E402,F401  (fixture)
from torchconform.db import opening as store_mod  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402
from support import needs_namespace  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
N = 20_000   # outcomes of the stored build: a store of about 6 MB


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TORCHCONFORM_", "PYTEST_"))}


def tc(*args, user: list[str] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*user, sys.executable, "-m", "torchconform", *map(str, args)], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=600)


def assert_one_line(proc: subprocess.CompletedProcess, *words: str) -> str:
    """The command failed with one line on stderr holding ``words``, and no traceback."""
    assert proc.returncode not in (0, None), (proc.stdout[-2000:], proc.stderr[-4000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    assert lines[0].startswith("torchconform: error: "), lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def stored(db: Path) -> tuple:
    """What the store holds: builds and result rows (read with sqlite3 itself)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return (con.execute("SELECT name FROM builds ORDER BY id").fetchall(),
                con.execute("SELECT count(*) FROM results").fetchone()[0],
                con.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        con.close()


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """A stored build's JUnit file and one of as many tests the store has never seen."""
    folder = tmp_path_factory.mktemp("junit")
    outcomes = synthetic_outcomes(N)
    base, fresh = folder / "base.xml", folder / "fresh.xml"
    write_junit_file(str(base), outcomes)
    write_junit_file(str(fresh), [dataclasses.replace(o, test_id=o.test_id + "_new", name=o.name + "_new")
                                  for o in outcomes])
    return base, fresh


@pytest.fixture(scope="module")
def base_store(tmp_path_factory, reports):
    db = tmp_path_factory.mktemp("store") / "base.db"
    proc = tc("ingest", reports[0], "--build", "base", "--db", db)
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db


def _copy(db: Path, to: Path) -> Path:
    shutil.copyfile(db, to)
    return to


def _sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


# -- a private mount namespace: a small or read-only file system without touching the host -----



def in_namespace(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "fault.sh"
    path.write_text("set -e\n" + textwrap.dedent(script))
    return subprocess.run(["unshare", "-Urm", "sh", str(path)], cwd=REPO, env=_env(), capture_output=True,
                          text=True, timeout=600)


@needs_namespace
def test_disk_full_during_ingest_is_one_line_and_the_store_is_unchanged(tmp_path, base_store, reports):
    """The issue's case: before, a 47-line traceback ending `database or disk is full`."""
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    room = os.path.getsize(base_store) + 512 * 1024      # the store fits, a build of new tests does not
    result = in_namespace(f"""
        mount -t tmpfs -o size={room} tmpfs {mnt}
        cp {base_store} {mnt}/s.db
        sha1sum {mnt}/s.db > {tmp_path}/before.sha1
        set +e
        {sys.executable} -m torchconform ingest {reports[1]} --build fresh --db {mnt}/s.db \\
            > {tmp_path}/out.txt 2> {tmp_path}/err.txt
        echo $? > {tmp_path}/rc.txt
        set -e
        cp {mnt}/s.db {tmp_path}/after.db
        ls {mnt} > {tmp_path}/left.txt
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    proc = subprocess.CompletedProcess([], int((tmp_path / "rc.txt").read_text()),
                                       (tmp_path / "out.txt").read_text(), (tmp_path / "err.txt").read_text())
    line = assert_one_line(proc, f"store {mnt}/s.db", "disk full", "database or disk is full", "free space")
    assert proc.returncode == 2, line
    # nothing half-written: the store holds what it held, sound; no journal left behind
    assert stored(tmp_path / "after.db") == stored(base_store)
    assert (tmp_path / "left.txt").read_text().split() == ["s.db"]


def _read_only_user() -> list[str] | None:
    """How to run a command as a user who may not write a root-owned file (root may write any)."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        return None
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_a_read_only_store_file_refuses_writes_in_one_line_and_still_reads(base_store, reports):
    user = _read_only_user()
    if user is None:
        pytest.skip("running as root without setpriv: no user for whom the file is read-only")
    folder = Path(tempfile.mkdtemp(prefix="tc-readonly-"))
    try:
        os.chmod(folder, 0o777)                       # SQLite may make its -wal and -shm beside the file
        db = _copy(base_store, folder / "ro.db")
        os.chmod(db, 0o444)
        fresh = Path(shutil.copy(reports[1], folder))  # readable by that user
        before = _sha1(db)
        proc = tc("ingest", fresh, "--build", "fresh", "--db", db, user=user)
        assert_one_line(proc, f"store {db} is read-only", "attempt to write a readonly database", "writable")
        assert _sha1(db) == before
        builds = tc("builds", "--db", db, user=user)
        assert builds.returncode == 0 and "base" in builds.stdout, builds.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@needs_namespace
def test_a_store_on_a_read_only_file_system_is_one_line(tmp_path, base_store, reports):
    mnt = tmp_path / "ro-fs"
    mnt.mkdir()
    result = in_namespace(f"""
        mount -t tmpfs -o size=32m tmpfs {mnt}
        cp {base_store} {mnt}/s.db
        mount -o remount,ro {mnt}
        for cmd in "ingest {reports[1]} --build fresh" "summary --build base"; do
            set +e
            {sys.executable} -m torchconform $cmd --db {mnt}/s.db > /dev/null 2> {tmp_path}/err.txt
            rc=$?
            set -e
            cat {tmp_path}/err.txt
            echo "rc=$rc"
        done
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 4, result.stdout      # per command: one error line, then its exit status
    for error, rc in zip(lines[0::2], lines[1::2]):
        assert error.startswith(f"torchconform: error: cannot open store {mnt}/s.db (unable to open database "
                                "file)"), error
        assert rc == "rc=2"


# -- corrupt stores ----------------------------------------------------------------------------

def _overwrite_middle(db: Path, size: int, at: int | None = None) -> None:
    data = bytearray(db.read_bytes())
    at = len(data) // 2 if at is None else at
    data[at:at + size] = bytes((i * 131 + 7) % 251 for i in range(size))   # fixed garbage: the same every run
    db.write_bytes(bytes(data))


def test_a_store_with_64_kib_overwritten_is_one_line_everywhere_and_never_written(tmp_path, base_store, reports):
    db = _copy(base_store, tmp_path / "corrupt.db")
    _overwrite_middle(db, 64 * 1024)
    before = _sha1(db)
    for args in (["summary", "--build", "base"], ["export", "--build", "base", "--format", "json"],
                 ["site", "--out", tmp_path / "site"]):
        proc = tc(*args, "--db", db)
        assert_one_line(proc, f"store {db} is corrupt", "torchconform db check", "backup")
        assert proc.returncode == 2
    # a writer checks before writing, and refuses
    proc = tc("ingest", reports[1], "--build", "fresh", "--db", db)
    assert_one_line(proc, f"store {db} is corrupt", "nothing was written")
    assert _sha1(db) == before
    check = tc("db", "check", "--db", db)
    assert check.returncode == 1 and check.stdout == "", (check.stdout, check.stderr)
    assert_one_line(check, f"store {db} is corrupt", "sqlite3")


def test_a_smashed_page_header_is_refused_by_writers_and_found_by_db_check(tmp_path, base_store, reports):
    """The smaller corruption: most commands never read the page, so only a check finds it.
    Before, `ingest` wrote into such a store and exited 0."""
    db = _copy(base_store, tmp_path / "smashed.db")
    page = store_mod.SQLITE_PAGE_SIZE
    middle_page = os.path.getsize(db) // page // 2
    _overwrite_middle(db, 16, at=middle_page * page)    # the b-tree page header: type and cell counts
    before = _sha1(db)
    proc = tc("ingest", reports[1], "--build", "fresh", "--db", db)
    assert_one_line(proc, f"store {db} is corrupt")
    assert _sha1(db) == before
    check = tc("db", "check", "--db", db)
    assert check.returncode == 1, (check.stdout, check.stderr)
    assert_one_line(check, f"store {db} is corrupt")
    # a reader that meets the page says so in one line; one that does not may answer
    for args in (["builds"], ["summary", "--build", "base"]):
        proc = tc(*args, "--db", db)
        if proc.returncode:
            assert_one_line(proc, f"store {db} is corrupt")


def test_db_check_of_a_sound_store(base_store):
    proc = tc("db", "check", "--db", base_store)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{base_store}: sound (PRAGMA integrity_check: ok in ") and "schema 0" in proc.stdout


# -- a lock held past the wait ---------------------------------------------------------------------

def test_a_write_lock_held_past_the_wait_is_one_line(tmp_path, base_store, reports, cli, monkeypatch):
    db = _copy(base_store, tmp_path / "locked.db")
    monkeypatch.setattr(store_mod, "SQLITE_BUSY_TIMEOUT", 1)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sqlite3, sys, time
        con = sqlite3.connect({str(db)!r}, isolation_level=None)
        con.execute("BEGIN IMMEDIATE")
        print("held", flush=True)
        time.sleep(120)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, out, err = cli("ingest", reports[1], "--build", "fresh", "--db", db)
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and out == "", (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"torchconform: error: store {db} is locked: another process "
                                                   "held it for more than 1 s (database is locked)"), err
    assert stored(db) == stored(base_store)


# -- PostgreSQL ------------------------------------------------------------------------------------

@pytest.mark.postgres
def test_a_postgresql_database_that_accepts_no_writes_is_one_line_with_the_password_masked(pg_server, reports):
    import psycopg
    from sqlalchemy.engine import make_url

    url = pg_server.new_database()
    open_store(url).close()
    name = make_url(url).database
    with psycopg.connect(host="127.0.0.1", port=pg_server.port, user="postgres", dbname="postgres",
                         autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    proc = tc("ingest", reports[1], "--build", "fresh", "--db", url)
    line = assert_one_line(proc, "accepts no writes", "read-only transaction", "postgres:***@127.0.0.1")
    assert make_url(url).password not in line
    check = tc("db", "check", "--db", url)
    assert check.returncode == 0 and ": sound (connection, schema version, index validity" in check.stdout, \
        (check.stdout, check.stderr)
    assert make_url(url).password not in check.stdout
