"""Reading a build's results as rows: the lean read path every other reader builds on.

"The outcome of a test in a build" is always its *latest* result in that build:
the highest result id per (build, test) across all of the build's runs, so shards
from several machines merge, and a rerun (the gate's flaky confirmation, stored
with attempt > 1) supersedes the first attempt.  Earlier attempts stay stored
and show in db/read_changes.py's ``test_history`` and ``flaky_tests``.

All functions take a ``Store`` (db/store.py); rows come back as plain tuples.
"""
from __future__ import annotations

import dataclasses
from operator import itemgetter
from typing import Iterator

from sqlalchemy import func, select

from torchconform.core.outcome import Outcome
from torchconform.db.columns import TEST_COLUMNS
from torchconform.db.models import build_values, result_values, results, runs, tests
from torchconform.db.values import DURATION, JOINED, VALUE_COLUMNS, values_of

# What results say (outcome, kind, ...) is in result_values, joined by value_id (db/values.py).
V = result_values.c

# Ids per ``IN (...)`` lookup (well under SQLite's variable limit).
LOOKUP_CHUNK = 2000


def _latest_ids(build_id: int):
    """Subquery: the latest result id of every test in the build (index-only scan)."""
    return (select(func.max(results.c.id).label("id"))
            .where(results.c.build_id == build_id)
            .group_by(results.c.test_pk)
            .subquery("latest"))


# A result's repro command: its own, or (NULL) its run's template rendered for its test,
# as torchconform/core/outcome.py's render_repro does.  Needs runs and tests joined.
# core.outcome.render_repro in SQL (the same result: core.outcome.repro_parts says why).
REPRO = func.coalesce(V.repro, func.replace(func.replace(runs.c.repro_template, "{id}", tests.c.test_id),
                                                    "{op}", tests.c.op))


def latest_results(build_id: int):
    """FROM clause: results restricted to the latest per test of the build, with what they say."""
    latest = _latest_ids(build_id)
    return JOINED.join(latest, results.c.id == latest.c.id)


# Columns ``latest_rows`` can return, by name: the outcome record's fields plus ``test_pk``.
ROW_COLUMNS = {
    "test_pk": results.c.test_pk,
    **{c: tests.c[c] for c in TEST_COLUMNS},
    **{c: V[c] for c in ("outcome", "kind", "missing_op", "fallback_ops", "skiplist_entry", "device",
                         "message", "tier")},
    **{c: results.c[c] for c in ("attempt", "max_abs_err", "max_rel_err")},
    "duration": DURATION,
    "repro": REPRO,
    # the stored text only (NULL: the run's repro_template rendered for the test): for a
    # reader that renders templates itself, for the rows it shows (the site)
    "stored_repro": V.repro,
    "run_id": results.c.run_id,
    # what the result says, as an id (result_values; the values: ``values_by_id``), and its own id
    "value_id": results.c.value_id,
    "result_id": results.c.id,
}
# In the dataclass's order, so a row is ``Outcome(*row)`` (after splitting fallback_ops).
OUTCOME_FIELDS = tuple(f.name for f in dataclasses.fields(Outcome))
_FALLBACK_AT = OUTCOME_FIELDS.index("fallback_ops")
ROW_CHUNK = 20_000
# latest_rows on SQLite reads a build by its id range when the range holds at most this many
# times the build's rows (results of other builds in between are skipped by the filter).
DENSE_SPAN = 2


def latest_rows(store, build: str, columns=OUTCOME_FIELDS, order: bool = False, plain: bool = False,
                saying: dict | None = None) -> Iterator:
    """The build's latest result per test as plain rows: the lean read path.

    Rows are SQLAlchemy ``Row`` tuples in ``columns`` order (also readable by
    name: ``row.outcome``); ``fallback_ops`` is the stored space-separated text.
    No ``Outcome`` validation (the store only holds validated records) and no
    sort unless ``order`` (by test id).  ``plain``: the driver's own tuples instead
    of ``Row`` objects (by position only; cheaper for the site, which reads
    millions of rows).  ``saying``: only the latest results whose value has these
    fields ({"outcome": "skip_backend", "kind": "missing_op"}: a one-off leaderboard's
    few rows, filtered in SQL by the build's matching value ids, ``build_values``).
    An unknown build raises here, before the first row, not when iteration starts.
    """
    unknown = [c for c in columns if c not in ROW_COLUMNS] + [c for c in saying or () if c not in VALUE_COLUMNS]
    if unknown:
        raise ValueError(f"latest_rows: unknown columns {unknown}; choose from {sorted(ROW_COLUMNS)}")
    build_id = store.build_id(build)
    return latest_rows_by_id(store, build_id, columns, order, plain, saying)


