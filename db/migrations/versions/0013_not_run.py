"""Not-run accounting: ``not_run``, per run, how many tests its selection left out for each
reason (selection, --ops, -k, -m, spec, --deselect, other), what selected (detail) and one
test left out (example; empty where the suite never instantiated them).  Counts, not one row
per test: a quick ops run leaves out about 27,000 tests (docs/store.md, "Not run").

A new table only: no existing row is touched, so the upgrade is instant at any size.

Revision ID: 0013_not_run
Revises: 0012_op_coverage
"""
import sqlalchemy as sa
from alembic import op

revision = "0013_not_run"
down_revision = "0012_op_coverage"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade():
    op.create_table(
        "not_run",
        sa.Column("run_id", BigId, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("reason", sa.String(40), primary_key=True),
        sa.Column("build_id", BigId, sa.ForeignKey("builds.id", ondelete="CASCADE"), nullable=False),
        sa.Column("tests", sa.Integer, nullable=False),
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
        sa.Column("example_test", sa.Text, nullable=False, server_default=""),
    )
    op.create_index("ix_not_run_build", "not_run", ["build_id"])


def downgrade():
    op.drop_index("ix_not_run_build", table_name="not_run")
    op.drop_table("not_run")
