"""The results store's writer: ``Store`` wraps one SQLAlchemy engine and writes
builds, runs and outcomes in transactions it opens (``read``, ``write``).

Opening a store (engine, schema revision) is db/opening.py's; the dialects' fast
paths (executemany, COPY) db/bulk.py's; the flat rows written, db/columns.py's.
Reads go through the db readers; this module only writes.
"""
from __future__ import annotations

import contextlib
from collections import Counter
import operator
import os
import socket
from typing import Iterable, Iterator

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection, Engine

from torchconform.core.outcome import Outcome, fits_template, repro_template
from torchconform.config import mask_password
from torchconform.db import errors as store_errors
from torchconform.db.bulk import (
    bulk_insert, bulk_pragmas, insert_ignore, pg_upsert_tests, took_next_ids, usual_pragmas,
)
from torchconform.db.columns import (
    BUILD_COLUMNS, REPRO_AT, STORED_RESULT_COLUMNS, TEST_COLUMNS, result_fields, split_metadata, test_row, text,
    utcnow,
)
from torchconform.db.model_ops import save_traces
from torchconform.db.models import (
    DONE_STATES, INTERRUPTED, RESUMED, RUNNING, builds, runs, status_for_exit, tests,
)
from torchconform.db.perf import save_rows
from torchconform.db.values import ValueIds, duration_us, note_build_values
from torchconform.errors import UserError

_TEST_PK = operator.itemgetter(2)
_FIRST = operator.itemgetter(0)   # a test row's id, a results row's test pk (SQLite)

# Rows per ``IN (...)`` lookup of test ids (well under SQLite's variable limit).
LOOKUP_CHUNK = 2000


