"""What a ``torchconform run`` claims before it starts: its build's tests in the store, and
its own record files.

Two runs of one build at once (a CI retry racing the first attempt, two terminals): the
second is refused in one line naming the first (host, pid, since) and the fix.  Both
would run every test to the end, and a build holding two results per test for one
attempt has no single answer for ``summary``, the gate or the site.  The claim is the
build lock sweeps and ``--resume`` take (db/locks.py): a row per suite and shard, so
the shards of one build (``--shards N --shard I``, one machine each) still run side by
side, a dead holder is taken over, and it holds across machines sharing a PostgreSQL
store.  A run that a sweep starts (the sweep holds the lock for it) takes nothing.

Record files (``.torchconform/runs/<build>[.N].jsonl`` and ``.log``): the name is
claimed by creating the log exclusively (``O_EXCL``), so two runs starting in the same
instant never share a log or a JSON lines file, with or without a store.

With ``--resume`` the claim is the sweep's hold on the suite and shard of a build that
must already be in the store (``resuming``; a suite set's resume checks the same,
``resumable_build_id``).
"""
from __future__ import annotations

import contextlib
import os
import socket

from torchconform.errors import UserError


def claim_records(base: str) -> str:
    """A JSON lines path ``base.jsonl`` (or ``base.N.jsonl``) whose log (``.log``) this run
    created and nobody else can have; the JSON lines path is returned."""
    n = 1
    while True:
        stem = base if n == 1 else f"{base}.{n}"
        jsonl = stem + ".jsonl"
        if not os.path.exists(jsonl):
            try:
                os.close(os.open(stem + ".log", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                return jsonl
            except FileExistsError:
                pass
        n += 1


def _held_for_us(store, build: str) -> bool:
    """Our parent (a sweep on this host) holds a lock on the build for the run it started
    (its shard goes to pytest as plugin options, so our own holder name may differ)."""
    # SQLAlchemy and the store: imported when a run starts, for the CLI's start-up time.
    from sqlalchemy import select

    from torchconform.db.models import build_locks, builds

    with store.read() as conn:
        row = conn.execute(select(build_locks.c.pid).join(builds, builds.c.id == build_locks.c.build_id).where(
            builds.c.name == build, build_locks.c.pid == os.getppid(),
            build_locks.c.host == socket.gethostname())).first()
    return row is not None


@contextlib.contextmanager
def holding_build(db: str | None, build: str, suite: str, shard: int, shards: int):
    """Hold ``build``'s lock for this suite and shard while the block runs (nothing without a
    store); UserError in one line while another live run or sweep holds it."""
    if not db:
        yield None
        return
    # The store brings SQLAlchemy: imported when a run starts, for the CLI's start-up time.
    from torchconform.db import locks
    from torchconform.db.opening import open_store

    holder = locks.holder_name(suite, shard, shards)
    store = open_store(db)
    try:
        if _held_for_us(store, build):
            yield None
            return
        claim = locks.held(store, build, holder)
        try:
            lock = claim.__enter__()
        except UserError as exc:
            said = str(exc).replace("by another sweep", "by another run or sweep", 1)
            raise UserError(f"{said}; or give this run another --build name") from None
        try:
            yield lock
        finally:
            # A release that fails (the disk filled up meanwhile) leaves a row whose holder is
            # gone once we are: the next writer takes it over.  The run's own verdict stands.
            with contextlib.suppress(UserError):
                claim.__exit__(None, None, None)
    finally:
        store.close()


def resumable_build_id(store, build: str) -> int:
    try:
        return store.build_id(build)
    except UserError:
        raise UserError(f"build {build!r} is not in the store, so there is nothing to resume; "
                        "drop --resume to start it (or check --build and --db)") from None


@contextlib.contextmanager
def resuming(args, build: str, db: str | None):
    """With --resume: the sweep's hold on this suite and shard of the build (lock, then the
    interrupted runs marked ``resumed`` once a run has covered the rest).  Without: the same
    lock, so a second run of the build's tests at once is refused (``holding_build``)."""
    if not args.resume:
        with holding_build(db, build, args.suite, args.shard, args.shards):
            yield
        return
    # The store brings SQLAlchemy: imported when a run resumes, for the CLI's start-up time.
    from torchconform.db.opening import open_store
    from torchconform.sweep.pytest_driver import holding_shard

    store = open_store(db, create=False)
    try:
        resumable_build_id(store, build)
        with holding_shard(store, build, args.suite, args.shard, args.shards):
            yield
    finally:
        store.close()
