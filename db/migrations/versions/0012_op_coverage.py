"""The coverage audit: ``op_coverage``, per run, every ATen overload its tests reached on the
device (from the operators the runner already traces per test) with how many tests reached
it and one of them.  A build's coverage is the union over its runs, stated against every
backend-relevant overload of the build's census.

A new table only: no existing row is touched, so the upgrade is instant at any size.

Revision ID: 0012_op_coverage
Revises: 0011_result_tiers
"""
import sqlalchemy as sa
from alembic import op

revision = "0012_op_coverage"
down_revision = "0011_result_tiers"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade():
    op.create_table(
        "op_coverage",
        sa.Column("run_id", BigId, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("op", sa.String(300), primary_key=True),
        sa.Column("build_id", BigId, sa.ForeignKey("builds.id", ondelete="CASCADE"), nullable=False),
        sa.Column("tests", sa.Integer, nullable=False),
        sa.Column("example_test", sa.Text, nullable=False, server_default=""),
    )
    op.create_index("ix_op_coverage_build_op", "op_coverage", ["build_id", "op"])


def downgrade():
    op.drop_index("ix_op_coverage_build_op", table_name="op_coverage")
    op.drop_table("op_coverage")
