"""Result values: what a result says, stored once however many results say it.

A result row holds its build, run, test, attempt, duration and errors; what the
result *says* (outcome, kind, missing operator, fallback operators, skiplist
entry, device, message, stored repro command) lives in ``result_values`` and the
row points at it.  In a nightly series most tests say the same thing build after
build (the same pass, the same missing operator, the same failure message), so a
build of 154,000 results points at a few thousand values, and the row stays
about 24 bytes on SQLite (bench/ingest.py prints the bytes per result).

Values are found by a 64-bit digest of their fields (unique), checked field by
field when read back, so two values never share an id even if digests collide.
``build_values`` lists the values each build's results point at: the leaderboard's
"first build that reported this operator missing" reads it, not the results.

Reads join ``results`` to ``result_values`` (``JOINED``, ``FIELD``); writes go through
``ValueIds``, which keeps the ids it has seen (values are never deleted).
"""
from __future__ import annotations

import hashlib
import json

from sqlalchemy import Float, cast, select
from sqlalchemy.engine import Connection

from torchconform.db.models import result_values, results

# A value's fields, in ``result_values`` column order (and db/store.py's result_fields order).
VALUE_COLUMNS = ("outcome", "kind", "missing_op", "fallback_ops", "skiplist_entry", "device", "message", "repro",
                 "tier")
# Rows per ``IN (...)`` lookup.
LOOKUP_CHUNK = 2000
# Durations are stored as whole microseconds (an integer takes 2-4 bytes, a float 8).
US_PER_S = 1_000_000

# FROM clause of a read that needs what results say.
JOINED = results.join(result_values, result_values.c.id == results.c.value_id)
# Float division on every database (PostgreSQL would otherwise divide integers exactly).
DURATION = (cast(results.c.duration_us, Float) / float(US_PER_S))

# A result's field by name (the Outcome record's names), for select lists.
FIELD = {**{c: result_values.c[c] for c in VALUE_COLUMNS},
         **{c: results.c[c] for c in ("id", "build_id", "run_id", "test_pk", "attempt", "value_id",
                                     "max_abs_err", "max_rel_err")},
         "duration": DURATION}


def duration_us(seconds) -> int:
    """A duration in seconds as the stored whole microseconds."""
    return int(round(float(seconds or 0.0) * US_PER_S))


def digest(value: tuple, salt: int = 0) -> int:
    """A signed 64-bit digest of a value's fields (``salt`` > 0: the next probe after a collision).
    A value without a tier (the last field "") is digested as it was before the tier existed
    (migration 0011_result_tiers), so values stored then are found again."""
    if len(value) == len(VALUE_COLUMNS) and value[-1] == "":
        value = value[:-1]
    text = json.dumps([salt, *value], ensure_ascii=False, separators=(",", ":"))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)


class ValueIds:
    """value tuple (VALUE_COLUMNS order) -> result_values.id, inserting unseen values.

    One per Store.  The cache is dropped when a write transaction rolls back (ids it
    inserted are gone with it)."""

    def __init__(self, dialect: str):
        self.dialect = dialect
        self.known: dict[tuple, int] = {}

    def clear(self) -> None:
        self.known.clear()

    def ids(self, conn: Connection, values, digests: list[int] | None = None) -> list[int]:
        """The id of every value of ``values`` (a list of tuples), in order; ``digests``:
        their ``digest``, when the caller has them (ingest's parsing process does)."""
        known = self.known
        unseen = list(dict.fromkeys(v for v in values if v not in known))
        if unseen:
            self._resolve(conn, unseen, dict(zip(values, digests)) if digests is not None else {})
        return [known[v] for v in values]

    def _resolve(self, conn: Connection, values: list[tuple], digests: dict) -> None:
        salt = 0
        while values:
            by_digest: dict[int, tuple] = {}
            for v in values:
                d = digests.get(v) if salt == 0 else None
                by_digest.setdefault(digest(v, salt) if d is None else d, v)   # a second value of a digest waits
            self._fetch(conn, by_digest)
            missing = [d for d, v in by_digest.items() if v not in self.known]
            if missing:
                rows = [(d, *by_digest[d]) for d in missing]
                self._insert(conn, rows)
                self._fetch(conn, {d: by_digest[d] for d in missing})
            # A value still unknown shares its digest with another value (stored first, or
            # earlier in this batch): probe again with the next salt.
            values = [v for v in values if v not in self.known]
            salt += 1

    def _fetch(self, conn: Connection, by_digest: dict[int, tuple]) -> None:
        digests = list(by_digest)
        cols = [result_values.c[c] for c in VALUE_COLUMNS]
        for i in range(0, len(digests), LOOKUP_CHUNK):
            chunk = digests[i:i + LOOKUP_CHUNK]
            query = select(result_values.c.id, result_values.c.digest, *cols).where(result_values.c.digest.in_(chunk))
            for vid, d, *fields in conn.execute(query):
                wanted = by_digest.get(d)
                if wanted is not None and tuple(fields) == wanted:
                    self.known[wanted] = vid

    def _insert(self, conn: Connection, rows: list[tuple]) -> None:
        columns = ("digest", *VALUE_COLUMNS)
        cols = ", ".join(f'"{c}"' for c in columns)
        marks = ", ".join(["?" if self.dialect == "sqlite" else "%s"] * len(columns))
        conn.exec_driver_sql(f"INSERT INTO result_values ({cols}) VALUES ({marks}) "
                             "ON CONFLICT (digest) DO NOTHING", rows)


def note_build_values(conn: Connection, dialect: str, build_id: int, value_ids) -> None:
    """Record that ``build_id`` has results pointing at ``value_ids`` (idempotent)."""
    pairs = [(build_id, v) for v in sorted(set(value_ids))]
    if not pairs:
        return
    marks = "?, ?" if dialect == "sqlite" else "%s, %s"
    conn.exec_driver_sql(f"INSERT INTO build_values (build_id, value_id) VALUES ({marks}) "
                         "ON CONFLICT (build_id, value_id) DO NOTHING", pairs)


def values_of(conn: Connection, ids) -> dict[int, tuple]:
    """{result_values.id: value tuple (VALUE_COLUMNS order)} of ``ids``."""
    ids = sorted(set(ids))
    out = {}
    cols = [result_values.c[c] for c in VALUE_COLUMNS]
    for i in range(0, len(ids), LOOKUP_CHUNK):
        chunk = ids[i:i + LOOKUP_CHUNK]
        for vid, *fields in conn.execute(select(result_values.c.id, *cols).where(result_values.c.id.in_(chunk))):
            out[vid] = tuple(fields)
    return out

