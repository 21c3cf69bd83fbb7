"""The store's write path and the query module, on SQLite and PostgreSQL."""
import json

import pytest

from array_reads import store_diff, store_matrix
from pg import db_url, pg_server, store  # noqa: F401  (fixtures)
from torchconform.core.breakdown import breakdown
from torchconform.core.outcome import Outcome
from torchconform.census import impact
from torchconform.db import counts, read_builds, read_changes, read_rows
from torchconform.db.opening import open_store
from torchconform.errors import UserError


def O(test_id, outcome, **kw):
    kw.setdefault("suite", "ops")
    kw.setdefault("file", "test/test_ops.py")
    return Outcome(test_id=test_id, outcome=outcome, **kw)


def every_kind():
    """One or more outcomes of every outcome and backend-skip kind."""
    return [
        O("t::add_f32", "pass", op="add", variant="forward", dtype="float32", device="refdev:0", duration=0.25,
          repro="torchconform run --tests t::add_f32"),
        O("t::add_f16", "pass_fallback", op="add", variant="forward", dtype="float16", fallback_ops=["aten::add.out", "aten::mul.Tensor"]),
        O("t::mul_f32", "fail", op="mul", variant="gradient", dtype="float32", message="AssertionError: not close"),
        O("t::mul_f16", "error", op="mul", variant="forward", dtype="float16", message="RuntimeError: boom"),
        O("t::div", "crash", op="div", message="worker crashed"),
        O("t::sub", "timeout", op="sub"),
        O("t::elig", "skip_eligibility", message="not applicable"),
        O("t::cat_a", "skip_backend", kind="missing_op", missing_op="aten::cat.out", op="cat"),
        O("t::cat_b", "skip_backend", kind="missing_op", missing_op="aten::cat.out", op="cat", dtype="int64"),
        O("t::sort", "skip_backend", kind="missing_op", missing_op="aten::sort.values", op="sort", file="test/test_torch.py"),
        O("t::skl", "skip_backend", kind="skiplist", skiplist_entry="refdev-12"),
        O("t::dt", "skip_backend", kind="unsupported_dtype", dtype="float64"),
        O("t::ne", "skip_backend", kind="not_executed"),
        O("t::xf", "xfail"),
        O("t::xp", "xpass"),
    ]


def store_build(store, name, outcomes, suite="ops", finish=True, **meta):
    store.ensure_build(name, append=True, **meta)
    run = store.start_run(name, suite=suite, host="h1", command="pytest -x")
    store.add_outcomes(run, outcomes)
    if finish:
        store.finish_run(run, 0)
    return run


def test_summary_is_the_seed_breakdown_of_what_was_stored(store):
    outcomes = every_kind()
    store_build(store, "b1", outcomes)
    got = read_builds.summary(store, "b1")
    assert got == breakdown("b1", outcomes)
    assert got["missing_ops"][0] == {"op": "aten::cat.out", "tests": 2}
    json.dumps(got)


def test_iter_outcomes_round_trips_every_field(store):
    outcomes = every_kind()
    store_build(store, "b1", outcomes[:7])
    # A second batch of the same run: batches append.
    run = read_builds.build_info(store, "b1")["runs"][0]["id"]
    store.add_outcomes(run, outcomes[7:])
    back = sorted(read_rows.iter_outcomes(store, "b1"), key=lambda o: o.test_id)
    assert back == sorted(outcomes, key=lambda o: o.test_id)


