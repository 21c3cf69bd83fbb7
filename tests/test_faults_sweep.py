"""A sweep's faults, caused for real: kill -9 and SIGTERM of the `torchconform sweep`
driver, a --resume started while another sweep still writes the build, a finished
build swept again without --resume.

What must hold: no process of a sweep outlives its driver or writes after it is gone;
one live sweep per build (across machines: the lock is in the store); a build resumed
to the end is complete; stored tests never run twice.

The pytest path (--suite ops|upstream) runs on a fake upstream checkout of slow tests,
the model path on the slow fixture models of tests/fixtures/zoo.
"""
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select, text

from pg import db_url, pg_server, store  # noqa: F401  (fixtures)
from support import child_env
from torchconform.core.outcome import INTERRUPTED_MESSAGE, Outcome
from torchconform.db import locks, read_builds
from torchconform.db.models import build_locks
from torchconform.db.columns import utcnow
from torchconform.db.opening import open_store
from torchconform.errors import UserError
from torchconform.sweep.pytest_driver import stored_results

TC = [sys.executable, "-m", "torchconform"]
ZOO = os.path.join(os.path.dirname(__file__), "fixtures", "zoo", "faulty.py")
PLACEHOLDER = INTERRUPTED_MESSAGE


# -- helpers -----------------------------------------------------------------------------
def counts(url, build):
    """(results, distinct tests, runs) of ``build``."""
    if not url.startswith("postgresql") and not os.path.exists(url):
        return (0, 0, 0)
    with open_store(url) as s, s.read() as conn:
        return conn.execute(text(
            "SELECT (SELECT count(*) FROM results r JOIN builds b ON b.id = r.build_id WHERE b.name = :b), "
            "(SELECT count(DISTINCT r.test_pk) FROM results r JOIN builds b ON b.id = r.build_id WHERE b.name = :b), "
            "(SELECT count(*) FROM runs r JOIN builds b ON b.id = r.build_id WHERE b.name = :b)"), {"b": build}).one()


def real_results_per_test(url, build):
    """{test_id: results that are not an interrupted run's placeholder}."""
    with open_store(url) as s, s.read() as conn:
        rows = conn.execute(text(
            "SELECT t.test_id, sum(CASE WHEN v.message = :p THEN 0 ELSE 1 END) FROM results r "
            "JOIN result_values v ON v.id = r.value_id JOIN tests t ON t.id = r.test_pk JOIN builds b ON b.id = r.build_id WHERE b.name = :b "
            "GROUP BY t.test_id"), {"b": build, "p": PLACEHOLDER}).all()
    return {tid: int(n) for tid, n in rows}


def info(url, build):
    with open_store(url) as s:
        return read_builds.build_info(s, build)


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def wait_group_gone(pgid, limit):
    deadline = time.monotonic() + limit
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not group_alive(pgid)


def wait_rows(url, build, n, proc, limit=300):
    deadline = time.monotonic() + limit
    while counts(url, build)[0] < n:
        assert proc.poll() is None, f"the sweep ended before storing {n} results"
        assert time.monotonic() < deadline, f"fewer than {n} results after {limit} s"
        time.sleep(0.2)


def start(cmd, env, cwd):
    # Its own session: the test can tell whether anything of the sweep is left (killpg 0).
    return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def stop_group(proc):
    if group_alive(proc.pid):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def one_line_error(r, *texts):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("torchconform: error:"), r.stderr
    for t in texts:
        assert t in lines[0], lines[0]


