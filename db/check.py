"""``torchconform db check``: is the store sound?

SQLite: ``PRAGMA integrity_check``, the full check (every page, and every index
against its table: what the writers' ``quick_check`` leaves out, store.py
``check_sound``).  PostgreSQL keeps its own files consistent, so the check is
cheap: the server answers, the schema version is known, no index is left
invalid (an interrupted concurrent build), and with the ``amcheck`` extension
installed every B-tree index of the store is verified.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from torchconform.db import errors as store_errors
from torchconform.db import migrate

# Problems ``integrity_check`` reports at most (it stops there; the first few say enough).
MAX_PROBLEMS = 100


@dataclass
class CheckReport:
    """What ``check`` found: ``problems`` empty when the store is sound."""
    store: str                  # the store as a user names it (password masked)
    checked: str                # what was checked, in words
    seconds: float
    revision: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def sound(self) -> bool:
        return not self.problems


def check(store) -> CheckReport:
    """Check ``store`` (an open ``Store``); a corrupt store is a report with problems, not an error."""
    started = time.perf_counter()
    name = store_errors.where(store.url)
    if store.dialect == "sqlite":
        checked = "PRAGMA integrity_check"
        try:
            with store.read() as conn:
                said = [str(r[0]) for r in conn.exec_driver_sql(f"PRAGMA integrity_check({MAX_PROBLEMS})")]
                revision = migrate.current_revision(conn) if said == ["ok"] else None
        except store_errors.StoreError as exc:
            if exc.kind != "corrupt":
                raise
            # so damaged that the check itself stops: the driver's words are the finding
            said, revision = [store_errors.detail(exc.__cause__ or exc)], None
        problems = [] if said == ["ok"] else _lines(said)
    else:
        checked, revision, problems = _check_postgresql(store)
    return CheckReport(name, checked, time.perf_counter() - started, revision, problems)


def _lines(said: list[str]) -> list[str]:
    """integrity_check's rows as problem lines (a row may hold several; '*** in database' headers dropped)."""
    lines = [line.strip() for text in said for line in text.splitlines()]
    return [line for line in lines if line and not line.startswith("***")] or ["integrity_check failed"]


def _check_postgresql(store) -> tuple[str, str | None, list[str]]:
    problems = []
    with store.read() as conn:
        conn.exec_driver_sql("SELECT 1").scalar_one()
        revision = migrate.current_revision(conn)
        invalid = conn.exec_driver_sql(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE NOT i.indisvalid AND n.nspname = current_schema() ORDER BY 1").scalars().all()
        problems += [f"index {name} is invalid (an interrupted build?): REINDEX INDEX {name}" for name in invalid]
        has_amcheck = conn.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'").first()
        checked = "connection, schema version, index validity"
        if has_amcheck:
            checked += ", amcheck bt_index_check of every index"
            indexes = conn.exec_driver_sql(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_am a ON a.oid = c.relam "
                "WHERE i.indisvalid AND a.amname = 'btree' AND n.nspname = current_schema() ORDER BY 1"
            ).scalars().all()
            for name in indexes:
                try:
                    with conn.begin_nested():
                        conn.exec_driver_sql("SELECT bt_index_check(%s::regclass)", (name,))
                except store_errors.StoreError as exc:
                    problems.append(f"index {name}: {store_errors.detail(exc.__cause__ or exc)}")
    return checked, revision, problems
