"""PostgreSQL: ``results`` without foreign keys.

PostgreSQL checks each foreign key with a trigger per inserted row.  ``results`` had
four (build, run, test, value): a bulk COPY of a 154,000-result build spent 4.5 s in
them against 0.3 s for the rows themselves, most of an ingest (bench/ingest.py).  The
store only writes ids it created or read in the same transaction (SQLite's bulk
writes skip the check for the same reason), and nothing that results point at is
ever deleted, so the checks found nothing.  SQLite keeps its declared references:
they cost nothing in a bulk write there, and dropping them would copy the table.

Only the constraints go; no row is touched, so the upgrade is instant at any size.

Revision ID: 0009_results_unchecked_pg
Revises: 0008_result_values
"""
import sqlalchemy as sa
from alembic import op

revision = "0009_results_unchecked_pg"
down_revision = "0008_result_values"
branch_labels = None
depends_on = None

# (column, referenced table, ON DELETE) as 0008 declared them
REFERENCES = (("build_id", "builds", "CASCADE"), ("run_id", "runs", "CASCADE"),
              ("test_pk", "tests", None), ("value_id", "result_values", None))


def upgrade():
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for fk in sa.inspect(bind).get_foreign_keys("results"):
        op.drop_constraint(fk["name"], "results", type_="foreignkey")


def downgrade():
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for column, table, ondelete in REFERENCES:
        op.create_foreign_key(f"results_{column}_fkey", "results", table, [column], ["id"], ondelete=ondelete)