def test_repro_commands_are_stored_once_per_run_as_a_template(store):
    def repro(tid, op):
        return f"/venv/bin/python -m pytest '/src/{tid}' --tc-device refdev --tc-ops {op}"
    outcomes = [O(f"t::test_{op}_{i}", "pass", op=op, repro=repro(f"t::test_{op}_{i}", op))
                for op in ("add", "mul") for i in range(3)]
    outcomes += [O("t::own", "fail", op="cat", repro="pytest -k own"),     # off the template
                 O("t::none", "pass", op="cat", repro=""),                 # none at all
                 O("t::{op}", "pass", op="{id}", repro=repro("t::{op}", "{id}"))]  # placeholders in the values
    run = store_build(store, "b1", outcomes[:4])
    store.add_outcomes(run, outcomes[4:])
    back = {o.test_id: o.repro for o in read_rows.iter_outcomes(store, "b1")}
    assert back == {o.test_id: o.repro for o in outcomes}
    assert read_changes.test_history(store, "t::own")[0]["repro"] == "pytest -k own"
    assert read_changes.test_history(store, "t::test_mul_2")[0]["repro"] == repro("t::test_mul_2", "mul")
    with store.read() as conn:
        template = conn.exec_driver_sql("SELECT repro_template FROM runs").scalar_one()
        stored = dict(conn.exec_driver_sql(
            "SELECT t.test_id, v.repro FROM results r JOIN tests t ON t.id = r.test_pk "
            "JOIN result_values v ON v.id = r.value_id").all())
    assert template == "/venv/bin/python -m pytest '/src/{id}' --tc-device refdev --tc-ops {op}"
    assert sorted(tid for tid, r in stored.items() if r is not None) == ["t::none", "t::own", "t::{op}"]
    assert stored["t::none"] == ""


def test_shards_merge_and_the_latest_result_per_test_counts(store):
    store_build(store, "nightly", [O("a", "pass"), O("b", "fail")], shard="1/2")
    store_build(store, "nightly", [O("c", "pass"), O("b", "pass")], shard="2/2")
    s = read_builds.summary(store, "nightly")
    assert s["total"] == 3
    assert s["outcomes"]["pass"] == 3 and s["outcomes"]["fail"] == 0
    info = read_builds.build_info(store, "nightly")
    assert len(info["runs"]) == 2 and info["complete"]
    assert [b["results"] for b in read_builds.list_builds(store)] == [4]


def test_existing_build_needs_append(store):
    store.ensure_build("b1")
    with pytest.raises(UserError, match="already exists.*--append"):
        store.ensure_build("b1")
    assert store.ensure_build("b1", append=True, branch="main", extra_key="v") == store.build_id("b1")
    row = read_builds.list_builds(store)[0]
    assert row["branch"] == "main" and row["metadata"] == {"extra_key": "v"}


def test_a_run_is_complete_only_when_it_ends(store):
    run = store_build(store, "b1", [O("a", "pass")], finish=False)
    assert read_builds.list_builds(store)[0]["complete"] is False
    assert read_builds.build_info(store, "b1")["runs"][0]["exit_status"] is None
    # What was flushed before the (simulated) kill is readable already.
    assert read_builds.summary(store, "b1")["total"] == 1
    store.finish_run(run, 1)
    info = read_builds.build_info(store, "b1")
    assert info["complete"] and info["runs"][0]["exit_status"] == 1 and info["runs"][0]["ended"]


def test_reruns_are_attempts_and_flaky_history_is_queryable(store):
    run = store_build(store, "b1", [O("a", "pass"), O("f", "fail"), O("g", "fail")], finish=False)
    store.add_outcomes(run, [O("f", "pass", attempt=2), O("g", "fail", attempt=2)])
    assert read_builds.summary(store, "b1")["outcomes"]["pass"] == 2
    flaky = {(e["test_id"], e["flaky"]) for e in read_changes.flaky_tests(store, "b1")}
    assert flaky == {("f", True), ("g", False)}
    assert [e["test_id"] for e in read_changes.flaky_tests(store, test_id="f")] == ["f"]
    hist = read_changes.test_history(store, "f")
    assert [(h["attempt"], h["outcome"], h["latest"]) for h in hist] == [(1, "fail", False), (2, "pass", True)]


