"""gate_build over a real SQLite store with hand-made outcomes (no device, no reruns
through pytest: the confirmation step is replaced where a test needs it)."""
import time

import pytest

from torchconform.ci.config import parse_config
from torchconform.ci.flaky import Attempt, Confirmation
from torchconform.ci.pipeline import gate_build, resolve_baseline
from torchconform.collectors.outcome import Outcome
from torchconform.db import queries
from torchconform.db.store import open_store
from torchconform.errors import UserError


def store_build(store, name, outcomes, device="refdev", branch="main", finish=True):
    store.ensure_build(name, device=device, branch=branch)
    run = store.start_run(name, suite="unit")
    store.add_outcomes(run, outcomes)
    if finish:
        store.finish_run(run, 0)
    time.sleep(0.01)   # distinct creation times


@pytest.fixture
def store(tmp_path):
    with open_store(str(tmp_path / "g.db")) as s:
        yield s


def passing(*ids):
    return [Outcome(t, "pass") for t in ids]


def test_latest_is_the_newest_earlier_complete_build_on_the_device_and_branch(store):
    store_build(store, "m1", passing("a", "b"))
    store_build(store, "other-device", passing("a"), device="cpu")
    store_build(store, "feature", passing("a"), branch="feature")
    store_build(store, "killed", passing("a"), finish=False)
    store_build(store, "m2", passing("a", "b"))
    store_build(store, "later", passing("a"))
    assert resolve_baseline(store, "m2", "latest:main") == "m1"
    assert resolve_baseline(store, "m2", "latest") == "feature"
    assert resolve_baseline(store, "m2", "latest:feature") == "feature"
    assert resolve_baseline(store, "m1", "latest") is None
    assert resolve_baseline(store, "m2", "m1") == "m1"
    with pytest.raises(UserError, match="unknown build 'zz'"):
        resolve_baseline(store, "m2", "zz")
    with pytest.raises(UserError, match="is the build being gated"):
        resolve_baseline(store, "m2", "m2")
    with pytest.raises(UserError, match="names no branch"):
        resolve_baseline(store, "m2", "latest:")


def test_flaky_confirmation_decides_and_a_steady_failure_still_fails(store):
    store_build(store, "old", passing("t1", "t2", "t3"))
    store_build(store, "new", [Outcome("t1", "fail"), Outcome("t2", "crash"), Outcome("t3", "pass")])
    seen = []

    def confirm(records, reruns):
        seen.extend(r["test_id"] for r in records)
        out = []
        for r in records:
            c = Confirmation(r["test_id"], first=r["outcome"])
            for i in range(reruns):
                result = "pass" if r["test_id"] == "t1" and i == 1 else "fail"
                c.attempts.append(Attempt(i + 2, Outcome(r["test_id"], result, attempt=i + 2)))
            out.append(c)
        return out

    config = parse_config({"rules": {"coverage_drop": "off"}})
    run = gate_build(store, "new", baseline="old", config=config, reruns=2, confirm=confirm)
    assert seen == ["t1", "t2"]
    assert [f["test_id"] for f in run.result.flaky] == ["t1"]
    assert [f["test_id"] for f in run.result.rule("regression").findings] == ["t2"]
    assert run.exit_code == 1
    assert "1 flaky, 1 failed every attempt" in run.markdown
    # Only flakes: the gate passes.
    store_build(store, "new2", [Outcome("t1", "fail"), Outcome("t2", "pass"), Outcome("t3", "pass")])
    assert gate_build(store, "new2", baseline="old", config=config, reruns=2, confirm=confirm).exit_code == 0


def test_max_tests_caps_reruns_and_zero_reruns_skip_them(store):
    store_build(store, "old", passing(*[f"t{i}" for i in range(5)]))
    store_build(store, "new", [Outcome(f"t{i}", "fail") for i in range(5)])
    calls = []
    config = parse_config({"flaky": {"max_tests": 2}})
    run = gate_build(store, "new", baseline="old", config=config,
                     confirm=lambda recs, n: calls.append((len(recs), n)) or [])
    assert calls == [(2, 3)] and "only the first 2 were rerun" in run.markdown
    calls.clear()
    gate_build(store, "new", baseline="old", config=config, reruns=0, confirm=lambda recs, n: calls.append(1) or [])
    assert calls == []


def test_no_baseline_and_branch_recording(store):
    store_build(store, "first", [Outcome("a", "fail")], branch="")
    with pytest.raises(UserError, match="no baseline"):
        gate_build(store, "first", baseline="latest:main", branch="main")
    # The error left the build untouched.
    assert queries.build_info(store, "first")["branch"] == ""
    run = gate_build(store, "first", baseline="latest:main", branch="main", allow_no_baseline=True)
    assert run.exit_code == 0 and run.baseline is None and "first build" in run.markdown
    assert queries.build_info(store, "first")["branch"] == "main"
    store_build(store, "second", [Outcome("a", "fail")], branch="")
    run = gate_build(store, "second", baseline="latest:main", branch="main")
    assert run.baseline == "first" and run.exit_code == 0
