"""Schema versioning with Alembic: which revision a database is at, and upgrading it.

Alembic itself is imported only when a migration or the revision list is
needed: every CLI command opens the store, and most never migrate.
"""
from __future__ import annotations

import os

from sqlalchemy import inspect
from sqlalchemy.engine import Connection

MIGRATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrations")


def _config(connection: Connection | None = None):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", MIGRATIONS)
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def script_directory():
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


def known_revisions() -> set[str]:
    return {rev.revision for rev in script_directory().walk_revisions()}


def head() -> str:
    return script_directory().get_current_head()


def current_revision(connection: Connection) -> str | None:
    """The revision stamped in the database (Alembic's table), or None for a database with no schema."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    versions = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all()
    return versions[0] if versions else None


def upgrade_connection(connection: Connection, revision: str = "head") -> None:
    """Bring the schema to ``revision`` inside the caller's transaction (DDL is transactional in both engines)."""
    from alembic import command

    command.upgrade(_config(connection), revision)
