"""Repro commands stored once per run as a template.

A run's repro commands differ only by test id and op, so ``runs.repro_template``
holds the command with ``{id}`` and ``{op}`` in their place, and a result whose
repro is that template rendered stores NULL (about 200 bytes saved per result).

Revision ID: 0003_repro_templates
Revises: 0002_query_indexes
"""
import sqlalchemy as sa
from alembic import op

revision = "0003_repro_templates"
down_revision = "0002_query_indexes"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("runs", sa.Column("repro_template", sa.Text, nullable=False, server_default=""))
    # SQLite cannot drop NOT NULL in place: batch mode copies the table (and its indexes).
    with op.batch_alter_table("results") as batch:
        batch.alter_column("repro", existing_type=sa.Text, existing_nullable=False, nullable=True,
                           existing_server_default="")


def downgrade():
    bind = op.get_bind()
    bind.execute(sa.text("UPDATE results SET repro = (SELECT replace(replace(runs.repro_template, '{id}', "
                         "tests.test_id), '{op}', tests.op) FROM runs, tests WHERE runs.id = results.run_id "
                         "AND tests.id = results.test_pk) WHERE repro IS NULL"))
    with op.batch_alter_table("results") as batch:
        batch.alter_column("repro", existing_type=sa.Text, existing_nullable=True, nullable=False,
                           existing_server_default="")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("repro_template")
