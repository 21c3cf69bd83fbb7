"""One live sweep per set of tests of a build: lock rows in the store, so they hold
across machines.

A sweep that writes a build (first run or ``--resume``) holds a ``build_locks`` row
named for its tests (``holder_name``: suite and shard) while it runs, and refreshes
its ``heartbeat`` every few seconds from a thread.  Shards of one build (several
machines, one PostgreSQL) run at the same time on purpose and never share a test,
so each holds its own row; a sweep whose tests overlap a live holder's (the same
shard, or the same suite split another way) is refused in one line naming the
holder, unless that holder is gone: on this host its process no longer exists
(``runstate.pid_alive``); on another host (we cannot look) its heartbeat is older
than ``STALE_SECONDS``.  A stale row is taken over.

Writes compare the token they were given, so two sweeps racing for a stale row
(or one whose row was taken over while it hung) cannot both believe they hold
it: on SQLite the write lock orders them, on PostgreSQL the losing DELETE or
INSERT matches no row.
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Iterator

from sqlalchemy import delete, exists, select, text, update

from torchconform.db.bulk import insert_ignore
from torchconform.db.columns import BUILD_COLUMNS, utcnow
from torchconform.db.models import build_locks, builds, runs
from torchconform.db.runstate import holder_alive
from torchconform.errors import UserError

# Seconds between heartbeats, and of silence after which another host's holder counts as gone.
HEARTBEAT_SECONDS = 5.0
STALE_SECONDS = 60.0


@dataclass
class BuildLock:
    build: str
    build_id: int
    holder: str                      # what holds it: ``holder_name(suite, shard, shards)``
    token: str
    created: bool = False            # this acquire created the build (dropped on release if it got no run)
    lost: threading.Event = field(default_factory=threading.Event)
    on_lost: Callable[[], None] | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None


def holder_name(suite: str, shard: int = 0, shards: int = 1) -> str:
    return f"sweep {suite} {shard}/{shards}"


_HOLDER = re.compile(r"sweep (\S+) (\d+)/(\d+)")


def disjoint(a: str, b: str) -> bool:
    """Whether two holders' sweeps can never run the same test (anything unknown overlaps)."""
    ma, mb = _HOLDER.fullmatch(a or ""), _HOLDER.fullmatch(b or "")
    if not ma or not mb:
        return False
    (suite_a, i, n), (suite_b, j, m) = ma.groups(), mb.groups()
    return suite_a != suite_b or (n == m and int(n) > 1 and i != j)


@contextlib.contextmanager
def _write(store) -> Iterator:
    # Not Store.write: a failed heartbeat must not clear the store's test-id cache
    # under the thread that is storing results.
    with store.engine.connect() as conn:
        conn.execution_options(tc_write=True)  # SQLite: BEGIN IMMEDIATE
        with conn.begin():
            yield conn


def _now(conn) -> datetime:
    """UTC now, naive.  PostgreSQL's clock, where every host reads the same one."""
    if conn.dialect.name == "postgresql":
        return conn.execute(text("SELECT timezone('UTC', now())")).scalar_one()
    return utcnow()


def _stale(row, now: datetime, stale_after: float) -> bool:
    if row["host"] == socket.gethostname() and row["pid"] == os.getpid():
        return True  # we hold nothing yet: a dead holder whose pid we were given again
    alive = holder_alive(row["host"], row["pid"])
    if alive is not None:
        return not alive
    return (now - row["heartbeat"]).total_seconds() > stale_after


def refusal(build: str, row, now: datetime) -> str:
    age = max(0, int((now - row["heartbeat"]).total_seconds()))
    since = row["acquired"].isoformat(sep=" ", timespec="seconds")
    here = row["host"] == socket.gethostname()
    wait = "" if here else f", or wait until it has been silent for {STALE_SECONDS:g} s"
    return (f"build {build!r} is being written by another sweep ({row['holder']}, pid {row['pid']} on "
            f"{row['host']}, since {since} UTC, last heartbeat {age} s ago); let it finish, or stop it "
            f"(kill {row['pid']} on {row['host']}){wait}, then run this again")


