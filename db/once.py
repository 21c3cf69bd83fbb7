"""Writes for writers that may run twice: each test of a build is stored at most once.

A Ray task stores its model's outcomes itself (sweep/ray_task.py).  Ray may run
the same model again (its node died after the write, before the driver heard of
it), and the driver writes ``crash``/``timeout`` outcomes for a task that died,
perhaps after the task had stored some of its runs.  ``add_outcomes_once`` makes
all of them safe: in one write transaction it drops the outcomes whose test the
build already has and stores the rest.  SQLite serialises writers at BEGIN
(``BEGIN IMMEDIATE``, see store.py); PostgreSQL takes a transaction-scoped
advisory lock per build and model, so two writers of one model queue.

``retrying`` repeats a write that failed on a lost or busy connection, with a
growing pause, before giving up with the last error.
"""
from __future__ import annotations

import hashlib
import time
from typing import Callable, Iterable, TypeVar

from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError, OperationalError

from torchconform.core.outcome import Outcome
from torchconform.db.errors import StoreError
from torchconform.db.models import results, runs, tests
from torchconform.db.columns import RESULT_COLUMNS, TEST_COLUMNS, outcome_from_rows
from torchconform.db.values import FIELD, JOINED

T = TypeVar("T")

# Pauses between attempts of a failed write (seconds): about half a minute in all, long
# enough for a PostgreSQL fail-over or a SQLite writer holding the lock through a bulk load.
RETRY_PAUSES = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


def add_outcomes_once(store, run_id: int, outcomes: Iterable[Outcome], lock_key: str = "") -> tuple[list, list]:
    """Store those of ``outcomes`` whose test the run's build has no result for yet.

    Returns (stored, already): the outcomes written now, and the build's stored
    outcomes of the others (read back, so a caller reports what the store holds)."""
    outcomes = list(outcomes)
    if not outcomes:
        return [], []
    with store.write() as conn:
        build_id = conn.execute(select(runs.c.build_id).where(runs.c.id == run_id)).scalar_one()
        if store.dialect == "postgresql":
            key = lock_key or outcomes[0].test_id
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_id(build_id, key)})
        have = {o.test_id: o for o in stored_outcomes(conn, build_id, [o.test_id for o in outcomes])}
        fresh = [o for o in outcomes if o.test_id not in have]
        store.add_outcomes(run_id, fresh, conn=conn)
    return fresh, list(have.values())


def stored_outcomes(conn, build_id: int, test_ids: list[str]) -> list[Outcome]:
    """The build's latest stored outcome of each of ``test_ids`` (a few per call: one model)."""
    query = (select(*(tests.c[c] for c in TEST_COLUMNS), *(FIELD[c] for c in RESULT_COLUMNS[3:]))
             .select_from(JOINED.join(tests, tests.c.id == results.c.test_pk))
             .where(results.c.build_id == build_id, tests.c.test_id.in_(sorted(set(test_ids))))
             .order_by(results.c.id))
    latest = {}
    width = len(TEST_COLUMNS)
    for row in conn.execute(query):
        latest[row[0]] = outcome_from_rows(tuple(row[:width]), tuple(row[width:]))
    return list(latest.values())


def _lock_id(build_id: int, key: str) -> int:
    """A signed 64-bit advisory-lock id for (build, key)."""
    digest = hashlib.blake2b(f"{build_id}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def transient(exc: BaseException) -> bool:
    """A failure worth another attempt: the connection was lost or the database was busy,
    not a wrong statement or a constraint the data broke (nor a full disk or a corrupt file:
    db/errors.py says which store faults pass)."""
    if isinstance(exc, StoreError):
        return exc.transient
    if isinstance(exc, OperationalError):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def retrying(write: Callable[[], T], on_retry: Callable[[BaseException], None] | None = None,
             pauses=RETRY_PAUSES, sleep=time.sleep) -> T:
    """``write()``, again after each pause while it fails transiently; the last error propagates."""
    for pause in pauses:
        try:
            return write()
        except Exception as exc:
            if not transient(exc):
                raise
            if on_retry:
                on_retry(exc)
            sleep(pause)
    return write()  # the last attempt: its error is the caller's