def latest_rows_by_id(store, build_id: int, columns, order: bool, plain_tuples: bool = False,
                      saying: dict | None = None) -> Iterator:
    """``latest_rows`` of a build known by its id."""
    for chunk in _latest_chunks(store, build_id, columns, order, plain_tuples, saying):
        yield from chunk


def _saying(build_id: int, saying: dict):
    """Subquery: the ids of the build's values whose fields are ``saying`` (few: build_values)."""
    return (select(build_values.c.value_id)
            .select_from(build_values.join(result_values, V.id == build_values.c.value_id))
            .where(build_values.c.build_id == build_id, *(V[c] == v for c, v in saying.items())))


def _latest_chunks(store, build_id: int, columns, order: bool, plain_tuples: bool = False,
                   saying: dict | None = None) -> Iterator[list]:
    """``_latest_rows`` a fetch (ROW_CHUNK rows) at a time: per-row work stays in C."""
    said = [c for c in columns if getattr(ROW_COLUMNS[c], "table", None) is result_values]
    if plain_tuples and said and "repro" not in columns:
        # What results say is read as value ids and joined here, the build's few thousand
        # values read once: about a third faster than joining result_values per row in SQL.
        yield from _with_values(store, build_id, columns, said, order, saying)
        return
    with store.read() as conn:
        # A build in which no test has a second result (no rerun, no overlapping shards;
        # the usual case) needs no "latest per test" subquery: every result is the latest,
        # and the plain index scan is about twice as fast.  SQLite only, where both
        # statements read the same snapshot (one read transaction); elsewhere always
        # the subquery, so a result stored in between cannot slip in.
        no_reruns, span = False, None
        if conn.dialect.name == "sqlite":
            n, distinct, low, high = conn.execute(
                select(func.count(), func.count(results.c.test_pk.distinct()), func.min(results.c.id),
                       func.max(results.c.id)).where(results.c.build_id == build_id)).one()
            no_reruns = n == distinct
            # A build's results are usually stored together, so their ids form one dense
            # range: reading that range of the table in rowid order is about twice as fast
            # as the build's index entries with one table lookup each (bench/gate.py,
            # bench/site.py).  Kept to ranges at most DENSE_SPAN times the build's rows.
            if no_reruns and n and high - low + 1 <= DENSE_SPAN * n:
                span = (low, high)
        # The values, tests (and runs) joins are only paid for when a column needs them.
        with_repro = "repro" in columns
        with_values = with_repro or any(getattr(ROW_COLUMNS[c], "table", None) is result_values for c in columns)
        source = (JOINED if with_values else results) if no_reruns else latest_results(build_id)
        if order or with_repro or any(getattr(ROW_COLUMNS[c], "table", None) is tests for c in columns):
            source = source.join(tests, tests.c.id == results.c.test_pk)
        if with_repro:
            source = source.join(runs, runs.c.id == results.c.run_id)
        query = select(*(ROW_COLUMNS[c].label(c) for c in columns)).select_from(source)
        if span is not None:
            # "+ 0" keeps SQLite's planner off the build_id index, onto the rowid range
            query = query.where(results.c.id.between(*span), results.c.build_id + 0 == build_id)
        elif no_reruns:
            query = query.where(results.c.build_id == build_id)
        if saying:
            # after the latest per test is chosen: a rerun saying something else hides the first attempt
            query = query.where(results.c.value_id.in_(_saying(build_id, saying)))
        if order:
            query = query.order_by(tests.c.test_id)
        # ROW_COLUMNS are integers, text and floats: the drivers' own values, no result processor
        yield from _chunks(conn.execute(query), plain_tuples)


def _with_values(store, build_id: int, columns, said: list[str], order: bool, saying: dict | None = None
                 ) -> Iterator:
    """``_latest_chunks`` of ``columns`` as plain tuples, the ``said`` ones (result_values
    columns) filled from the values by id."""
    rest = [c for c in columns if c not in said]
    with store.read() as conn:
        ids = conn.execute(select(build_values.c.value_id).where(build_values.c.build_id == build_id)).scalars()
        at = [VALUE_COLUMNS.index("repro" if c == "stored_repro" else c) for c in said]
        values = {vid: tuple(v[i] for i in at) for vid, v in values_of(conn, ids).items()}
    # a row of ``rest`` + value_id, then the value's fields: pick ``columns`` out of that
    width = len(rest) + 1
    pick = itemgetter(*(rest.index(c) if c in rest else width + said.index(c) for c in columns))
    if len(columns) == 1:
        single = pick
        pick = lambda row: (single(row),)   # noqa: E731  (itemgetter of one index gives a bare value)
    for chunk in _latest_chunks(store, build_id, (*rest, "value_id"), order, True, saying):
        unknown = {row[-1] for row in chunk} - values.keys()
        if unknown:   # values a writer stored after build_values was read
            with store.read() as conn:
                values.update((vid, tuple(v[i] for i in at)) for vid, v in values_of(conn, unknown).items())
        yield [pick(row + values[row[-1]]) for row in chunk]


