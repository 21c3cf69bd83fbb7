"""Result values stored once: results point at what they say (db/values.py).

``results`` loses its text columns (outcome, kind, missing_op, fallback_ops,
skiplist_entry, device, message, repro) to ``result_values`` (one row per distinct
combination, found by a 64-bit digest) and stores ``value_id``; the duration
becomes whole microseconds (``duration_us``).  ``build_values`` lists which values
each build's results point at.  Two indexes go: ``ix_results_test`` (a test's
history now seeks the (build, test) index once per build) and
``ix_results_missing_op`` (``build_values`` answers "first build missing an
operator").  On a nightly series this takes a stored result from about 130 bytes
to under 40 (bench/ingest.py).

The table is rebuilt (copy, drop, rename) inside the upgrade's transaction; a
real seed store of 51,601 upstream/ops outcomes took 4 s (one pass over the rows:
time grows with the store).  Queries answer as before, durations to
the microsecond.  The file keeps its size: the pages the old table held go to
SQLite's free list and the next builds' writes reuse them (``VACUUM`` gives them back).

Revision ID: 0008_result_values
Revises: 0007_numeric_errors
"""
import sqlalchemy as sa
from alembic import op

from torchconform.db.values import digest

revision = "0008_result_values"
down_revision = "0007_numeric_errors"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
VALUES = ("outcome", "kind", "missing_op", "fallback_ops", "skiplist_entry", "device", "message", "repro")
# NULL repro (the run's template) must match NULL in the join: both sides coalesce to this.
NULL_REPRO = "\x01"
CHUNK = 5000


def _value_columns(duration: bool = False) -> list:
    """What a result says (0007's columns of ``results``; ``duration``: with it, in 0007's place)."""
    cols = [
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("kind", sa.String(30), nullable=False, server_default=""),
        sa.Column("missing_op", sa.String(300), nullable=False, server_default=""),
        sa.Column("fallback_ops", sa.Text, nullable=False, server_default=""),
        sa.Column("skiplist_entry", sa.String(300), nullable=False, server_default=""),
        sa.Column("device", sa.String(100), nullable=False, server_default=""),
        sa.Column("message", sa.Text, nullable=False, server_default=""),
        sa.Column("repro", sa.Text, nullable=True),
    ]
    if duration:
        cols.insert(6, sa.Column("duration", sa.Float, nullable=False, server_default="0"))
    return cols


def _row_columns() -> list:
    """The columns every layout of ``results`` starts with."""
    return [
        sa.Column("id", BigId, primary_key=True),
        sa.Column("build_id", BigId, sa.ForeignKey("builds.id", ondelete="CASCADE"), nullable=False),
        sa.Column("run_id", BigId, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("test_pk", BigId, sa.ForeignKey("tests.id"), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
    ]


def _create_values():
    op.create_table("result_values", sa.Column("id", BigId, primary_key=True),
                    sa.Column("digest", sa.BigInteger, nullable=False, unique=True), *_value_columns())


def _fill_values(bind):
    """Every distinct value of the old results, with its digest (computed here: no SQL
    function gives blake2b on both databases)."""
    cols = ", ".join(VALUES)
    rows, seen = [], set()
    for next_id, value in enumerate(bind.exec_driver_sql(f"SELECT DISTINCT {cols} FROM results"), start=1):
        value = tuple(value)
        salt = 0
        while (d := digest(value, salt)) in seen:
            salt += 1   # a collision: the next probe, as db/values.ValueIds does
        seen.add(d)
        rows.append({"id": next_id, "digest": d, **dict(zip(VALUES, value))})
    table = sa.table("result_values", *(sa.column(c) for c in ("id", "digest", *VALUES)))
    for i in range(0, len(rows), CHUNK):
        bind.execute(table.insert(), rows[i:i + CHUNK])
    if bind.dialect.name == "postgresql":   # explicit ids: new values must continue after them
        bind.exec_driver_sql("SELECT setval('result_values_id_seq', %s, false)", (len(rows) + 1,))


def upgrade():
    bind = op.get_bind()
    _create_values()
    _fill_values(bind)
    op.create_table(
        "results_lean",
        *_row_columns(),
        sa.Column("value_id", BigId, sa.ForeignKey("result_values.id"), nullable=False),
        sa.Column("duration_us", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("max_abs_err", sa.Float, nullable=True),
        sa.Column("max_rel_err", sa.Float, nullable=True),
    )
    on = " AND ".join(f"v.{c} = r.{c}" for c in VALUES if c != "repro")
    on += f" AND coalesce(v.repro, '{NULL_REPRO}') = coalesce(r.repro, '{NULL_REPRO}')"
    whole = "BIGINT" if bind.dialect.name == "postgresql" else "INTEGER"
    op.execute(
        "INSERT INTO results_lean (id, build_id, run_id, test_pk, attempt, value_id, duration_us, "
        "max_abs_err, max_rel_err) "
        f"SELECT r.id, r.build_id, r.run_id, r.test_pk, r.attempt, v.id, CAST(round(r.duration * 1000000) AS {whole}), "
        f"r.max_abs_err, r.max_rel_err FROM results r JOIN result_values v ON {on} ORDER BY r.id")
    op.drop_table("results")
    op.rename_table("results_lean", "results")
    if bind.dialect.name == "postgresql":
        # the copy kept ids; new rows must continue after them
        op.execute("ALTER SEQUENCE results_lean_id_seq RENAME TO results_id_seq")
        op.execute("SELECT setval('results_id_seq', coalesce((SELECT max(id) FROM results), 0) + 1, false)")
    op.create_index("ix_results_build_test", "results", ["build_id", "test_pk"], postgresql_include=["id"])
    op.create_table(
        "build_values",
        sa.Column("build_id", BigId, sa.ForeignKey("builds.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("value_id", BigId, sa.ForeignKey("result_values.id"), primary_key=True),
    )
    op.execute("INSERT INTO build_values (build_id, value_id) SELECT DISTINCT build_id, value_id FROM results")


def downgrade():
    bind = op.get_bind()
    op.create_table(
        "results_wide",
        *_row_columns(),
        *_value_columns(duration=True),
        sa.Column("max_abs_err", sa.Float, nullable=True),
        sa.Column("max_rel_err", sa.Float, nullable=True),
    )
    cols = ", ".join(f"v.{c}" for c in VALUES)
    op.execute(f"INSERT INTO results_wide (id, build_id, run_id, test_pk, attempt, {', '.join(VALUES)}, duration, "
               "max_abs_err, max_rel_err) "
               f"SELECT r.id, r.build_id, r.run_id, r.test_pk, r.attempt, {cols}, r.duration_us / 1000000.0, "
               "r.max_abs_err, r.max_rel_err FROM results r JOIN result_values v ON v.id = r.value_id ORDER BY r.id")
    op.drop_table("build_values")
    op.drop_table("results")
    op.drop_table("result_values")
    op.rename_table("results_wide", "results")
    if bind.dialect.name == "postgresql":
        op.execute("ALTER SEQUENCE results_wide_id_seq RENAME TO results_id_seq")
        op.execute("SELECT setval('results_id_seq', coalesce((SELECT max(id) FROM results), 0) + 1, false)")
    op.create_index("ix_results_build_test", "results", ["build_id", "test_pk", "id"])
    op.create_index("ix_results_test", "results", ["test_pk", "build_id"])
    op.create_index("ix_results_missing_op", "results", ["missing_op", "build_id"],
                    sqlite_where=sa.text("missing_op != ''"), postgresql_where=sa.text("missing_op != ''"))
