"""The Ray engine at scale-out: tasks store their own outcomes, a worker that crashes,
hangs or runs out of memory costs one model, and a node killed mid-sweep loses nothing.

The cluster test starts a real multi-node Ray cluster on loopback (three raylets,
Ray's own ``cluster_utils``) and kills one node's raylet while a 30-model sweep runs.
"""
import collections
import os
import threading
import time

import pytest

ray = pytest.importorskip("ray", reason="extra ray: pip install 'torchconform[ray]'")
pytestmark = pytest.mark.usefixtures("one_ray_at_a_time")

from sqlalchemy import func, select  # noqa: E402

from torchconform.core.outcome import CRASH, PASS, TIMEOUT  # noqa: E402
from torchconform.db.models import results, tests  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402
from torchconform.sweep.driver import SweepOptions, run_sweep  # noqa: E402

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "zoo", "faulty.py")


def _ids(*names):
    return [f"py/{FIXTURE}::{n}" for n in names]


def _rows_per_test(db):
    store = open_store(str(db))
    try:
        with store.read() as conn:
            return dict(conn.execute(select(tests.c.test_id, func.count(results.c.id))
                                     .join(results, results.c.test_pk == tests.c.id)
                                     .group_by(tests.c.test_id)).all())
    finally:
        store.close()


def test_faulty_models_on_ray_cost_one_model_each(tmp_path, monkeypatch):
    monkeypatch.setenv("TC_FAULT_ON_CPU", "1")  # device cpu: the faults fire in the tasks' CPU runs
    selection = tmp_path / "models.txt"
    selection.write_text("\n".join(_ids("segfault", "hang", "oom", "healthy")) + "\n")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        report = run_sweep(SweepOptions(
            build="faults", selection=str(selection), device="cpu", db=str(tmp_path / "r.db"), engine="ray",
            workers=2, variants=("eval", "train"), timeout=30, memory_limit_mb=512,
            progress_stream=open(os.devnull, "w")))
    finally:
        ray.shutdown()
    by = {(o.op.rsplit("::", 1)[-1], o.variant): o for o in report.outcomes}
    assert len(report.outcomes) == 8
    assert by[("segfault", "eval")].outcome == CRASH and "crashed while running" in by[("segfault", "eval")].message
    # the task itself stored this before ending its worker
    oom = by[("oom", "eval")]
    assert oom.outcome == CRASH and "ran out of memory (limit 512 MiB)" in oom.message
    assert by[("hang", "eval")].outcome == TIMEOUT and "exceeded 30s" in by[("hang", "eval")].message
    assert by[("hang", "train")].outcome == TIMEOUT and "not run" in by[("hang", "train")].message
    assert by[("healthy", "eval")].outcome == PASS and by[("healthy", "train")].outcome == PASS
    # each run stored exactly once, whoever wrote it (task or driver)
    rows = _rows_per_test(tmp_path / "r.db")
    assert len(rows) == 8 and set(rows.values()) == {1}


def test_the_model_timeout_counts_from_when_the_model_began(tmp_path, monkeypatch):
    """Six models of about 5 s each in flight at once on one CPU: the last starts some
    25 s after it was submitted.  Queued time is not the model's, so none of them
    reaches the 20 s timeout (counted from submission, the last ones did).  The timeout
    leaves a model 15 s beyond its own sleeps, for its start-up on a loaded machine."""
    monkeypatch.setenv("TC_SLOW_SECONDS", "1.0")  # per forward: about 5 s per eval run
    selection = tmp_path / "models.txt"
    selection.write_text("\n".join(_ids(*(f"slow_{i}" for i in range(6)))) + "\n")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    start = time.monotonic()
    try:
        report = run_sweep(SweepOptions(
            build="queued", selection=str(selection), device="cpu", db=str(tmp_path / "r.db"), engine="ray",
            workers=6, variants=("eval",), timeout=20, progress_stream=open(os.devnull, "w")))
    finally:
        ray.shutdown()
    assert collections.Counter(o.outcome for o in report.outcomes) == {PASS: 6}
    assert time.monotonic() - start > 25  # they really queued: one CPU, one model at a time


def test_a_node_killed_mid_sweep_loses_no_model_and_its_models_run_elsewhere(tmp_path, monkeypatch):
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("TC_SLOW_SECONDS", "0.2")  # per forward (an eval run calls it 5 times)
    ids = _ids(*(f"slow_{i}" for i in range(30)))
    selection = tmp_path / "models.txt"
    selection.write_text("\n".join(ids) + "\n")
    db = tmp_path / "r.db"
    running = tmp_path / "running"
    running.mkdir()
    # set before the raylets start: they inherit them.  The sweep cannot end before the kill,
    # whatever the load: all models but the first three to start wait while the hold file
    # exists, and the killer removes it once it has killed a node (the three store their rows).
    hold = tmp_path / "hold"
    hold.touch()
    monkeypatch.setenv("TC_HOLD_FILE", str(hold))
    monkeypatch.setenv("TC_HOLD_AFTER", "3")
    monkeypatch.setenv("TC_RUNNING_DIR", str(running))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    killed = threading.Event()
    doomed = []  # the node killed: whichever non-head node is busy first once some models are stored
    raylets = {node.all_processes["raylet"][0].process.pid: node for node in workers}

    def busy_node():
        """A non-head node running a model right now (its raylet is the runner's parent), or None."""
        for name in os.listdir(running):
            try:
                with open(f"/proc/{name}/stat") as fh:
                    parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue  # that model just ended
            if parent in raylets:
                return raylets[parent]
        return None

    def stored_rows() -> int:
        try:
            return sum(_rows_per_test(db).values()) if db.exists() else 0
        except Exception:  # the store busy with the tasks' writes: ask again (an exception would end this thread)
            return 0

    def kill_when_some_are_stored():
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if stored_rows() >= 3:
                node = busy_node()
                if node is not None:
                    doomed.append(node)
                    cluster.remove_node(node, allow_graceful=False)  # SIGKILL of that node's raylet
                    killed.set()
                    hold.unlink(missing_ok=True)
                    return
            time.sleep(0.05)
        hold.unlink(missing_ok=True)   # no kill: let the sweep end (the test then fails on killed)

    killer = threading.Thread(target=kill_when_some_are_stored, daemon=True)
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        killer.start()
        report = run_sweep(SweepOptions(
            build="cluster", selection=str(selection), device="cpu", db=str(db), engine="ray",
            ray_address=cluster.address, workers=3, variants=("eval",), timeout=120,
            progress_stream=open(os.devnull, "w")))
    finally:
        hold.unlink(missing_ok=True)
        killer.join(5)
        ray.shutdown()
        cluster.shutdown()
    # a task's worker is "ray:<node>:<pid>"; a model the driver stored (lost, crashed) is "ray"
    ran_on = collections.Counter(w.split(":")[1] if ":" in w else "driver" for w in report.ran_on.values())
    assert killed.is_set(), f"the sweep ended before a node could be killed (models per node: {dict(ran_on)})"
    rows = _rows_per_test(db)
    assert sorted(rows) == sorted(f"models::{m}::eval" for m in ids)
    assert set(rows.values()) == {1}, {t: n for t, n in rows.items() if n != 1}
    outcomes = collections.Counter(o.outcome for o in report.outcomes)
    assert outcomes == {PASS: 30}, outcomes  # the lost node's models ran again elsewhere, not as crashes
    assert report.rescheduled >= 1, (doomed[0].node_id[:8], ran_on)
