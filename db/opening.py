"""Opening a results store: engine creation per dialect, the schema revision check,
creating or upgrading the schema (``open_store``, ``upgrade_schema``).

SQLite (the embedded default) runs in WAL mode with a busy timeout and takes the
write lock up front (``BEGIN IMMEDIATE``) for every write transaction, so several
writer processes (xdist workers, shards) queue instead of failing with "database
is locked" halfway through a transaction.  PostgreSQL is reached by URL.  What an
open store writes is db/store.py's ``Store``; what it reads, the db readers'.
"""
from __future__ import annotations

import os

from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from torchconform.config import db_url, mask_password
from torchconform.db import errors as store_errors
from torchconform.db import migrate
from torchconform.db.models import HEAD_REVISION
from torchconform.db.store import Store
from torchconform.errors import UserError

# Page size of a new SQLite database (bytes).
SQLITE_PAGE_SIZE = 16384
# Seconds a SQLite writer waits for the lock held by another process.
SQLITE_BUSY_TIMEOUT = 120


def _first_line(exc: BaseException) -> str:
    text_ = str(getattr(exc, "orig", None) or exc)
    for line in text_.splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def _sqlite_engine(url: str) -> Engine:
    path = make_url(url).database
    if path and path != ":memory:":
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise UserError(f"cannot open database {url}: folder {folder} does not exist; create it or pass another --db")
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT})
    store_errors.install(engine, url, SQLITE_BUSY_TIMEOUT)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        # Let SQLAlchemy's begin event below decide how transactions start.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        # Takes effect only while the file is still empty (a new database): 16 KiB pages
        # make a build's bulk load about a tenth faster (fewer WAL frames to write and
        # checkpoint) and suit the full-build scans the site and the gate do.
        cur.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT * 1000}")
        cur.execute("PRAGMA synchronous=NORMAL")  # safe with WAL; a crash loses at most the last commit
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        # Writers take the lock at BEGIN, so two writers never deadlock upgrading a read lock.
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("tc_write") else "BEGIN")

    return engine


def make_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise UserError(f"bad database URL {mask_password(url)!r}; pass a file path or a URL such as "
                        "postgresql+psycopg://user:pass@host/db") from None
    backend = parsed.get_backend_name()
    try:
        if backend == "sqlite":
            return _sqlite_engine(url)
        if backend == "postgresql":
            engine = create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 10})
            store_errors.install(engine, url)
            return engine
    except NoSuchModuleError:
        pass  # a dialect SQLAlchemy does not know: the unsupported-URL error below
    except ImportError as exc:
        raise UserError(f"database driver for {backend} is missing ({exc}); install it with "
                        "`pip install 'torchconform[postgres]'`") from None
    raise UserError(f"unsupported database URL {mask_password(url)!r}; use a SQLite path or postgresql+psycopg://...")


def open_store(url: str | None = None, create: bool = True, check_schema: bool = True) -> Store:
    """Open the store at ``url`` (``--db`` / $TORCHCONFORM_DB / ./torchconform.db).

    A database with no schema is created at the current revision (when
    ``create``); an older schema asks for ``torchconform db upgrade``, a newer
    one for a newer torchconform.  Connection failures become one-line
    UserErrors with the password masked.
    """
    url = db_url(url)
    if not create and url.startswith("sqlite"):
        path = make_url(url).database
        if path and path != ":memory:" and not os.path.exists(path):
            raise UserError(f"no database at {path}; store a run first (`torchconform run` or `torchconform ingest`) "
                            "or pass --db / $TORCHCONFORM_DB")
    engine = make_engine(url)
    store = Store(engine, url, busy_timeout=SQLITE_BUSY_TIMEOUT if engine.dialect.name == "sqlite" else None)
    try:
        with engine.connect() as conn:
            # Tables first, then the version: a concurrent creator commits both at once, so
            # having seen its tables guarantees seeing its version (the other order races).
            has_tables = bool(set(inspect(conn).get_table_names()) & {"builds", "results"})
            revision = migrate.current_revision(conn)
    except UserError:
        engine.dispose()
        raise
    except (DBAPIError, SQLAlchemyError, OSError) as exc:
        engine.dispose()
        raise UserError(f"cannot open database {mask_password(url)}: {mask_password(_first_line(exc))}; "
                        "check --db / $TORCHCONFORM_DB and that the database server is reachable") from None
    if not check_schema:
        return store
    if revision is None:
        if has_tables:
            engine.dispose()
            raise UserError(f"database {mask_password(url)} has tables but no torchconform schema version; "
                            "point --db at a torchconform database or a new file")
        if not create:
            engine.dispose()
            raise UserError(f"database {mask_password(url)} has no torchconform schema; "
                            "run `torchconform db upgrade` to create it")
        upgrade_schema(store)
        return store
    check_revision(revision, url, engine)
    return store


def check_revision(revision: str, url: str, engine: Engine | None = None) -> None:
    if revision == HEAD_REVISION:
        return
    if engine is not None:
        engine.dispose()
    if revision not in migrate.known_revisions():
        raise UserError(f"database {mask_password(url)} has schema {revision}, newer than this torchconform "
                        f"(which knows up to {HEAD_REVISION}); upgrade torchconform to read it")
    raise UserError(f"database {mask_password(url)} has an older schema ({revision}, this torchconform needs "
                    f"{HEAD_REVISION}); run `torchconform db upgrade --db {mask_password(url)}` first")


def upgrade_schema(store: Store, revision: str = "head") -> tuple[str | None, str]:
    """Migrate ``store`` to ``revision``; returns (before, after).  Safe when run concurrently."""
    store.check_sound()
    with store._faults_as_errors(), store.engine.connect() as conn:
        conn.execution_options(tc_write=True)
        with conn.begin():
            if store.dialect == "postgresql":
                # Serialise concurrent creators (parallel shards on an empty database).
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(74201)")
            before = migrate.current_revision(conn)
            if before is not None and before not in migrate.known_revisions():
                check_revision(before, store.url)
            migrate.upgrade_connection(conn, revision)
            after = migrate.current_revision(conn)
    return before, after
