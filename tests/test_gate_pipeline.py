"""gate_build over a real SQLite store with hand-made outcomes (no device, no reruns
through pytest: the confirmation step is replaced where a test needs it)."""
import time

import pytest

from torchconform.ci.config import parse_config
from torchconform.ci.flaky import Attempt, Confirmation
from torchconform.ci.pipeline import gate_build, resolve_baseline
from torchconform.core.outcome import Outcome
from torchconform.db import read_builds
from torchconform.db.opening import open_store
from torchconform.errors import UserError


def store_build(store, name, outcomes, device="refdev", branch="main", finish=True, suite="unit", **meta):
    store.ensure_build(name, device=device, branch=branch, **meta)
    run = store.start_run(name, suite=suite)
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


def test_latest_is_the_newest_earlier_complete_build_of_the_series(store):
    store_build(store, "m1", passing("a", "b"))
    store_build(store, "other-device", passing("a"), device="cpu")
    store_build(store, "feature", passing("a"), branch="feature")
    store_build(store, "killed", passing("a"), finish=False)
    store_build(store, "m2", passing("a", "b"))
    store_build(store, "later", passing("a"))
    assert resolve_baseline(store, "m2", "latest:main") == "m1"
    # latest stays on the build's own branch (its series); latest:BRANCH is the series on that branch
    assert resolve_baseline(store, "m2", "latest") == "m1"
    assert resolve_baseline(store, "m2", "latest:feature") == "feature"
    assert resolve_baseline(store, "feature", "latest") is None
    assert resolve_baseline(store, "feature", "latest:main") == "m1"
    assert resolve_baseline(store, "m1", "latest") is None
    assert resolve_baseline(store, "m2", "m1") == "m1"
    with pytest.raises(UserError, match="unknown build 'zz'"):
        resolve_baseline(store, "m2", "zz")
    with pytest.raises(UserError, match="is the build being gated"):
        resolve_baseline(store, "m2", "m2")
    with pytest.raises(UserError, match="names no branch"):
        resolve_baseline(store, "m2", "latest:")


def test_latest_never_crosses_into_another_series(store):
    """Device, backend profile, branch and suite set each make a series; the gate's
    latest and the site's baseline are the same rule (db/series.py)."""
    from torchconform.db.series import baselines

    store_build(store, "ops-1", passing("a", "b"), profile="young-backend")
    store_build(store, "ops-2", passing("a", "b"), profile="young-backend")
    # newer, same device and branch, but another suite set / profile / device: never the baseline
    store_build(store, "junit-6", passing("x"), profile="young-backend", suite="pytest")
    store_build(store, "full-1", passing("a", "b"), profile="full")
    store_build(store, "npu-1", passing("a", "b"), device="npu", profile="young-backend")
    # the runner records the backend profile it loaded: it wins over the profile column
    store_build(store, "rec-1", passing("a"), profile="gate-a.yaml", backend_profile="refdev")
    store_build(store, "ops-3", passing("a", "b"), profile="young-backend")
    store_build(store, "rec-2", passing("a"), profile="gate-b.yaml", backend_profile="refdev")
    # a suite set's plan names its suites before they have all run; gate reruns are no suite
    store_build(store, "set-1", passing("a"), profile="young-backend", suite="ops",
                plan=[{"suite": "ops", "shards": 1}, {"suite": "modules", "shards": 1}])
    run = store.start_run("ops-3", suite="gate-rerun")
    store.add_outcomes(run, [Outcome("a", "pass", attempt=2)])
    store.finish_run(run, 0)
    store_build(store, "set-2", passing("a"), profile="young-backend", suite="modules")
    run = store.start_run("set-2", suite="ops")
    store.add_outcomes(run, passing("b"))
    store.finish_run(run, 0)

    assert resolve_baseline(store, "ops-3", "latest") == "ops-2"
    assert resolve_baseline(store, "ops-3", "latest:main") == "ops-2"
    assert resolve_baseline(store, "junit-6", "latest") is None
    assert resolve_baseline(store, "full-1", "latest") is None
    assert resolve_baseline(store, "npu-1", "latest") is None
    assert resolve_baseline(store, "rec-2", "latest") == "rec-1"
    # set-1's planned modules step has not run: incomplete, never a baseline; once it has, it is
    assert resolve_baseline(store, "set-2", "latest") is None
    run = store.start_run("set-1", suite="modules")
    store.add_outcomes(run, passing("b"))
    store.finish_run(run, 0)
    assert resolve_baseline(store, "set-2", "latest") == "set-1"
    rows = read_builds.list_builds(store, series=True)
    by = {r["name"]: r for r in rows}
    assert by["ops-3"]["suite_set"] == "unit" and by["junit-6"]["suite_set"] == "pytest"
    assert by["set-1"]["suite_set"] == by["set-2"]["suite_set"] == "modules+ops"
    assert by["rec-1"]["series"] == {"device": "refdev", "profile": "refdev", "branch": "main", "suite_set": "unit"}
    # the same answer the site's model gets for every build
    assert {n: resolve_baseline(store, n, "latest") for n in by} == baselines(rows)
    # list_builds without series answers as before: no new keys
    assert not {"suite_set", "series"} & set(read_builds.list_builds(store)[0])
    with pytest.raises(UserError, match=r"no earlier complete build of its series, device npu · profile "
                                         r"young-backend · branch main · suites unit"):
        gate_build(store, "npu-1", baseline="latest")


def test_the_gates_rerun_suite_is_the_one_the_series_leaves_out():
    from torchconform.ci.flaky import RERUN_SUITE
    from torchconform.db.series import RERUN_SUITES

    assert RERUN_SUITES == {RERUN_SUITE}


def test_latest_with_branch_looks_where_the_gate_records_the_build(store):
    """``gate --branch main`` on a build that recorded no branch: latest looks on main."""
    store_build(store, "m1", passing("a"))
    store_build(store, "nobranch", passing("a"), branch="")
    assert resolve_baseline(store, "nobranch", "latest") is None
    assert resolve_baseline(store, "nobranch", "latest", branch="main") == "m1"
    run = gate_build(store, "nobranch", baseline="latest", branch="main", reruns=0)
    assert run.baseline == "m1"


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
    assert read_builds.build_info(store, "first")["branch"] == ""
    run = gate_build(store, "first", baseline="latest:main", branch="main", allow_no_baseline=True)
    assert run.exit_code == 0 and run.baseline is None and "first build" in run.markdown
    assert read_builds.build_info(store, "first")["branch"] == "main"
    store_build(store, "second", [Outcome("a", "fail")], branch="")
    run = gate_build(store, "second", baseline="latest:main", branch="main")
    assert run.baseline == "first" and run.exit_code == 0
