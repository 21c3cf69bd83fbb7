"""A throwaway PostgreSQL server for the store's tests.

``PgServer.start()`` runs Debian's ``initdb`` in a temporary folder (as the
``postgres`` user via runuser when we are root, since initdb refuses root),
starts ``postgres`` on 127.0.0.1 on a free port with fsync off, and
``stop()`` shuts it down and removes the folder.  ``new_database()`` gives
each test its own empty database.

``shared_server()`` (one per test process) skips with the reason when no
server can be started, except when $CI is "true": then it is a failure.
Fixtures ``db_url`` / ``store`` parametrise a test over SQLite and PostgreSQL.
"""
from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile

import pytest

PASSWORD = "tc-secret-pw"


def _pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self):
        self.dir = None
        self.port = None
        self._names = itertools.count()
        self._as_user: list[str] = []

    def _run(self, *cmd, **kw):
        return subprocess.run([*self._as_user, *cmd], check=True, capture_output=True, text=True, timeout=120, **kw)

    def start(self) -> "PgServer":
        initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
        if not initdb or not pg_ctl:
            raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) not found; run tests/services/postgres.sh")
        import psycopg  # noqa: F401  (fail early with a clear reason when the driver is missing)

        self.dir = tempfile.mkdtemp(prefix="tc-pg-")
        data = os.path.join(self.dir, "data")
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            os.chmod(self.dir, 0o700)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self._run(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-locale")
        self.port = _free_port()
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
        self._run(pg_ctl, "-D", data, "-o", opts, "-w", "-t", "60", "-l", os.path.join(self.dir, "log"), "start")
        return self

    def stop(self) -> None:
        if self.dir is None:
            return
        try:
            if os.path.exists(os.path.join(self.dir, "data", "postmaster.pid")):
                self._run(_pg_bin("pg_ctl"), "-D", os.path.join(self.dir, "data"), "-m", "immediate", "-w", "stop")
        except Exception:  # already gone, or interpreter shutting down: still remove the folder
            pass
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def url(self, database: str = "postgres") -> str:
        # trust auth accepts any password; carrying one lets tests check it is never printed.
        return f"postgresql+psycopg://postgres:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def new_database(self, checkpoint: bool = False) -> str:
        """A new empty database's URL; ``checkpoint``: the server first writes out what
        earlier databases left in its buffers (a benchmark's measurements start alike)."""
        import psycopg

        name = f"tc_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
            if checkpoint:
                conn.execute("CHECKPOINT")
        return self.url(name)


# One server per test process (each xdist worker has its own), shared by every
# store test module, stopped when the process exits.
_SERVER: PgServer | None = None
_FAILURE: str | None = None


def shared_server() -> PgServer:
    global _SERVER, _FAILURE
    if _SERVER is None and _FAILURE is None:
        import atexit

        server = PgServer()
        try:
            _SERVER = server.start()
            atexit.register(server.stop)
        except Exception as exc:
            server.stop()
            detail = (getattr(exc, "stderr", "") or "").strip().splitlines()
            _FAILURE = f"no PostgreSQL server could be started: {exc} {detail[-1] if detail else ''}".strip()
    if _SERVER is None:
        if os.environ.get("CI") == "true":
            pytest.fail(_FAILURE)
        pytest.skip(_FAILURE)
    return _SERVER


def stop_shared_server() -> None:
    global _SERVER
    if _SERVER is not None:
        _SERVER.stop()
        _SERVER = None


@pytest.fixture(scope="session")
def pg_server():
    """The process's server; stopped and removed at the end of the session
    (atexit is only the fallback: xdist workers may not get that far)."""
    yield shared_server()
    stop_shared_server()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request, tmp_path):
    """A fresh, empty database URL of each kind (the store's tests run on both)."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    return request.getfixturevalue("pg_server").new_database()


@pytest.fixture
def store(db_url):
    from torchconform.db.opening import open_store

    s = open_store(db_url)
    yield s
    s.close()
