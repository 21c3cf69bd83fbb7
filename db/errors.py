"""Store faults a user can meet, each turned into one line: which store, the cause, the fix.

A full disk, a read-only file, a corrupt file, a write lock held past the wait, a lost
server: the driver raises these from any statement, commit or connection, deep inside
whichever command ran.  ``install`` hooks the engine's ``handle_error`` event so that
SQLAlchemy raises a ``StoreError`` (a ``UserError``: the CLI prints it as one line and
exits non-zero) in their place; ``Store.read``/``Store.write`` map the driver's own
errors the same way where a raw cursor bypasses SQLAlchemy (PostgreSQL's COPY).  The
failed transaction has been rolled back by then, so nothing is half-written.  Anything
not recognised here (a wrong statement: a bug of ours) keeps its traceback.
"""
from __future__ import annotations

import os

from sqlalchemy import event
from sqlalchemy.engine import make_url

from torchconform.config import mask_password
from torchconform.errors import UserError

# SQLite's primary result codes (sqlite3's ``sqlite_errorcode`` & 0xff) -> fault kind.
_SQLITE_KINDS = {3: "readonly", 5: "locked", 6: "locked", 8: "readonly", 10: "io", 11: "corrupt",
                 13: "full", 14: "cantopen", 26: "corrupt"}
# PostgreSQL SQLSTATEs -> fault kind; a class (two characters) where all of it is one kind.
_PG_KINDS = {"53100": "full", "25006": "readonly", "XX001": "corrupt", "XX002": "corrupt",
             "55P03": "locked", "40P01": "locked", "40001": "locked", "08": "lost", "57P01": "lost",
             "57P02": "lost", "57P03": "lost"}
# Faults worth another attempt by a writer that retries (db/once.py): the lock or the
# server may be back a moment later; a full disk or a corrupt file will not.
TRANSIENT = {"locked", "lost"}


class StoreError(UserError):
    """A store fault: one line naming the store (password masked), the cause and the fix.

    ``kind``: full, readonly, corrupt, locked, io, cantopen or lost."""

    def __init__(self, message: str, kind: str = "", exit_code: int | None = None):
        super().__init__(message, exit_code)
        self.kind = kind

    @property
    def transient(self) -> bool:
        return self.kind in TRANSIENT


def where(url: str) -> str:
    """The store as a user names it: a SQLite file's path, else the URL, password masked."""
    try:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite" and parsed.database:
            return parsed.database
    except Exception:  # noqa: BLE001 - a URL SQLAlchemy cannot parse is shown as given, masked
        pass
    return mask_password(url)


def fault_kind(exc: BaseException) -> str | None:
    """The kind of store fault a driver error (or SQLAlchemy's wrapper of one) is, or None."""
    orig = getattr(exc, "orig", None) or exc
    code = getattr(orig, "sqlite_errorcode", None)
    if code is not None:
        return _SQLITE_KINDS.get(code & 0xFF)
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state:
        return _PG_KINDS.get(state) or _PG_KINDS.get(state[:2])
    return None


def detail(exc: BaseException) -> str:
    """The driver's own words: the first non-empty line of its message."""
    orig = getattr(exc, "orig", None) or exc
    try:
        text = str(orig)
    except Exception:
        text = ""
    for line in text.splitlines():
        if line.strip():
            return mask_password(line.strip())
    return type(orig).__name__


def message(kind: str, url: str, said: str, busy_timeout: float | None = None) -> str:
    """The one line for a fault of ``kind`` on the store at ``url``; ``said``: the driver's words."""
    store = where(url)
    sqlite = url.startswith("sqlite")
    folder = os.path.dirname(store) if sqlite else ""
    if kind == "full":
        place = f"the disk holding {folder}" if sqlite else "the database server's disk"
        return (f"store {store}: disk full ({said}); the write in progress was rolled back, nothing half-written; "
                f"free space on {place} (or pass --db to a store with room) and run the command again")
    if kind == "readonly":
        if sqlite:
            return (f"store {store} is read-only ({said}); make the file and its folder {folder} writable for this "
                    "user (SQLite writes -wal and -shm files beside it), or pass --db to a writable copy")
        return (f"store {store} accepts no writes ({said}): a standby or read-only server?; "
                "pass --db with the primary server's URL")
    if kind == "corrupt":
        salvage = f", or salvage what is readable with `sqlite3 {store} .recover`" if sqlite else ""
        return (f"store {store} is corrupt ({said}); nothing was written; see the damage with "
                f"`torchconform db check --db {store}` and restore the store from a backup{salvage}")
    if kind == "locked":
        waited = f" for more than {busy_timeout:g} s" if busy_timeout else ""
        return (f"store {store} is locked: another process held it{waited} ({said}), a running ingest, run or "
                "sweep?; wait for it to finish or stop it, then run the command again")
    if kind == "io":
        return (f"store {store}: disk I/O error ({said}); check the disk holding {folder} (failing, or a network "
                "file system that went away) and run the command again")
    if kind == "cantopen":
        return (f"cannot open store {store} ({said}); check that it and its folder {folder} exist and that this "
                "user may read and write them, or pass another --db")
    return (f"lost the connection to store {store} ({said}); check that the database server is up and "
            "reachable, then run the command again")


def store_error(exc: BaseException, url: str, busy_timeout: float | None = None) -> StoreError | None:
    """``exc`` as a StoreError when it is a store fault, else None (a bug: keep its traceback)."""
    if isinstance(exc, StoreError):
        return exc
    kind = fault_kind(exc)
    if kind is None:
        return None
    return StoreError(message(kind, url, detail(exc), busy_timeout), kind)


def install(engine, url: str, busy_timeout: float | None = None) -> None:
    """Make ``engine`` raise StoreError for every store fault (see the module's doc)."""

    @event.listens_for(engine, "handle_error")
    def _on_error(ctx):
        if ctx.is_pre_ping:
            return None   # the pool's liveness probe: it reconnects by itself
        kind = fault_kind(ctx.original_exception)
        if kind is None:
            if ctx.is_disconnect and ctx.connection is not None and engine.dialect.name != "sqlite":
                kind = "lost"
            else:
                return None
        if kind == "lost" and ctx.connection is None:
            return None   # failed to connect at all: open_store names the URL and the fix
        raise StoreError(message(kind, url, detail(ctx.original_exception), busy_timeout), kind)
