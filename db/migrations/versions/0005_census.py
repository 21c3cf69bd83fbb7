"""The operator census: one row per (build, operator overload) with its dispatcher status.

Revision ID: 0005_census
Revises: 0004_run_states
"""
import sqlalchemy as sa
from alembic import op

revision = "0005_census"
down_revision = "0004_run_states"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade():
    # The primary key (build_id, op) is also the only index needed: every read is one build's census.
    op.create_table(
        "census_ops",
        sa.Column("build_id", BigId, sa.ForeignKey("builds.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("op", sa.String(300), primary_key=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("via", sa.String(60), nullable=False, server_default=""),
        sa.Column("reached", sa.Text, nullable=True),
        sa.Column("covered", sa.Integer, nullable=True),
        sa.Column("blocked_by", sa.Text, nullable=False, server_default=""),
    )


def downgrade():
    op.drop_table("census_ops")