def acquire(store, build: str, holder: str, stale_after: float = STALE_SECONDS) -> BuildLock:
    """Take the lock on ``build`` (created, empty, when it does not exist yet); UserError
    naming the holder and the fix while a live sweep of overlapping tests holds it."""
    token = uuid.uuid4().hex
    with _write(store) as conn:
        now = _now(conn)
        build_id = conn.execute(select(builds.c.id).where(builds.c.name == build)).scalar_one_or_none()
        created = False
        if build_id is None:
            # Not ensure_build: whether *this* insert created it decides what release may drop.
            build_id = conn.execute(insert_ignore(store.dialect, builds, ["name"]).values(
                name=build, created=utcnow(), metadata={}, **{c: "" for c in BUILD_COLUMNS})
                .returning(builds.c.id)).scalar_one_or_none()
            created = build_id is not None
            if not created:  # another writer created it meanwhile
                build_id = store.build_id(build, conn)
        holder = holder[:300]
        values = dict(host=socket.gethostname(), pid=os.getpid(), token=token, acquired=now, heartbeat=now)
        for row in conn.execute(select(build_locks).where(build_locks.c.build_id == build_id)).mappings().all():
            if row["holder"] != holder and disjoint(row["holder"], holder):
                continue  # another shard or suite: never the same tests
            if not _stale(row, now, stale_after):
                raise UserError(refusal(build, row, now))
            gone = conn.execute(delete(build_locks).where(
                build_locks.c.build_id == build_id, build_locks.c.holder == row["holder"],
                build_locks.c.token == row["token"])).rowcount
            if gone != 1:  # another sweep took it over between our read and our write (PostgreSQL)
                raise UserError(refusal(build, row, now))
        # RETURNING, not rowcount: psycopg reports -1 for an INSERT ... ON CONFLICT.
        took = len(conn.execute(insert_ignore(store.dialect, build_locks, ["build_id", "holder"])
                                .values(build_id=build_id, holder=holder, **values)
                                .returning(build_locks.c.build_id)).all())
        if took != 1:  # another sweep of the same tests inserted first (PostgreSQL)
            row = conn.execute(select(build_locks).where(build_locks.c.build_id == build_id,
                                                         build_locks.c.holder == holder)).mappings().one()
            raise UserError(refusal(build, row, now))
    return BuildLock(build, build_id, holder, token=token, created=created)


def heartbeat(store, lock: BuildLock) -> bool:
    """Refresh the lock's heartbeat; False when it is no longer ours (taken over)."""
    with _write(store) as conn:
        return conn.execute(update(build_locks).where(
            build_locks.c.build_id == lock.build_id, build_locks.c.holder == lock.holder,
            build_locks.c.token == lock.token)
            .values(heartbeat=_now(conn))).rowcount == 1


def release(store, lock: BuildLock) -> None:
    """Give the lock up (only if still ours).  A build this lock created that got no run
    (the sweep failed before starting one) goes too: a failed sweep leaves nothing."""
    with _write(store) as conn:
        ours = conn.execute(delete(build_locks).where(
            build_locks.c.build_id == lock.build_id, build_locks.c.holder == lock.holder,
            build_locks.c.token == lock.token)).rowcount == 1
        if lock.created and ours:  # taken over: the build is the new holder's now
            conn.execute(delete(builds).where(builds.c.id == lock.build_id,
                                              ~exists().where(runs.c.build_id == builds.c.id)))


def _beat(store, lock: BuildLock, interval: float) -> None:
    while not lock._stop.wait(interval):
        try:
            ours = heartbeat(store, lock)
        except Exception:
            continue  # the database is unreachable for now: try again; others wait STALE_SECONDS
        if not ours:
            lock.lost.set()
            if lock.on_lost is not None:
                lock.on_lost()
            return


@contextlib.contextmanager
def held(store, build: str, holder: str, interval: float = HEARTBEAT_SECONDS,
         stale_after: float = STALE_SECONDS) -> Iterator[BuildLock]:
    """``acquire`` + a heartbeat thread while the block runs + ``release``.  Should another
    sweep take the lock over (this one stalled past ``stale_after``), ``lock.lost`` is set
    and ``lock.on_lost`` called: the holder must stop writing."""
    lock = acquire(store, build, holder, stale_after)
    lock._thread = threading.Thread(target=_beat, args=(store, lock, interval),
                                    name="torchconform-build-lock", daemon=True)
    lock._thread.start()
    try:
        yield lock
    finally:
        lock._stop.set()
        if lock._thread is not None:
            lock._thread.join(30)
        release(store, lock)
