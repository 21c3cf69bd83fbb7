"""Numerical drift: each result's largest absolute and relative error against the CPU reference.

Two nullable floats on ``results`` (torchconform/core/numeric.py): NULL for a test that
compared nothing, and for every result stored before this revision.  Added in
place (no table copy, no index: the drift queries read them with the rows they
already scan), so upgrading a large store is quick.

Revision ID: 0007_numeric_errors
Revises: 0006_model_ops
"""
import sqlalchemy as sa
from alembic import op

revision = "0007_numeric_errors"
down_revision = "0006_model_ops"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("results", sa.Column("max_abs_err", sa.Float, nullable=True))
    op.add_column("results", sa.Column("max_rel_err", sa.Float, nullable=True))


def downgrade():
    with op.batch_alter_table("results") as batch:
        batch.drop_column("max_rel_err")
        batch.drop_column("max_abs_err")
