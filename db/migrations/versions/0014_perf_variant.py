"""Compiled perf timings: ``perf_results.variant``, which call a timing is of: ``eager`` (the
operator called directly) or ``compiled`` (the same call through ``torch.compile``; its first
call includes the compile).  Readers keep the latest row per (op, dtype, direction, variant),
and a compiled timing is compared only with the same operator compiled (torchconform/core/perf.py).

Existing rows get ``eager``, which is what every row stored before this revision timed, so
their meaning is unchanged.  Adding a column with a constant default touches no existing row
on SQLite or PostgreSQL: instant at any size.

Revision ID: 0014_perf_variant
Revises: 0013_not_run
"""
import sqlalchemy as sa
from alembic import op

revision = "0014_perf_variant"
down_revision = "0013_not_run"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("perf_results") as batch:
        batch.add_column(sa.Column("variant", sa.String(20), nullable=False, server_default="eager"))


def downgrade():
    # In place on both databases (SQLite has dropped columns since 3.35), as 0011 does.
    op.drop_column("perf_results", "variant")