def upstream_sweep(tmp_path, n_tests, build="nightly", db=None):
    """A fake upstream checkout of ``n_tests`` slow tests, and the sweep command over it."""
    src = tmp_path / "pytorch"
    (src / "test").mkdir(parents=True, exist_ok=True)
    (src / "test" / "test_slow.py").write_text(
        "import os, time\nimport pytest\n\n"
        f"@pytest.mark.parametrize('i', range({n_tests}))\n"
        "def test_slow(i):\n    time.sleep(float(os.environ.get('TC_SLOW_SECONDS', '0.5')))\n")
    db = db or str(tmp_path / "r.db")
    cmd = [*TC, "sweep", "--suite", "upstream", "--build", build, "--device", "cpu", "--db", db, "--workers", "2"]
    env = child_env(TORCHCONFORM_PYTORCH_SRC=str(src), TORCHCONFORM_UPSTREAM_FILES="test_slow")
    return cmd, env, db


def model_sweep(tmp_path, n_models, db, variants="eval", build="nightly"):
    selection = tmp_path / "models.txt"
    ids = [f"py/{ZOO}::slow_{i}" for i in range(n_models)]
    selection.write_text("\n".join(ids) + "\n")
    cmd = [*TC, "sweep", "--selection", str(selection), "--build", build, "--device", "cpu", "--db", db,
           "--variants", variants, "--workers", "2"]
    return cmd, [f"models::{i}::{v}" for i in ids for v in variants.split(",")]


def env_with(env, **extra):
    return {**env, **extra}


def held(tmp_path, free: int) -> dict:
    """The fixture models' hold (tests/fixtures/zoo/faulty.py): the first ``free`` models to
    start run, the others wait (at most 100 s) while the hold file exists, so the sweep is
    surely mid-way, with models in flight, whatever the load."""
    hold = tmp_path / "hold"
    hold.touch()
    return child_env(TC_SLOW_SECONDS="0.2", TC_HOLD_FILE=str(hold), TC_HOLD_AFTER=str(free))