def test_diff_categories(store):
    old = [O("reg", "pass"), O("reg_mop", "pass_fallback"), O("fix", "fail"), O("fix_mop", "skip_backend", kind="missing_op",
           missing_op="aten::old.out"), O("creep", "pass"), O("same", "pass"), O("gone", "pass"),
           O("other", "skip_eligibility"), O("still_missing", "skip_backend", kind="missing_op", missing_op="aten::old.out")]
    new = [O("reg", "fail", message="boom"), O("reg_mop", "skip_backend", kind="missing_op", missing_op="aten::new.out"),
           O("fix", "pass"), O("fix_mop", "pass_fallback", fallback_ops=["aten::old.out"]),
           O("creep", "pass_fallback", fallback_ops=["aten::x"]), O("same", "pass"), O("other", "xfail"),
           O("born", "fail"), O("still_missing", "skip_backend", kind="missing_op", missing_op="aten::old.out")]
    store_build(store, "A", old)
    store_build(store, "B", new)
    d = store_diff(store, "A", "B")
    ids = {cat: [e["test_id"] for e in d[cat]] for cat in
           ("regressions", "fixes", "fallback_creep", "new_tests", "missing_tests", "other_changes")}
    assert ids == {"regressions": ["reg", "reg_mop"], "fixes": ["fix", "fix_mop"], "fallback_creep": ["creep"],
                   "new_tests": ["born"], "missing_tests": ["gone"], "other_changes": ["other"]}
    assert d["new_missing_ops"] == [{"op": "aten::new.out", "tests": 1}]
    reg = d["regressions"][0]
    assert (reg["old_outcome"], reg["new_outcome"], reg["message"]) == ("pass", "fail", "boom")
    assert d["fallback_creep"][0]["fallback_ops"] == ["aten::x"]
    assert d["counts"]["common_tests"] == 8
    assert {"old": "pass", "new": "pass", "tests": 1} in d["transitions"]
    back = store_diff(store, "B", "A")
    assert [e["test_id"] for e in back["fixes"]] == ["reg", "reg_mop"]
    json.dumps(d)


def test_unknown_build_is_a_user_error(store):
    store_build(store, "A", [O("a", "pass")])
    for call in (lambda: read_builds.summary(store, "nope"), lambda: store_diff(store, "A", "nope"),
                 lambda: list(read_rows.iter_outcomes(store, "nope")), lambda: store_matrix(store, "nope")):
        with pytest.raises(UserError, match="unknown build 'nope'.*torchconform builds"):
            call()


def test_op_matrix_and_summary_by(store):
    store_build(store, "b1", every_kind())
    cells = {(c["op"], c["variant"], c["dtype"]): c for c in store_matrix(store, "b1")}
    assert cells[("add", "forward", "float32")]["outcomes"] == {"pass": 1}
    assert cells[("cat", "", "int64")]["backend_skip_kinds"] == {"missing_op": 1}
    assert ("", "", "") not in cells  # tests without an operator are not in the matrix
    by_file = counts.summary_by(store, "b1", "file")
    assert set(by_file) == {"test/test_ops.py", "test/test_torch.py"}
    assert by_file["test/test_torch.py"]["missing_ops"] == [{"op": "aten::sort.values", "tests": 1}]
    assert sum(b["total"] for b in by_file.values()) == len(every_kind())
    assert list(counts.summary_by(store, "b1", "suite")) == ["ops"]
    with pytest.raises(UserError):
        counts.summary_by(store, "b1", "colour")


def test_missing_op_leaderboard_counts_tests_models_and_first_build(store):
    mop = dict(outcome="skip_backend", kind="missing_op")
    store_build(store, "b1", [Outcome("t1", missing_op="aten::cat.out", **mop)])
    store_build(store, "b2", [Outcome("t1", missing_op="aten::cat.out", **mop),
                              Outcome("t2", missing_op="aten::cat.out", **mop),
                              Outcome("t3", missing_op="aten::sort", **mop),
                              Outcome("m1", missing_op="aten::sort", suite="models", op="bert", **mop),
                              Outcome("m2", missing_op="aten::sort", suite="models", op="gpt2", **mop),
                              Outcome("m3", missing_op="aten::sort", suite="models", op="gpt2", **mop)])
    board = impact.leaderboard(store)  # latest build by default
    assert [(e["op"], e["tests"], e["models"], e["first_build"]) for e in board] == [
        ("aten::cat.out", 2, 0, "b1"), ("aten::sort", 1, 2, "b2")]
    assert board[1]["model_names"] == ["bert", "gpt2"]
    assert [e["tests"] for e in impact.leaderboard(store, "b1")] == [1]


