"""Set-up shared by every test process."""
import pytest


@pytest.fixture(autouse=True, scope="session")
def _autograd_engine_sees_refdev():
    """Load refdev before any test of this process runs a backward pass.

    PyTorch's autograd engine sizes its per-device work queues once per process, at the
    first backward that needs them, from the device counts registered then.  A test that
    runs a CPU backward in-process (the models suite's run_model) before refdev is loaded
    leaves PrivateUse1 without a queue, and every later refdev backward in that process
    fails an internal assert in the engine.  Which tests share a process is up to xdist's
    scheduling, so the order is fixed here instead.  Tests that need refdev and cannot
    load it say so themselves."""
    try:
        from torchconform import refdev

        refdev.load()
    except Exception:
        pass  # not buildable here: the tests that need refdev fail or skip with the reason
    yield


@pytest.fixture
def cli(capsys, monkeypatch):
    """The console entry point in this process: cli(*args) -> (exit code, stdout, stderr)."""
    from torchconform.cli.main import main

    for key in ("GITHUB_STEP_SUMMARY", "TORCHCONFORM_DB"):
        monkeypatch.delenv(key, raising=False)

    def call(*args):
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err
    return call


@pytest.fixture
def one_ray_at_a_time(monkeypatch):
    """Hold a machine-wide lock while a test runs Ray: two Ray instances started at once
    by two xdist workers (a local one and a three-raylet cluster) slowed each other's
    failure detection past the tests' timeouts on 2 cores (a segfaulted worker and a
    killed node's tasks reported as timeouts).

    And run Ray's workers at the tests' own priority: Ray starts them at nice 15, so
    beside the other xdist worker (nice 0) on 2 cores they got a few percent of a core
    and a tiny model took a minute to build (the CI failures' timeouts).  The raylets
    read RAY_worker_niceness when they start, so it is set before any test starts one."""
    import fcntl
    import tempfile
    from pathlib import Path

    monkeypatch.setenv("RAY_worker_niceness", "0")
    with open(Path(tempfile.gettempdir()) / "torchconform-tests-ray.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
