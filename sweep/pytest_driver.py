"""The driver of ``torchconform sweep --suite ops|upstream``: the runner's pytest path.

``torchconform run`` (pytest + plugin + StoreSink) runs the tests and stores them,
one run per pytest session; ``sweep/pytest_shard.py`` keeps this shard (and,
with ``--resume``, what the build lacks).  This process holds the build's lock
meanwhile (``db/locks.py``), refuses to run stored tests again without
``--resume``, and once a run has covered the rest marks the earlier unfinished
runs of the shard ``resumed``, so the build is complete again.

The child never outlives this process: it gets SIGTERM the moment this one
dies, however it died (kill -9 included), and SIGTERM or Ctrl-C sent here is
passed on, so pytest ends its run in order either way (finished tests stored,
the run ``interrupted``).
"""
from __future__ import annotations

import contextlib
import subprocess

from sqlalchemy import func, select

from torchconform.config import db_url
from torchconform.db import locks
from torchconform.db.models import FINISHED, builds, runs
from torchconform.errors import UserError
from torchconform.procs import die_with_parent, forward_signals
from torchconform.db.runstate import shard_label
from torchconform.db.opening import open_store


def _overlap(a: str, b: str) -> bool:
    """Whether runs with shard labels ``a`` and ``b`` (``I/N`` or "" for all) can share a test."""
    if not a or not b:
        return True
    return a == b or a.split("/")[1] != b.split("/")[1]


def stored_results(store, build: str, suite: str, shard: int, shards: int) -> int:
    """Results of ``suite`` the build holds from runs that may share tests with this shard."""
    mine = shard_label(shard, shards)
    with store.read() as conn:
        rows = conn.execute(select(runs.c.shard, runs.c.n_results).join(builds, builds.c.id == runs.c.build_id)
                            .where(builds.c.name == build, runs.c.suite == suite)).all()
    return sum(n for label, n in rows if _overlap(label, mine))


def _last_run(store, build_id: int) -> int:
    with store.read() as conn:
        return conn.execute(select(func.max(runs.c.id)).where(runs.c.build_id == build_id)).scalar_one() or 0


def _finished_since(store, build_id: int, suite: str, label: str, after: int) -> bool:
    """Whether the newest run of this shard, started after run ``after``, ran all it planned."""
    with store.read() as conn:
        status = conn.execute(select(runs.c.status).where(
            runs.c.build_id == build_id, runs.c.suite == suite, runs.c.shard == label, runs.c.id > after)
            .order_by(runs.c.id.desc()).limit(1)).scalar_one_or_none()
    return status == FINISHED


@contextlib.contextmanager
def holding_shard(store, build: str, suite: str, shard: int, shards: int):
    """Hold ``build``'s lock for this suite and shard while the block runs (two runs of the
    same tests never write at once, here or on another machine); when a run started in the
    block finished, the shard's earlier unfinished runs become ``resumed``."""
    label = shard_label(shard, shards)
    with locks.held(store, build, locks.holder_name(suite, shard, shards)) as lock:
        before = _last_run(store, lock.build_id)
        yield lock
        if _finished_since(store, lock.build_id, suite, label, before):
            store.mark_resumed(build, suite, shard=label or None)


def run_pytest_sweep(cmd: list[str], build: str, suite: str, shard: int, shards: int, resume: bool,
                     db: str | None) -> int:
    """Run ``cmd`` (a ``torchconform run`` command line) as this shard's sweep; its exit status."""
    store = open_store(db_url(db))
    try:
        with holding_shard(store, build, suite, shard, shards) as lock:
            if not resume:
                n = stored_results(store, build, suite, shard, shards)
                if n:
                    label = shard_label(shard, shards)
                    where = f" for shard {label}" if label else ""
                    raise UserError(f"build {build!r} already has {n} results of the {suite} suite{where}; pass "
                                    "--resume to finish the build or choose another --build name")
            proc = subprocess.Popen(cmd, preexec_fn=die_with_parent)
            # Taken over (this process stalled past the stale limit): the new holder writes now.
            lock.on_lost = proc.terminate
            with forward_signals(proc):
                return proc.wait()
    finally:
        store.close()
