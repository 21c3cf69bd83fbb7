"""Alembic environment: always driven from torchconform.db.migrate with a live connection."""
from alembic import context

from torchconform.db.models import Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `torchconform db upgrade`, not the alembic CLI")

context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
