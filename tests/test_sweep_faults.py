"""Workers that segfault, abort, hang or exhaust memory cost one model, not the sweep."""
import os

import pytest

from torchconform.core.outcome import CRASH, PASS, TIMEOUT
from torchconform.sweep.driver import SweepOptions, run_sweep

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "zoo", "faulty.py")


def _ids(*names):
    return [f"py/{FIXTURE}::{n}" for n in names]


def test_faulty_models_end_as_crash_or_timeout_and_the_rest_completes(tmp_path, monkeypatch):
    monkeypatch.setenv("TC_FAULT_ON_CPU", "1")  # device cpu: the faults fire in the workers' CPU runs
    selection = tmp_path / "models.txt"
    selection.write_text("\n".join(_ids("segfault", "abort", "hang", "oom", "healthy", "slow_0")) + "\n")
    report = run_sweep(SweepOptions(
        build="faults", selection=str(selection), device="cpu", db=str(tmp_path / "r.db"),
        # timeout: room for a worker's start (torch import) on a loaded 2-core host before
        # the model even runs, or the out-of-memory model reads as a timeout
        workers=2, variants=("eval", "train"), timeout=20, memory_limit_mb=512,
        progress_stream=open(os.devnull, "w")))
    by = {(o.op.rsplit("::", 1)[-1], o.variant): o for o in report.outcomes}
    assert len(report.outcomes) == 12  # every run of every model recorded, none dropped
    for name in ("segfault", "abort"):
        assert by[(name, "eval")].outcome == CRASH
        assert "crashed while running" in by[(name, "eval")].message
    assert "SIGSEGV" in by[("segfault", "eval")].message
    assert "SIGABRT" in by[("abort", "eval")].message
    assert by[("oom", "eval")].outcome == CRASH and "out of memory" in by[("oom", "eval")].message
    assert by[("hang", "eval")].outcome == TIMEOUT and "exceeded 20s" in by[("hang", "eval")].message
    # later runs of a dead model are recorded too, saying they never ran
    assert by[("hang", "train")].outcome == TIMEOUT and "not run" in by[("hang", "train")].message
    for name in ("healthy", "slow_0"):
        assert by[(name, "eval")].outcome == PASS and by[(name, "train")].outcome == PASS
    assert report.replaced_workers == 4