# -- 1. kill -9 / SIGTERM of the driver ------------------------------------------------------
def test_kill_9_of_a_pytest_sweep_leaves_no_process_and_resume_completes_the_build(tmp_path):
    n = 120
    cmd, env, db = upstream_sweep(tmp_path, n)
    proc = start(cmd, env_with(env, TC_SLOW_SECONDS="0.5"), tmp_path)
    try:
        wait_rows(db, "nightly", 6, proc)
        os.kill(proc.pid, signal.SIGKILL)  # the driver only: `run`, pytest and its workers must follow
        proc.wait(30)
        # Before: `run` and pytest went on for the whole selection, storing all the while.
        assert wait_group_gone(proc.pid, 15), "a process of the sweep outlived its killed driver"
    finally:
        stop_group(proc)
    after_kill = counts(db, "nightly")
    time.sleep(2)
    assert counts(db, "nightly") == after_kill, "results were stored after the sweep was gone"
    assert 6 <= after_kill[1] < n
    runs = info(db, "nightly")["runs"]
    assert [r["status"] for r in runs] == ["interrupted"]  # pytest ended its run in order, and says so
    real_before = sum(real_results_per_test(db, "nightly").values())

    # 4. the same sweep without --resume: refused in one line, nothing run or stored
    again = subprocess.run(cmd, env=env_with(env, TC_SLOW_SECONDS="0"), cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    one_line_error(again, "already has", "results of the upstream suite", "--resume")
    assert counts(db, "nightly") == after_kill

    # 3. resumed to the end: every test has one real result, and the build is complete
    resumed = subprocess.run(cmd + ["--resume"], env=env_with(env, TC_SLOW_SECONDS="0"), cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    per_test = real_results_per_test(db, "nightly")
    assert len(per_test) == n and set(per_test.values()) == {1}, "a test ran twice, or never"
    final = info(db, "nightly")
    assert [r["status"] for r in final["runs"]] == ["resumed", "finished"]
    assert final["complete"] is True
    # the resume planned what had no real result: the rest, and the tests the kill cut short
    assert final["runs"][1]["planned"] == n - real_before
    with open_store(db) as s, s.read() as conn:
        assert conn.execute(build_locks.select()).first() is None  # the lock went with the sweep


def test_sigterm_ends_a_pytest_sweep_in_order(tmp_path):
    cmd, env, db = upstream_sweep(tmp_path, 120)
    proc = start(cmd, env_with(env, TC_SLOW_SECONDS="0.5"), tmp_path)
    try:
        wait_rows(db, "nightly", 6, proc)
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 128 + signal.SIGTERM
        assert time.monotonic() - t0 < 30
        assert wait_group_gone(proc.pid, 10), "a process of the sweep outlived it"
    finally:
        stop_group(proc)
    (run,) = info(db, "nightly")["runs"]
    assert run["status"] == "interrupted" and run["exit_status"] not in (0, 1, 5)
    assert run["results"] == counts(db, "nightly")[0] >= 6


def resume_to_the_end(cmd, db, wanted) -> dict:
    """Run the sweep again with --resume: every wanted test stored exactly once, the
    interrupted run resumed and the build complete; returns the build's info."""
    resumed = subprocess.run(cmd + ["--resume"], env=child_env(TC_SLOW_SECONDS="0"), capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    per_test = real_results_per_test(db, "nightly")
    assert sorted(per_test) == sorted(wanted) and set(per_test.values()) == {1}
    final = info(db, "nightly")
    assert [r["status"] for r in final["runs"]] == ["resumed", "finished"] and final["complete"] is True
    return final


def test_sigterm_ends_a_model_sweep_in_order(tmp_path):
    db = str(tmp_path / "r.db")
    cmd, wanted = model_sweep(tmp_path, 12, db, variants="eval,train")
    env = held(tmp_path, 2)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        wait_rows(db, "nightly", 2, proc)
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        # Before: the driver died on the spot, its run left `running` for ever.
        assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
        assert time.monotonic() - t0 < 30
        assert "interrupted (SIGTERM)" in err and "--resume" in err
        assert wait_group_gone(proc.pid, 10), "a sweep worker outlived the sweep"
    finally:
        stop_group(proc)
    (run,) = info(db, "nightly")["runs"]
    assert run["status"] == "interrupted" and run["exit_status"] == 128 + signal.SIGTERM
    stored = real_results_per_test(db, "nightly")
    models = {t.rsplit("::", 1)[0] for t in stored}
    assert stored and len(stored) == 2 * len(models) < len(wanted)  # whole models only, each run once

    final = resume_to_the_end(cmd, db, wanted)
    assert final["runs"][1]["planned"] == len(wanted) - len(stored)


# -- 3. resumed to the end = complete ------------------------------------------------------
def test_a_model_build_resumed_to_the_end_after_kill_9_is_complete(tmp_path):
    db = str(tmp_path / "r.db")
    cmd, wanted = model_sweep(tmp_path, 10, db)
    proc = start(cmd, child_env(TC_SLOW_SECONDS="0.5"), tmp_path)
    try:
        wait_rows(db, "nightly", 2, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert wait_group_gone(proc.pid, 15)
    finally:
        stop_group(proc)
    assert [r["status"] for r in info(db, "nightly")["runs"]] == ["lost"]
    resumed = subprocess.run(cmd + ["--resume"], env=child_env(TC_SLOW_SECONDS="0"), capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert sorted(real_results_per_test(db, "nightly")) == sorted(wanted)
    final = info(db, "nightly")
    # Before: the killed run stayed `lost`, so the build was incomplete for ever (never a baseline).
    assert [r["status"] for r in final["runs"]] == ["resumed", "finished"] and final["complete"] is True
    with open_store(db) as s:
        assert any(b["name"] == "nightly" and b["complete"] for b in read_builds.list_builds(s))


# -- 2. one live sweep per build ----------------------------------------------------------
def test_resume_is_refused_while_another_sweep_writes_the_build_and_takes_a_dead_ones_over(tmp_path, db_url):
    cmd, wanted = model_sweep(tmp_path, 12, db_url)
    # held mid-way until killed, however long the refused second one takes to start on a loaded
    # host (at 1 s a model it could finish first)
    first = start(cmd, held(tmp_path, 2), tmp_path)
    try:
        wait_rows(db_url, "nightly", 2, first)
        before = counts(db_url, "nightly")
        # Before: this ran the models still to do next to the first sweep (tests ran twice).
        second = subprocess.run(cmd + ["--resume"], env=child_env(TC_SLOW_SECONDS="0"), capture_output=True,
                                text=True, timeout=300)
        one_line_error(second, "is being written by another sweep", f"pid {first.pid} on {socket.gethostname()}",
                       "since", "UTC", f"kill {first.pid}")
        assert counts(db_url, "nightly")[2] == before[2]  # the refused sweep started no run
        assert first.poll() is None
        os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
        assert wait_group_gone(first.pid, 15)
    finally:
        stop_group(first)
    # The holder is dead (this host: its pid is gone): the lock is taken over at once.
    resume_to_the_end(cmd, db_url, wanted)


@pytest.fixture
def live_pid():
    """A real process on this host that is not us (a live lock holder)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def _put_lock(store, build, holder, host, pid, age_seconds=0.0, keep_others=False):
    build_id = store.ensure_build(build, append=True)
    stamp = utcnow() - timedelta(seconds=age_seconds)
    with store.write() as conn:
        mine = build_locks.c.build_id == build_id
        conn.execute(build_locks.delete().where(mine, build_locks.c.holder == holder) if keep_others
                     else build_locks.delete().where(mine))
        conn.execute(build_locks.insert().values(build_id=build_id, holder=holder, host=host, pid=pid,
                                                 token=uuid.uuid4().hex, acquired=stamp, heartbeat=stamp))


def _lock_row(store, build):
    with store.read() as conn:
        return conn.execute(build_locks.select().where(
            build_locks.c.build_id == store.build_id(build, conn))).mappings().first()


def test_build_lock_refuses_live_holders_and_takes_stale_ones_over(store, live_pid):
    holder = locks.holder_name("models")
    # this host, holder alive: refused, naming it
    _put_lock(store, "b", holder, socket.gethostname(), live_pid, age_seconds=3600)
    with pytest.raises(UserError, match=rf"pid {live_pid} on {socket.gethostname()}, since .* UTC"):
        locks.acquire(store, "b", holder)
    # this host, holder dead: taken over
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _put_lock(store, "b", holder, socket.gethostname(), int(dead.stdout))
    lock = locks.acquire(store, "b", holder)
    assert _lock_row(store, "b")["token"] == lock.token and _lock_row(store, "b")["pid"] == os.getpid()
    locks.release(store, lock)
    assert _lock_row(store, "b") is None
    # another host: its heartbeat decides
    _put_lock(store, "b", holder, "elsewhere", 1, age_seconds=5)
    with pytest.raises(UserError, match="pid 1 on elsewhere.*silent for 60 s"):
        locks.acquire(store, "b", holder)
    _put_lock(store, "b", holder, "elsewhere", 1, age_seconds=locks.STALE_SECONDS + 5)
    lock = locks.acquire(store, "b", holder)
    assert _lock_row(store, "b")["host"] == socket.gethostname()
    locks.release(store, lock)


def test_build_lock_heartbeat_and_loss(store):
    lost = []
    store.ensure_build("b")
    with locks.held(store, "b", locks.holder_name("models"), interval=0.1) as lock:
        first = _lock_row(store, "b")["heartbeat"]
        deadline = time.monotonic() + 10
        while _lock_row(store, "b")["heartbeat"] == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _lock_row(store, "b")["heartbeat"] > first  # refreshed from the thread
        lock.on_lost = lambda: lost.append(True)
        _put_lock(store, "b", "sweep models 0/1", "elsewhere", 1)  # another sweep took it over
        assert lock.lost.wait(10) and lost == [True]
    assert _lock_row(store, "b")["host"] == "elsewhere"  # release left the new holder's lock alone


def test_shards_of_one_build_run_side_by_side(store, live_pid):
    _put_lock(store, "b", locks.holder_name("ops", 0, 2), socket.gethostname(), live_pid)
    beside = locks.acquire(store, "b", locks.holder_name("ops", 1, 2))  # disjoint tests: no conflict
    other = locks.acquire(store, "b", locks.holder_name("models"))     # another suite
    with store.read() as conn:
        holders = {r[0] for r in conn.execute(select(build_locks.c.holder))}
    assert holders == {"sweep ops 0/2", "sweep ops 1/2", "sweep models 0/1"}  # each guards its own tests
    for overlapping in (locks.holder_name("ops", 0, 2), locks.holder_name("ops"), locks.holder_name("ops", 1, 3)):
        with pytest.raises(UserError, match="is being written by another sweep"):
            locks.acquire(store, "b", overlapping)
    locks.release(store, beside)
    locks.release(store, other)
    # Two resumes of the same shard at once: the second is refused while the first lives.
    _put_lock(store, "b", locks.holder_name("ops", 1, 2), socket.gethostname(), live_pid, keep_others=True)
    with pytest.raises(UserError, match="sweep ops 1/2"):
        locks.acquire(store, "b", locks.holder_name("ops", 1, 2))


def test_a_lock_on_a_new_build_that_gets_no_run_leaves_nothing(store):
    with locks.held(store, "fresh", locks.holder_name("ops")):
        assert _lock_row(store, "fresh")["pid"] == os.getpid()  # held while the block runs
    with store.read() as conn:
        assert conn.execute(text("SELECT count(*) FROM builds")).scalar_one() == 0
    with locks.held(store, "fresh", locks.holder_name("ops")):
        store.start_run("fresh", suite="ops")
    assert store.build_id("fresh")  # a build with a run stays
    # taken over meanwhile: the new holder's build and lock stay too
    with locks.held(store, "new", locks.holder_name("ops")):
        _put_lock(store, "new", locks.holder_name("ops"), "elsewhere", 1)
    assert _lock_row(store, "new")["host"] == "elsewhere"


# -- 4. a finished build swept again without --resume ----------------------------------------
def _stored_ops_run(store, build, shard=""):
    store.ensure_build(build, append=True)
    run = store.start_run(build, suite="ops", shard=shard)
    store.add_outcomes(run, [Outcome(test_id=f"suites/ops/test_ops.py::t{shard}{i}", outcome="pass", suite="ops")
                             for i in range(3)])
    store.finish_run(run, 0)


def test_ops_sweep_of_a_build_with_results_is_refused_without_resume(tmp_path):
    db = str(tmp_path / "r.db")
    with open_store(db) as s:
        _stored_ops_run(s, "done")
    before = counts(db, "done")
    # Before: pytest ran the whole ops selection again and appended every result.
    r = subprocess.run([*TC, "sweep", "--suite", "ops", "--build", "done", "--device", "cpu", "--db", db],
                       env=child_env(), capture_output=True, text=True, timeout=120, cwd=tmp_path)
    one_line_error(r, "build 'done' already has 3 results of the ops suite", "--resume")
    assert counts(db, "done") == before
    assert info(db, "done")["complete"] is True


def test_stored_results_count_only_shards_that_can_share_tests(store):
    _stored_ops_run(store, "b", shard="0/2")
    assert stored_results(store, "b", "ops", 1, 2) == 0  # the other shard of the same split
    assert stored_results(store, "b", "ops", 0, 2) == 3
    assert stored_results(store, "b", "ops", 0, 1) == 3  # unsharded: everything
    assert stored_results(store, "b", "ops", 1, 3) == 3  # another split overlaps
    assert stored_results(store, "b", "upstream", 0, 1) == 0
