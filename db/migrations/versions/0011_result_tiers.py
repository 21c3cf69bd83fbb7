"""Tolerance tiers: ``result_values.tier``, the tightest tier a comparison test met
(torchconform/core/numeric.py: exact, default, loose, beyond; "" when the test compared
nothing with a reference).

The tier is part of what a result says, so it lives with the other value fields and costs
a result row nothing: a build's results point at a few more distinct values, not at wider
rows.  Existing values get "" (no tier recorded) and keep their digest (db/values.digest
adds the tier only when it is set), so a value stored before this revision is found again.

Adding a column with a constant default touches no existing row on SQLite or PostgreSQL:
instant at any size.

Revision ID: 0011_result_tiers
Revises: 0010_perf_results
"""
import sqlalchemy as sa
from alembic import op

revision = "0011_result_tiers"
down_revision = "0010_perf_results"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("result_values") as batch:
        batch.add_column(sa.Column("tier", sa.String(10), nullable=False, server_default=""))


def downgrade():
    # In place on both databases (SQLite has dropped columns since 3.35): a batch copy of
    # result_values would drop a table that results and build_values still reference.
    op.drop_column("result_values", "tier")
