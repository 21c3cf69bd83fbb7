"""Run states and build locks: an interrupted run says so, a resumed one is covered.

``runs.status`` replaces "exit_status is not NULL" as the meaning of a finished
run: a run whose pytest was interrupted (SIGTERM, Ctrl-C, an internal error)
ends with an exit status too, yet it did not run what it planned.  ``pid`` and
``planned`` let readers tell a run whose process is gone from one still going,
and how far it got.  ``build_locks`` holds the live sweeps writing a build, one row
per holder (suite and shard), so that two sweeps of the same tests (a ``--resume``
while the first still runs, on any machine) cannot both write, while the shards of
one build run side by side.

Revision ID: 0004_run_states
Revises: 0003_repro_templates
"""
import sqlalchemy as sa
from alembic import op

revision = "0004_run_states"
down_revision = "0003_repro_templates"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade():
    op.add_column("runs", sa.Column("status", sa.String(20), nullable=False, server_default="running"))
    op.add_column("runs", sa.Column("pid", sa.Integer, nullable=True))
    op.add_column("runs", sa.Column("planned", sa.Integer, nullable=True))
    # Existing runs: pytest's OK / TESTS_FAILED / NO_TESTS_COLLECTED finished; any other
    # ending status (interrupted, internal or usage error) did not.
    op.execute("UPDATE runs SET status = CASE WHEN exit_status IS NULL THEN 'running' "
               "WHEN exit_status IN (0, 1, 5) THEN 'finished' ELSE 'interrupted' END")
    op.create_table(
        "build_locks",
        sa.Column("build_id", BigId, sa.ForeignKey("builds.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("holder", sa.String(300), primary_key=True),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("acquired", sa.DateTime, nullable=False),
        sa.Column("heartbeat", sa.DateTime, nullable=False),
    )


def downgrade():
    op.drop_table("build_locks")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("planned")
        batch.drop_column("pid")
        batch.drop_column("status")
