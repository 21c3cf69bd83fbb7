"""Initial schema: builds, runs, tests, results.

Revision ID: 0001_initial
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade():
    op.create_table(
        "builds",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.Column("torch_version", sa.String(100), nullable=False, server_default=""),
        sa.Column("torch_git", sa.String(100), nullable=False, server_default=""),
        sa.Column("backend", sa.String(100), nullable=False, server_default=""),
        sa.Column("backend_version", sa.String(100), nullable=False, server_default=""),
        sa.Column("device", sa.String(100), nullable=False, server_default=""),
        sa.Column("profile", sa.String(200), nullable=False, server_default=""),
        sa.Column("branch", sa.String(200), nullable=False, server_default=""),
        sa.Column("commit", sa.String(100), nullable=False, server_default=""),
        sa.Column("metadata", sa.JSON, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("build_id", BigId, sa.ForeignKey("builds.id", ondelete="CASCADE"), nullable=False),
        sa.Column("suite", sa.String(200), nullable=False, server_default=""),
        sa.Column("selection", sa.Text, nullable=False, server_default=""),
        sa.Column("shard", sa.String(50), nullable=False, server_default=""),
        sa.Column("host", sa.String(200), nullable=False, server_default=""),
        sa.Column("command", sa.Text, nullable=False, server_default=""),
        sa.Column("started", sa.DateTime, nullable=False),
        sa.Column("ended", sa.DateTime, nullable=True),
        sa.Column("exit_status", sa.Integer, nullable=True),
        sa.Column("n_results", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_index("ix_runs_build_id", "runs", ["build_id"])
    op.create_table(
        "tests",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("test_id", sa.Text, nullable=False, unique=True),
        sa.Column("suite", sa.String(200), nullable=False, server_default=""),
        sa.Column("file", sa.Text, nullable=False, server_default=""),
        sa.Column("cls", sa.String(500), nullable=False, server_default=""),
        sa.Column("name", sa.Text, nullable=False, server_default=""),
        sa.Column("op", sa.String(300), nullable=False, server_default=""),
        sa.Column("variant", sa.String(100), nullable=False, server_default=""),
        sa.Column("dtype", sa.String(100), nullable=False, server_default=""),
    )
    op.create_table(
        "results",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("build_id", BigId, sa.ForeignKey("builds.id", ondelete="CASCADE"), nullable=False),
        sa.Column("run_id", BigId, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("test_pk", BigId, sa.ForeignKey("tests.id"), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("kind", sa.String(30), nullable=False, server_default=""),
        sa.Column("missing_op", sa.String(300), nullable=False, server_default=""),
        sa.Column("fallback_ops", sa.Text, nullable=False, server_default=""),
        sa.Column("skiplist_entry", sa.String(300), nullable=False, server_default=""),
        sa.Column("device", sa.String(100), nullable=False, server_default=""),
        sa.Column("duration", sa.Float, nullable=False, server_default="0"),
        sa.Column("message", sa.Text, nullable=False, server_default=""),
        sa.Column("repro", sa.Text, nullable=False, server_default=""),
    )
    # The one index every per-build query needs: latest result per test.
    op.create_index("ix_results_build_test", "results", ["build_id", "test_pk", "id"])


def downgrade():
    op.drop_table("results")
    op.drop_table("tests")
    op.drop_table("runs")
    op.drop_table("builds")
