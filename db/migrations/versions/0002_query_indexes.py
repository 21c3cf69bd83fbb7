"""Indexes for test history, the missing-operator leaderboard and latest-build lookups.

Revision ID: 0002_query_indexes
Revises: 0001_initial
"""
import sqlalchemy as sa
from alembic import op

revision = "0002_query_indexes"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("ix_results_test", "results", ["test_pk", "build_id"])
    # Partial: only rows that name a missing operator.
    op.create_index("ix_results_missing_op", "results", ["missing_op", "build_id"],
                    sqlite_where=sa.text("missing_op != ''"), postgresql_where=sa.text("missing_op != ''"))
    op.create_index("ix_builds_created", "builds", ["created"])
    op.create_index("ix_builds_branch_device", "builds", ["branch", "device", "created"])


def downgrade():
    op.drop_index("ix_builds_branch_device", "builds")
    op.drop_index("ix_builds_created", "builds")
    op.drop_index("ix_results_missing_op", "results")
    op.drop_index("ix_results_test", "results")