class Store:
    """A connection to one results database (see ``open_store``)."""

    def __init__(self, engine: Engine, url: str, busy_timeout: int | None = None):
        self.engine = engine
        self.url = url
        self.dialect = engine.dialect.name
        # Seconds a SQLite writer waits for another's lock (db/opening.py): named in the error.
        self.busy_timeout = busy_timeout
        # test_id -> tests.id, filled lazily; test rows are never deleted, so it stays valid.
        self._test_pks: dict[str, int] = {}
        # value tuple -> result_values.id, likewise (values are never deleted)
        self._value_ids = ValueIds(self.dialect)
        # run id -> build id, likewise
        self._run_builds: dict[int, int] = {}
        # Rows a bulk writer (ingest) should hand each add_rows call: on PostgreSQL every
        # statement is a round trip to the server, on SQLite a call costs next to nothing.
        self.rows_per_write = 6_000 if self.dialect == "postgresql" else 1
        # Set once check_sound found the file sound (SQLite).
        self._sound = False

    # -- connections ---------------------------------------------------------------
    def __repr__(self):
        return f"Store({mask_password(self.url)!r})"

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        with self._faults_as_errors(), self.engine.connect() as conn:
            yield conn

    @contextlib.contextmanager
    def _faults_as_errors(self) -> Iterator[None]:
        """A store fault the driver raised past SQLAlchemy (a raw cursor: PostgreSQL's COPY,
        SQLite's pragmas) becomes the same one-line StoreError as the engine's (db/errors.py)."""
        try:
            yield
        except UserError:
            raise
        except Exception as exc:
            mapped = store_errors.store_error(exc, self.url, self.busy_timeout if self.dialect == "sqlite" else None)
            if mapped is None:
                raise
            raise mapped from exc

    def check_sound(self) -> None:
        """SQLite: refuse to write into a corrupt file (a write there can spread the damage
        and leaves a result nobody can read back).  ``PRAGMA quick_check`` checks every
        page's structure but not indexes against their tables (``torchconform db check``
        does): about 0.1 s on a store of one 154k-outcome build.  Once per Store, before
        its first write."""
        if self._sound or self.dialect != "sqlite":
            return
        with self.read() as conn:
            said = [str(row[0]) for row in conn.exec_driver_sql("PRAGMA quick_check(1)")]
        if said != ["ok"]:
            lines = [line.strip() for text_ in said for line in text_.splitlines()]
            first = next((line for line in lines if line and not line.startswith("***")), "quick_check failed")
            raise store_errors.StoreError(store_errors.message("corrupt", self.url, first), "corrupt")
        self._sound = True

    @contextlib.contextmanager
    def write(self, bulk: bool = False) -> Iterator[Connection]:
        """One write transaction (SQLite: takes the write lock at BEGIN).

        ``bulk`` (ingest): on SQLite, no foreign-key lookups and a 64 MB page cache for
        this transaction -- about an eighth of a 150k-row load.  Safe because bulk
        writers insert only ids they created or read in the same transaction.
        The store's first write checks that it is sound (``check_sound``)."""
        self.check_sound()
        with self._faults_as_errors(), self.engine.connect() as conn:
            bulk_sqlite = bulk and self.dialect == "sqlite"
            if bulk_sqlite:  # pragmas apply outside a transaction only
                bulk_pragmas(conn)
            conn.execution_options(tc_write=True)
            try:
                with conn.begin():
                    yield conn
            except BaseException:
                # Tests and values inserted by the rolled-back transaction are gone: forget their ids.
                self._test_pks.clear()
                self._value_ids.clear()
                self._run_builds.clear()
                raise
            finally:
                if bulk_sqlite:  # the pooled connection goes back as it came, or not at all
                    try:
                        usual_pragmas(conn)
                    except Exception:
                        conn.invalidate()

    # -- builds ------------------------------------------------------------------------
    def build_row(self, name: str, conn: Connection | None = None) -> dict:
        """The build's row as a dict; UserError naming the fix when it does not exist."""
        query = select(builds).where(builds.c.name == name)
        if conn is None:
            with self.read() as c:
                row = c.execute(query).mappings().first()
        else:
            row = conn.execute(query).mappings().first()
        if row is None:
            raise UserError(f"unknown build {name!r}; list the stored builds with `torchconform builds`")
        return dict(row)

    def build_id(self, name: str, conn: Connection | None = None) -> int:
        return self.build_row(name, conn)["id"]

    def ensure_build(self, name: str, append: bool = False, conn: Connection | None = None, **metadata) -> int:
        """Create build ``name`` (or, with ``append``, reuse it) and return its id.

        Without ``append`` an existing name is a user error: builds are never
        silently mixed.  With ``append`` (shards, the runner's sink) blank
        metadata columns are filled and extra metadata merged.
        """
        if not name or not str(name).strip():
            raise UserError("empty build name; pass --build NAME")
        if conn is None:
            with self.write() as c:
                return self.ensure_build(name, append=append, conn=c, **metadata)
        columns, extra = split_metadata(metadata)
        row = conn.execute(select(builds).where(builds.c.name == name)).mappings().first()
        if row is None:
            values = {"name": name, "created": utcnow(), **{c: "" for c in BUILD_COLUMNS}, **columns, "metadata": extra}
            new_id = conn.execute(insert_ignore(self.dialect, builds, ["name"]).values(**values)
                                  .returning(builds.c.id)).scalar_one_or_none()
            if new_id is not None:
                return new_id
            # Another writer created it between our select and insert.
            row = conn.execute(select(builds).where(builds.c.name == name)).mappings().one()
        if not append:
            raise UserError(f"build {name!r} already exists; pass --append to add to it or choose another --build name")
        changes = {c: v for c, v in columns.items() if v and not row[c]}
        merged = {**(row["metadata"] or {}), **extra}
        if merged != (row["metadata"] or {}):
            changes["metadata"] = merged
        if changes:
            conn.execute(update(builds).where(builds.c.id == row["id"]).values(**changes))
        return row["id"]

    def add_plan(self, name: str, steps: list[dict], conn: Connection | None = None) -> None:
        """Record on build ``name`` (created if new) the runs it is made of: ``steps`` are
        ``{"suite", "shards"}``; a suite already in the plan keeps its entry, so every
        shard and every step of a plan may record it (db/runstate.py reads it)."""
        if conn is None:
            with self.write() as c:
                return self.add_plan(name, steps, conn=c)
        self.ensure_build(name, append=True, conn=conn)
        row = conn.execute(select(builds.c.id, builds.c.metadata).where(builds.c.name == name)).one()
        meta = dict(row[1] or {})
        plan = [dict(p) for p in meta.get("plan") or [] if isinstance(p, dict)]
        known = {p.get("suite") for p in plan}
        for step in steps:
            if step["suite"] not in known:
                known.add(step["suite"])
                plan.append({"suite": step["suite"], "shards": int(step.get("shards") or 1)})
        if plan != meta.get("plan"):
            conn.execute(update(builds).where(builds.c.id == row[0]).values(metadata={**meta, "plan": plan}))

    # -- runs ----------------------------------------------------------------------------
    def start_run(self, build: str | int, suite: str = "", selection: str = "", shard: str = "",
                  host: str = "", command: str = "", repro_template: str = "", pid: int | None = None,
                  planned: int | None = None, conn: Connection | None = None) -> int:
        """A new run of ``build`` (status ``running``); ``repro_template`` (see torchconform/core/outcome.py)
        is what a result stored with no repro command of its own (None) gets rendered from;
        ``pid`` the writing process on ``host`` (default: this one), so that readers can tell
        a killed run from a live one."""
        if conn is None:
            with self.write() as c:
                return self.start_run(build, suite, selection, shard, host, command, repro_template, pid,
                                      planned, conn=c)
        build_id = build if isinstance(build, int) else self.build_id(build, conn)
        values = dict(build_id=build_id, suite=suite or "", selection=text(selection), shard=str(shard or ""),
                      host=host or socket.gethostname(), command=mask_password(text(command)), started=utcnow(), n_results=0,
                      repro_template=repro_template or "", status=RUNNING,
                      pid=os.getpid() if pid is None else (pid or None), planned=planned)
        return conn.execute(runs.insert().values(**values).returning(runs.c.id)).scalar_one()

    def set_planned(self, run_id: int, planned: int, conn: Connection | None = None) -> None:
        """How many tests the run set out to run (known after collection)."""
        if conn is None:
            with self.write() as c:
                return self.set_planned(run_id, planned, conn=c)
        conn.execute(update(runs).where(runs.c.id == run_id).values(planned=int(planned)))

    def finish_run(self, run_id: int, exit_status: int, status: str | None = None,
                   conn: Connection | None = None) -> None:
        """End a run: ``finished`` for pytest's OK/TESTS_FAILED/NO_TESTS_COLLECTED, else
        ``interrupted`` (or the ``status`` given)."""
        if conn is None:
            with self.write() as c:
                return self.finish_run(run_id, exit_status, status, conn=c)
        conn.execute(update(runs).where(runs.c.id == run_id).values(
            ended=utcnow(), exit_status=int(exit_status), status=status or status_for_exit(exit_status)))

    def mark_interrupted(self, build: str, pid: int, exit_status: int, host: str | None = None,
                         conn: Connection | None = None) -> int:
        """Runs of ``build`` written by process ``pid`` on ``host`` that are still
        ``running`` become ``interrupted`` with ``exit_status`` (the supervisor of a
        pytest that died without ending its run); returns how many."""
        if conn is None:
            with self.write() as c:
                return self.mark_interrupted(build, pid, exit_status, host, conn=c)
        row = conn.execute(select(builds.c.id).where(builds.c.name == build)).first()
        if row is None:
            return 0
        result = conn.execute(update(runs).where(
            runs.c.build_id == row[0], runs.c.pid == int(pid), runs.c.host == (host or socket.gethostname()),
            runs.c.status == RUNNING).values(ended=utcnow(), exit_status=int(exit_status), status=INTERRUPTED))
        return result.rowcount or 0

    def mark_resumed(self, build: str | int, suite: str, conn: Connection | None = None,
                     shard: str | None = None) -> int:
        """After a resume covered every planned test of ``suite``: the build's earlier
        runs of that suite that did not finish become ``resumed``; returns how many.
        ``shard`` (``runs.shard``, e.g. ``1/4``): only that shard's runs, which is all a
        sharded resume covers."""
        if conn is None:
            with self.write() as c:
                return self.mark_resumed(build, suite, conn=c, shard=shard)
        build_id = build if isinstance(build, int) else self.build_id(build, conn)
        scope = [runs.c.build_id == build_id, runs.c.suite == suite]
        if shard is not None:
            scope.append(runs.c.shard == shard)
        result = conn.execute(update(runs).where(
            *scope, runs.c.status.notin_(DONE_STATES),
            runs.c.id != conn.execute(select(func.max(runs.c.id)).where(*scope)).scalar_one()).values(status=RESUMED))
        return result.rowcount or 0

    # -- outcomes ------------------------------------------------------------------------
    def add_outcomes(self, run_id: int, outcomes: Iterable[Outcome], conn: Connection | None = None) -> int:
        """Store a batch of outcomes for ``run_id`` in one transaction; returns how many.
        Repro commands are stored once per run, as a template (``repro_template``)."""
        outcomes = list(outcomes)
        if not outcomes:
            return 0
        if conn is None:
            with self.write() as c:
                return self.add_outcomes(run_id, outcomes, conn=c)
        _, template = self._run(conn, run_id)
        test_rows = [test_row(o) for o in outcomes]
        result_rows = [result_fields(o) for o in outcomes]
        if not template:
            template = self._learn_repro_template(conn, run_id, test_rows, result_rows)
        if template:
            at = REPRO_AT
            result_rows = [r[:at] + (None,) + r[at + 1:] if fits_template(template, r[at], t[0], t[5]) else r
                           for t, r in zip(test_rows, result_rows)]
        said = [r[1:7] + r[8:10] + r[12:13] for r in result_rows]   # VALUE_COLUMNS order
        # Most said first, so unseen values get ids in that order: SQLite stores the integer 1
        # in no bytes and those below 128 in one, so the commonest value costs results least.
        index = {v: i for i, (v, _) in enumerate(Counter(said).most_common())}
        rows = [(r[0], index[v], duration_us(r[7]), r[10], r[11]) for r, v in zip(result_rows, said)]
        n = self.add_rows(run_id, test_rows, rows, self.add_values(run_id, list(index), conn=conn), conn=conn)
        if any(o.trace for o in outcomes):
            # A model run's operator set (Outcome.trace), in the outcome's transaction: a run
            # interrupted after the outcome was stored has its set stored too.
            save_traces(self, outcomes, conn)
        if any(o.perf for o in outcomes):
            # The perf suite's timings (Outcome.perf), in the outcome's transaction too.
            save_rows(conn, self._build_of_run(conn, run_id), run_id, outcomes)
        return n

    def add_values(self, run_id: int, values: list[tuple], conn: Connection, digests: list[int] | None = None
                   ) -> list[int]:
        """The result_values ids of ``values`` (what results say, VALUE_COLUMNS order: see
        db/values.py), inserting the unseen ones, noted as said in the run's build;
        ``digests``: their ``values.digest``, when the caller has them."""
        build_id = self._build_of_run(conn, run_id)
        ids = self._value_ids.ids(conn, values, digests)
        note_build_values(conn, self.dialect, build_id, ids)
        return ids

    def add_rows(self, run_id: int, test_rows: list[tuple], result_rows: list[tuple], value_ids: list[int],
                 conn: Connection) -> int:
        """Store results already flattened (ingest builds them in a parsing process and
        sends them over): per result its ``test_row`` and ``(attempt, value, duration in
        microseconds, max_abs_err, max_rel_err)``, pairwise, where ``value`` indexes
        ``value_ids`` (from ``add_values`` on this run).  A value's repro of None stands
        for the run's ``repro_template`` rendered for the test."""
        if not test_rows:
            return 0
        build_id = self._build_of_run(conn, run_id)
        pks = self._test_pk_map(conn, test_rows)
        # Rows go in in test order (stable: a test twice in a batch keeps its attempts'
        # order), so the (build, test) index grows at its end instead of splitting pages.
        if self.dialect == "sqlite":
            # The build and run are written into the statement: two values fewer to bind per row.
            rows = [(pks[t[0]], r[0], value_ids[r[1]], r[2], r[3], r[4]) for t, r in zip(test_rows, result_rows)]
            rows.sort(key=_FIRST)
            conn.exec_driver_sql(f"INSERT INTO results ({', '.join(STORED_RESULT_COLUMNS)}) "
                                 f"VALUES ({int(build_id)}, {int(run_id)}, ?, ?, ?, ?, ?, ?)", rows)
        else:
            rows = [(build_id, run_id, pks[t[0]], r[0], value_ids[r[1]], r[2], r[3], r[4])
                    for t, r in zip(test_rows, result_rows)]
            rows.sort(key=_TEST_PK)
            bulk_insert(conn, self.dialect, "results", STORED_RESULT_COLUMNS, rows)
        conn.exec_driver_sql("UPDATE runs SET n_results = n_results + {0} WHERE id = {1}".format(
            len(rows), int(run_id)))
        return len(rows)

    def _build_of_run(self, conn: Connection, run_id: int) -> int:
        # A run never changes build: asked once per run (ingest writes one batch after another).
        build_id = self._run_builds.get(run_id)
        if build_id is None:
            build_id = self._run_builds[run_id] = self._run(conn, run_id)[0]
        return build_id

    @staticmethod
    def _run(conn: Connection, run_id: int) -> tuple[int, str]:
        """The run's build id and repro template."""
        row = conn.execute(select(runs.c.build_id, runs.c.repro_template).where(runs.c.id == run_id)).one_or_none()
        if row is None:
            raise UserError(f"unknown run id {run_id}; start a run with Store.start_run first")
        return row[0], row[1]

    @staticmethod
    def _learn_repro_template(conn: Connection, run_id: int, test_rows: list[tuple], result_rows: list[tuple]) -> str:
        """For a run without a repro template: the template of the batch's first repro
        command (the runner's differ only by test id and op), stored on the run."""
        for t, r in zip(test_rows, result_rows):
            if r[REPRO_AT]:
                template = repro_template(r[REPRO_AT], t[0], t[5])
                if template:
                    conn.execute(update(runs).where(runs.c.id == run_id).values(repro_template=template))
                return template
        return ""

    def _test_pk_map(self, conn: Connection, test_rows: list[tuple]) -> dict[str, int]:
        """tests.id for every test of the batch (rows from ``test_row``), inserting the unseen ones."""
        known = self._test_pks
        # The batch's unseen tests, each with its first row (C-level loops: ingest passes 150k rows).
        wanted = dict(zip(map(_FIRST, reversed(test_rows)), reversed(test_rows)))
        seen = wanted.keys() & known.keys()
        for test_id in seen:
            del wanted[test_id]
        if not wanted:
            return known
        # Sorted by test id: the unique index on tests.test_id then grows at its end
        # instead of splitting pages all over (about half the cost of inserting tests).
        rows = sorted(wanted.values())
        if self.dialect == "postgresql":
            pg_upsert_tests(conn, rows, known)
            return known
        # Insert-or-ignore first, then one lookup: cheaper than looking up twice.
        # ON CONFLICT: the test may exist from an earlier build or another writer.
        top = conn.exec_driver_sql("SELECT coalesce(max(id), 0) FROM tests").scalar_one()
        dbapi = conn.connection.driver_connection
        changes = dbapi.total_changes
        bulk_insert(conn, self.dialect, "tests", TEST_COLUMNS, rows, ignore_conflict="test_id")
        new = took_next_ids(conn, rows, top, dbapi.total_changes - changes)
        if new is None:
            self._lookup_tests(conn, list(wanted))   # remembered: a build of known tests
            return known
        if seen:
            known.update(new)
            return known
        # Tests new to the store are not remembered: a fresh build's ingest would fill a
        # dict of every test for nothing.  A next build of them looks them up once.
        return new

    def _lookup_tests(self, conn: Connection, test_ids: list[str]) -> None:
        for i in range(0, len(test_ids), LOOKUP_CHUNK):
            chunk = test_ids[i:i + LOOKUP_CHUNK]
            for pk, tid in conn.execute(select(tests.c.id, tests.c.test_id).where(tests.c.test_id.in_(chunk))):
                self._test_pks[tid] = pk
