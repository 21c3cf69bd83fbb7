"""Schema versioning with Alembic: which revision a database is at, and upgrading it."""
from __future__ import annotations

import os

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic import command
from sqlalchemy.engine import Connection

MIGRATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrations")


def _config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", MIGRATIONS)
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def script_directory() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


def known_revisions() -> set[str]:
    return {rev.revision for rev in script_directory().walk_revisions()}


def head() -> str:
    return script_directory().get_current_head()


def current_revision(connection: Connection) -> str | None:
    """The revision stamped in the database, or None for a database with no schema."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade_connection(connection: Connection, revision: str = "head") -> None:
    """Bring the schema to ``revision`` inside the caller's transaction (DDL is transactional in both engines)."""
    command.upgrade(_config(connection), revision)
