"""Per-operator performance: ``perf_results``, one row per timed operator x dtype x direction
of a build's perf suite (torchconform/core/perf.py, db/perf.py).

A new table only: no existing row is touched, so the upgrade is instant at any size.

Revision ID: 0010_perf_results
Revises: 0009_results_unchecked_pg
"""
import sqlalchemy as sa
from alembic import op

revision = "0010_perf_results"
down_revision = "0009_results_unchecked_pg"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
FIGURES = ("dev_first", "dev_min", "dev_median", "dev_max", "cpu_first", "cpu_min", "cpu_median", "cpu_max")


def upgrade():
    op.create_table(
        "perf_results",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("build_id", BigId, sa.ForeignKey("builds.id", ondelete="CASCADE"), nullable=False),
        sa.Column("run_id", BigId, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("op", sa.String(300), nullable=False),
        sa.Column("dtype", sa.String(100), nullable=False, server_default=""),
        sa.Column("direction", sa.String(20), nullable=False),
        sa.Column("sample", sa.String(300), nullable=False, server_default=""),
        sa.Column("calls", sa.Integer, nullable=False),
        *(sa.Column(name, sa.Float, nullable=True) for name in FIGURES),
    )
    op.create_index("ix_perf_results_build_op", "perf_results", ["build_id", "op"])


def downgrade():
    op.drop_index("ix_perf_results_build_op", table_name="perf_results")
    op.drop_table("perf_results")
