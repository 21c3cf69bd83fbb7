"""Opening databases: schema versions, `db upgrade`, bad URLs, several writer processes."""
import multiprocessing
import os
import sqlite3
import subprocess
import sys

import pytest
from sqlalchemy import inspect, text

from pg import db_url, pg_server  # noqa: F401  (fixtures)
from torchconform.core.outcome import Outcome
from torchconform.db import migrate, read_builds, read_rows
from torchconform.db.models import HEAD_REVISION
from torchconform.db.opening import make_engine, open_store
from torchconform.errors import UserError

TC = [sys.executable, "-m", "torchconform"]


def cli(*args, env=None):
    return subprocess.run([*TC, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_new_database_is_created_at_head(db_url):
    with open_store(db_url) as store, store.read() as conn:
        assert migrate.current_revision(conn) == HEAD_REVISION == migrate.head()


def test_older_schema_names_db_upgrade_and_upgrade_keeps_data(db_url):
    engine = make_engine(open_store(db_url, check_schema=False).url)
    with engine.begin() as conn:
        migrate.upgrade_connection(conn, "0001_initial")
        conn.execute(text("INSERT INTO builds (name, created, metadata) VALUES ('old', CURRENT_TIMESTAMP, '{}')"))
    engine.dispose()
    with pytest.raises(UserError, match=r"older schema \(0001_initial.*run `torchconform db upgrade"):
        open_store(db_url)
    r = cli("db", "upgrade", "--db", db_url)
    assert r.returncode == 0, r.stderr
    assert "upgraded from 0001_initial to " + HEAD_REVISION in r.stdout
    assert "tc-secret-pw" not in r.stdout
    with open_store(db_url) as store:
        assert [b["name"] for b in read_builds.list_builds(store)] == ["old"]
        with store.engine.connect() as conn:   # 0009: PostgreSQL's results lose their checked references
            assert bool(inspect(conn).get_foreign_keys("results")) == (store.dialect == "sqlite")
    again = cli("db", "upgrade", "--db", db_url)
    assert again.returncode == 0 and "already at" in again.stdout


def test_upgrade_to_repro_templates_keeps_stored_repro_commands(db_url):
    engine = make_engine(open_store(db_url, check_schema=False).url)
    with engine.begin() as conn:
        migrate.upgrade_connection(conn, "0002_query_indexes")
        conn.execute(text("INSERT INTO builds (name, created, metadata) VALUES ('old', CURRENT_TIMESTAMP, '{}')"))
        conn.execute(text("INSERT INTO runs (build_id, started) SELECT id, CURRENT_TIMESTAMP FROM builds"))
        conn.execute(text("INSERT INTO tests (test_id) VALUES ('t::a')"))
        conn.execute(text("INSERT INTO results (build_id, run_id, test_pk, outcome, repro) "
                          "SELECT runs.build_id, runs.id, tests.id, 'fail', 'pytest t::a' FROM runs, tests"))
    engine.dispose()
    assert cli("db", "upgrade", "--db", db_url).returncode == 0
    with open_store(db_url) as store:
        (o,) = read_rows.iter_outcomes(store, "old")
        assert (o.test_id, o.outcome, o.repro) == ("t::a", "fail", "pytest t::a")
        # a new run of the upgraded database stores its commands as a template
        run = store.start_run("old")
        store.add_outcomes(run, [Outcome("t::b", "pass", op="add", repro="pytest --x t::b --op add")])
        assert {o.test_id: o.repro for o in read_rows.iter_outcomes(store, "old")}["t::b"] == "pytest --x t::b --op add"


def test_newer_schema_is_refused(db_url):
    open_store(db_url).close()
    engine = make_engine(open_store(db_url).url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099_from_the_future'"))
    engine.dispose()
    with pytest.raises(UserError, match="0099_from_the_future, newer than this torchconform"):
        open_store(db_url)
    r = cli("builds", "--db", db_url)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "newer than this torchconform" in r.stderr
    assert "tc-secret-pw" not in r.stderr


def test_unreachable_server_is_one_line_without_the_password():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    url = f"postgresql+psycopg://alice:hunter2@127.0.0.1:{port}/results"
    with pytest.raises(UserError) as info:
        open_store(url)
    assert "hunter2" not in str(info.value) and "alice:***@" in str(info.value)
    r = cli("summary", "--build", "x", "--db", url)
    assert r.returncode == 2
    assert r.stderr.startswith("torchconform: error: cannot open database") and r.stderr.count("\n") == 1
    assert "hunter2" not in r.stderr + r.stdout


@pytest.mark.parametrize("url, words", [
    ("mysql+nosuchdriver://u:pw@h/db", "unsupported database URL"),
    ("postgresql+psycopg://u:pw@host:notaport/db", "bad database URL"),
])
def test_bad_urls(url, words):
    with pytest.raises(UserError, match=words) as info:
        open_store(url)
    assert ":pw@" not in str(info.value)


def test_summary_of_missing_file_creates_nothing(tmp_path):
    path = tmp_path / "none.db"
    r = cli("summary", "--build", "x", "--db", str(path))
    assert r.returncode == 2 and "no database at" in r.stderr
    assert not path.exists()


def test_foreign_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE builds (x int)")
    with pytest.raises(UserError, match="no torchconform schema version"):
        open_store(str(path))


def _writer(path, worker, n_batches, barrier):
    store = open_store(path)
    barrier.wait()
    build = "shared"
    store.ensure_build(build, append=True)
    run = store.start_run(build, suite="ops", shard=str(worker))
    for b in range(n_batches):
        store.add_outcomes(run, [Outcome(f"w{worker}::t{b}_{i}", "pass") for i in range(50)]
                           + [Outcome(f"common::t{i}", "fail") for i in range(5)])
    store.finish_run(run, 0)
    store.close()


def test_several_writer_processes_share_one_build(db_url):
    """Four processes create the schema and write one build at once (overlapping tests):
    nothing lost, nothing locked, no deadlock, one schema."""
    path = db_url
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_writer, args=(path, w, 10, barrier)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with open_store(path) as store:
        s = read_builds.summary(store, "shared")
        info = read_builds.build_info(store, "shared")
    assert s["total"] == 4 * 10 * 50 + 5
    assert s["outcomes"]["pass"] == 2000 and s["outcomes"]["fail"] == 5
    assert len(info["runs"]) == 4 and info["complete"]
    if "://" not in path:
        with sqlite3.connect(path) as c:
            assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migrations_build_exactly_the_models(db_url):
    """The Alembic migrations and the SQLAlchemy models describe the same schema."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from torchconform.db.models import Base

    def declared_here(obj, name, type_, reflected, compare_to):
        # a constraint created on one database only (db/models.py: ``info["only_on"]``)
        only_on = getattr(obj, "info", {}).get("only_on") if obj is not None else None
        return only_on is None or only_on == conn.dialect.name

    with open_store(db_url) as store, store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn, opts={"include_object": declared_here}),
                                 Base.metadata)
        foreign_keys = inspect(conn).get_foreign_keys("results")
    assert diffs == []
    # results' references: declared on SQLite, left unchecked on PostgreSQL (0009)
    expected = {"build_id", "run_id", "test_pk", "value_id"} if conn.dialect.name == "sqlite" else set()
    assert {fk["constrained_columns"][0] for fk in foreign_keys} == expected