def test_missing_op_leaderboard_counts_only_each_tests_latest_result(store):
    mop = dict(outcome="skip_backend", kind="missing_op")
    run = store_build(store, "b", [Outcome("t1", missing_op="aten::cat.out", **mop),
                                   Outcome("t2", missing_op="aten::cat.out", **mop),
                                   Outcome("t3", "pass"),
                                   Outcome("t4", "skip_backend", kind="skiplist", missing_op="aten::skl")])
    assert [(e["op"], e["tests"]) for e in impact.leaderboard(store, "b")] == [("aten::cat.out", 2)]
    # reruns: t1 now passes, t3 now misses an operator; only the latest attempt counts
    store.add_outcomes(run, [Outcome("t1", "pass", attempt=2),
                             Outcome("t3", missing_op="aten::sort", attempt=2, **mop)])
    assert [(e["op"], e["tests"]) for e in impact.leaderboard(store, "b")] == [("aten::cat.out", 1), ("aten::sort", 1)]
    assert read_builds.summary(store, "b")["missing_ops"] == [{"op": "aten::cat.out", "tests": 1},
                                                              {"op": "aten::sort", "tests": 1}]


def test_latest_build_by_branch_and_device(store):
    store_build(store, "m1", [O("a", "pass")], branch="main", device="refdev")
    store_build(store, "f1", [O("a", "pass")], branch="feature", device="refdev")
    store_build(store, "m2", [O("a", "pass")], branch="main", device="neuron")
    assert read_builds.latest_build(store) == "m2"
    assert read_builds.latest_build(store, branch="main", device="refdev") == "m1"
    assert read_builds.latest_build(store, branch="feature") == "f1"
    assert read_builds.latest_build(store, exclude="m2") == "f1"
    assert read_builds.latest_build(store, branch="nope") is None
    assert [b["name"] for b in read_builds.list_builds(store)] == ["m1", "f1", "m2"]


def test_sweep_reads_done_tests_and_earlier_durations(store):
    store_build(store, "n1", [O("models::bert::fwd", "pass", suite="models", duration=2.0),
                              O("t::a", "pass", duration=9.0)])
    store_build(store, "n2", [O("models::bert::fwd", "fail", suite="models", duration=4.0)])
    store_build(store, "n3", [O("models::gpt2::fwd", "pass", suite="models", duration=1.0)], finish=False)
    assert read_builds.stored_test_ids(store, "n3", "models") == {"models::gpt2::fwd"}
    assert read_builds.stored_test_ids(store, "n1", "ops") == {"t::a"}
    assert read_builds.stored_test_ids(store, "not-yet", "models") == set()
    assert read_builds.earlier_durations(store, "models", exclude_build="n3") == {"models::bert::fwd": 3.0}
    assert read_builds.earlier_durations(store, "models", exclude_build="n3", builds_back=1) == {"models::bert::fwd": 4.0}


def test_builds_json_names_each_builds_series(tmp_path, cli):
    db = str(tmp_path / "s.db")
    with open_store(db) as s:
        for name, suite, device in (("a", "ops", "refdev"), ("b", "modules", "refdev"), ("c", "ops", "cpu")):
            s.ensure_build(name, device=device, profile="young-backend", branch="main")
            run = s.start_run(name, suite=suite)
            s.add_outcomes(run, [O("t::x", "pass")])
            s.finish_run(run, 0)
    code, out, err = cli("builds", "--json", "--db", db)
    assert code == 0, err
    series = {r["name"]: r["series"] for r in json.loads(out)}
    assert series["a"]["device"] == "refdev" and series["a"]["suite_set"] == "ops"
    assert series["b"]["suite_set"] == "modules" and series["c"]["device"] == "cpu"
    assert len({json.dumps(v, sort_keys=True) for v in series.values()}) == 3