def values_by_id(store, ids) -> dict[int, tuple]:
    """{value id: (outcome, kind, missing_op, fallback_ops, skiplist_entry, device, message,
    stored repro, tier)} of ``latest_rows``' ``value_id`` column: a reader that groups results by
    what they say reads each value once (db/values.py)."""
    with store.read() as conn:
        return values_of(conn, ids)


def results_by_id(store, result_ids, columns=OUTCOME_FIELDS) -> dict[int, tuple]:
    """{result id (``latest_rows``' ``result_id``): row of ``columns``} for those results,
    read in batches: a reader that needs every field of a few thousand results only."""
    unknown = [c for c in columns if c not in ROW_COLUMNS]
    if unknown:
        raise ValueError(f"results_by_id: unknown columns {unknown}; choose from {sorted(ROW_COLUMNS)}")
    ids = sorted(set(result_ids))
    source = JOINED.join(tests, tests.c.id == results.c.test_pk).join(runs, runs.c.id == results.c.run_id)
    out = {}
    with store.read() as conn:
        for i in range(0, len(ids), LOOKUP_CHUNK):
            query = (select(results.c.id, *(ROW_COLUMNS[c].label(c) for c in columns)).select_from(source)
                     .where(results.c.id.in_(ids[i:i + LOOKUP_CHUNK])))
            for rid, *row in conn.execute(query).all():
                out[rid] = tuple(row)
    return out


def repro_templates(store, build: str) -> dict[int, str]:
    """{run id: its repro_template ("" when it has none)} of the build's runs."""
    with store.read() as conn:
        rows = conn.execute(select(runs.c.id, runs.c.repro_template)
                            .where(runs.c.build_id == store.build_id(build, conn=conn))).all()
    return {run_id: template or "" for run_id, template in rows}


def stored_tests(store, columns=TEST_COLUMNS) -> Iterator:
    """Every stored test as ``(test_pk, *columns)`` plain tuples (``columns`` from the
    tests table's TEST_COLUMNS), unordered: for a reader
    (the site) that joins ``latest_rows``' result-only rows (with ``test_pk``) to their
    tests itself, once for many builds, instead of once per build in SQL."""
    unknown = [c for c in columns if c not in TEST_COLUMNS]
    if unknown:
        raise ValueError(f"stored_tests: unknown columns {unknown}; choose from {list(TEST_COLUMNS)}")
    return _rows(store, select(tests.c.id, *(tests.c[c] for c in columns)), plain=True)


def suite_tests(store, suite: str) -> list[str]:
    """Test ids of every stored test of ``suite`` (any build)."""
    with store.read() as conn:
        return conn.execute(select(tests.c.test_id).where(tests.c.suite == suite)).scalars().all()


def _rows(store, query, plain: bool = False) -> Iterator:
    with store.read() as conn:
        yield from _fetch(conn.execute(query), plain)


def _fetch(result, plain: bool) -> Iterator:
    """A result's rows, ROW_CHUNK at a time; ``plain``: the driver's own tuples (cheaper
    than SQLAlchemy's ``Row`` objects, by position only)."""
    for chunk in _chunks(result, plain):
        yield from chunk


def _chunks(result, plain: bool) -> Iterator[list]:
    """``_fetch``'s rows as the lists fetchmany returns."""
    fetch = result.cursor.fetchmany if plain else result.fetchmany
    while True:
        chunk = fetch(ROW_CHUNK)
        if not chunk:
            return
        yield chunk


def iter_outcomes(store, build: str) -> Iterator[Outcome]:
    """The build's outcome records (latest per test), in test id order.

    Built on ``latest_rows``.  Readers that do not need validated ``Outcome`` objects
    should use ``latest_rows`` directly: it is about a third cheaper."""
    at = _FALLBACK_AT
    for row in latest_rows(store, build, OUTCOME_FIELDS, order=True):
        yield Outcome(*row[:at], row[at].split() if row[at] else [], *row[at + 1:])
