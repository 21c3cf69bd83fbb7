"""--suite ops|upstream: the pytest plugin keeps exactly this shard of the collected tests."""
import subprocess
import sys

from tests.support import child_env


def _collect(tmp_path, *args):
    r = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_many.py"), "--collect-only", "-q",
                        "-p", "torchconform.sweep.pytest_shard", "-p", "no:cacheprovider", *args],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    return {line.strip() for line in r.stdout.splitlines() if "::" in line}


def test_shards_of_pytest_items_are_disjoint_and_complete(tmp_path):
    (tmp_path / "test_many.py").write_text(
        "import pytest\n@pytest.mark.parametrize('i', range(10))\ndef test_x(i):\n    pass\n")
    everything = _collect(tmp_path)
    assert len(everything) == 10
    parts = [_collect(tmp_path, "--tc-sweep-shards", "3", "--tc-sweep-shard", str(i)) for i in range(3)]
    assert set().union(*parts) == everything
    assert sum(len(p) for p in parts) == 10 and sorted(len(p) for p in parts) == [3, 3, 4]
    assert parts[1] == _collect(tmp_path, "--tc-sweep-shards", "3", "--tc-sweep-shard", "1")  # deterministic


GROWING = '''
import os, pytest
from torchconform.core.outcome import Outcome
from torchconform.db.opening import open_store

@pytest.mark.parametrize("i", range(12))
def test_x(i):
    if i == 3:
        # while the run goes on, the store learns results for tests not run yet (another
        # shard, a sweep worker elsewhere); then this worker dies and xdist replaces it
        with open_store(os.environ["FX_DB"]) as store:
            run = store.start_run("grow", suite="grow")
            store.add_outcomes(run, [Outcome(test_id=f"test_many.py::test_x[{j}]", outcome="pass", suite="grow")
                                     for j in range(6, 12)])
            store.finish_run(run, 0)
        os._exit(1)
'''


def test_replacement_worker_deselects_what_the_controller_saw(tmp_path):
    """--tc-sweep-resume under xdist: every worker, a replacement started after the store
    grew too, deselects the same items (read once by the controller), else xdist's index
    scheduling ends the run with an INTERNALERROR."""
    from torchconform.core.outcome import Outcome
    from torchconform.db.opening import open_store

    (tmp_path / "test_many.py").write_text(GROWING)
    # each worker says how many items it kept: all must agree, the replacement (gw2) too
    (tmp_path / "conftest.py").write_text(
        "import os\n"
        "def pytest_collection_finish(session):\n"
        "    worker = os.environ.get('PYTEST_XDIST_WORKER')\n"
        "    if worker:\n"
        "        with open(os.path.join(os.environ['FX_COUNTS'], worker), 'w') as fh:\n"
        "            fh.write(str(len(session.items)))\n")
    counts = tmp_path / "counts"
    counts.mkdir()
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with open_store(url) as store:
        store.ensure_build("grow", device="cpu")
        run = store.start_run("grow", suite="grow")
        store.add_outcomes(run, [Outcome(test_id="test_many.py::test_x[0]", outcome="pass", suite="grow")])
        store.finish_run(run, 0)
    r = subprocess.run([sys.executable, "-m", "pytest", "test_many.py", "-n", "2", "-q", "-p", "no:cacheprovider",
                        "-p", "torchconform.sweep.pytest_shard", "--tc-sweep-resume", "--tc-db", url,
                        "--tc-build", "grow", "--tc-suite", "grow"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=dict(child_env(), FX_DB=url, FX_COUNTS=str(counts)))
    out = r.stdout + r.stderr
    assert "INTERNALERROR" not in out, out[-3000:]
    assert "1 failed, 10 passed" in out, out[-3000:]   # test_x[0] deselected; test_x[3] crashed its worker
    kept = {p.name: int(p.read_text()) for p in counts.iterdir()}
    assert "gw2" in kept and set(kept.values()) == {11}, kept
