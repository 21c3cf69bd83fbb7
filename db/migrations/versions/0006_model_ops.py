"""Per-model operator sets: the ATen overloads each model variant reaches, traced on CPU.

Revision ID: 0006_model_ops
Revises: 0005_census
"""
import sqlalchemy as sa
from alembic import op

revision = "0006_model_ops"
down_revision = "0005_census"
branch_labels = None
depends_on = None


def upgrade():
    # The primary key is the only index needed: reads are "these models at this torch version".
    op.create_table(
        "model_ops",
        sa.Column("model_id", sa.String(300), primary_key=True),
        sa.Column("variant", sa.String(20), primary_key=True),
        sa.Column("torch_version", sa.String(60), primary_key=True),
        sa.Column("library_version", sa.String(60), primary_key=True),
        sa.Column("ops", sa.Text, nullable=False),
        sa.Column("traced", sa.DateTime, nullable=False),
    )


def downgrade():
    op.drop_table("model_ops")
