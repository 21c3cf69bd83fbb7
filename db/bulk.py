"""The dialects' fast write paths, for ``Store``'s bulk writes (db/store.py).

SQLite: the driver's own ``executemany`` and pragmas for a bulk transaction;
PostgreSQL: ``COPY`` and a temporary table for the tests of a batch.  Each
function takes the open connection of the caller's write transaction.
"""
from __future__ import annotations

import operator

from sqlalchemy.engine import Connection

from torchconform.db.columns import TEST_COLUMNS

# Page cache of a bulk write (KiB), and SQLite's default (negative: KiB).
BULK_CACHE_KIB = 65536
SQLITE_DEFAULT_CACHE = -2000

_FIRST = operator.itemgetter(0)   # a test row's id


def pragmas(conn: Connection, *pragmas_: str) -> None:
    """SQLite: run ``PRAGMA``s on the connection's driver connection (outside a transaction)."""
    dbapi = conn.connection.driver_connection
    for pragma in pragmas_:
        dbapi.execute(f"PRAGMA {pragma}")


def bulk_pragmas(conn: Connection) -> None:
    """SQLite, before a bulk transaction: no foreign-key lookups, a 64 MB page cache."""
    pragmas(conn, "foreign_keys=OFF", f"cache_size=-{BULK_CACHE_KIB}")


def usual_pragmas(conn: Connection) -> None:
    """SQLite, after a bulk transaction: the connection's settings as ``bulk_pragmas`` found them."""
    pragmas(conn, "foreign_keys=ON", f"cache_size={SQLITE_DEFAULT_CACHE}")


def bulk_insert(conn: Connection, dialect: str, table: str, columns, rows: list[tuple],
                ignore_conflict: str = "") -> None:
    """The fast path: the driver's own executemany (SQLite) or COPY (PostgreSQL)."""
    cols = ", ".join(f'"{c}"' for c in columns)
    if dialect == "postgresql" and not ignore_conflict:
        cursor = conn.connection.driver_connection.cursor()
        with cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        return
    marks = ", ".join(["?" if dialect == "sqlite" else "%s"] * len(columns))
    conflict = f" ON CONFLICT ({ignore_conflict}) DO NOTHING" if ignore_conflict else ""
    conn.exec_driver_sql(f"INSERT INTO {table} ({cols}) VALUES ({marks}){conflict}", rows)


def insert_ignore(dialect: str, table, keys):
    """An INSERT of ``table`` that skips rows whose ``keys`` are taken (both dialects)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(table).on_conflict_do_nothing(index_elements=keys)


def took_next_ids(conn: Connection, rows: list[tuple], top: int, inserted: int) -> dict | None:
    """SQLite: when every test of the batch was new, the inserts (we hold the write
    lock) took the ids after ``top`` in order, so no lookup is needed -- a fresh
    build's ingest skips reading 150k ids back: {test id: id}.  Checked, not assumed:
    the new maximum and the first new row must match, else None (look them up)."""
    if not rows or inserted != len(rows):
        return None
    last, first_tid = conn.exec_driver_sql(
        "SELECT max(id), (SELECT test_id FROM tests WHERE id = ?) FROM tests", (top + 1,)).one()
    if last != top + len(rows) or first_tid != rows[0][0]:
        return None
    return dict(zip(map(_FIRST, rows), range(top + 1, last + 1)))


def pg_upsert_tests(conn: Connection, rows: list[tuple], known: dict[str, int]) -> None:
    """PostgreSQL: COPY the batch's tests into a temporary table, insert the new
    ones and read the others' ids back into ``known`` (test id -> id): set
    statements, no per-row round trips."""
    cols = ", ".join(TEST_COLUMNS)
    conn.exec_driver_sql("CREATE TEMPORARY TABLE IF NOT EXISTS tc_batch_tests ("
                         + ", ".join(f"{c} TEXT NOT NULL" for c in TEST_COLUMNS) + ") ON COMMIT DELETE ROWS")
    conn.exec_driver_sql("TRUNCATE tc_batch_tests")
    cursor = conn.connection.driver_connection.cursor()
    with cursor.copy(f"COPY tc_batch_tests ({cols}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    # Sorted, so concurrent shards inserting overlapping tests take locks in one order.
    # RETURNING gives the new tests' ids; only those stored before are looked up (by
    # the unique index: a join with the batch made the planner scan every test).
    # The driver's cursor: psycopg builds the (test_id, id) pairs in C, 150k of them.
    cursor.execute(f"INSERT INTO tests ({cols}) SELECT {cols} FROM tc_batch_tests "
                   "ORDER BY test_id ON CONFLICT (test_id) DO NOTHING RETURNING test_id, id")
    known.update(cursor.fetchall())
    stored_before = [row[0] for row in rows if row[0] not in known]
    if stored_before:
        cursor.execute("SELECT test_id, id FROM tests WHERE test_id = ANY(%s)", (stored_before,))
        known.update(cursor.fetchall())
