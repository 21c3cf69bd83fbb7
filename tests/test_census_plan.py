"""``plan`` (census/plan.py) against brute force, its store path and CLI, and the
leaderboard's full per-model counts (census/impact.py, db/read_ops.py)."""
from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys

import pytest

from torchconform.census import impact, models, plan, records
from torchconform.core.dispatch import Row
from torchconform.census.take import Census
from torchconform.core.outcome import Outcome
from torchconform.db import model_ops
from torchconform.db.opening import open_store
from torchconform.errors import UserError

# Greedy by models finished per step picks e (finishes m5 alone) first; the optimum for
# K=2 is {a, b} (m1, m2), for K=3 {a, b, c} (m1..m4): checked against brute force below.
MODELS = {"m1": {"a", "b"}, "m2": {"a", "b"}, "m3": {"a", "c"}, "m4": {"b", "c"}, "m5": {"e"},
          "m6": {"a", "b", "c", "d"}, "big": {"x1", "x2", "x3", "x4", "x5"}}
TESTS = {"a": 1, "b": 2, "c": 0, "e": 5, "t": 7, "d": 1}


def brute(models_, tests, k):
    universe = sorted(set().union(*models_.values(), tests))
    sets = {m: frozenset(s) for m, s in models_.items() if s}
    return max(plan.value(c, sets, tests) for c in itertools.combinations(universe, min(k, len(universe))))


def best_prefixes(chosen, models_, tests):
    """Lexicographically best sequence of prefix values over every order of ``chosen``."""
    sets = {m: frozenset(s) for m, s in models_.items() if s}
    return max(tuple(plan.value(p[:i], sets, tests) for i in range(1, len(p) + 1))
               for p in itertools.permutations(chosen))


def prefix_values(p, models_, tests):
    sets = {m: frozenset(s) for m, s in models_.items() if s}
    return tuple(plan.value([s.op for s in p.steps[:i]], sets, tests) for i in range(1, len(p.steps) + 1))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_plan_is_the_brute_force_optimum_with_the_best_order(k):
    p = plan.plan(MODELS, TESTS, k)
    ops = [s.op for s in p.steps]
    assert p.exact and len(ops) == k
    sets = {m: frozenset(s) for m, s in MODELS.items()}
    assert plan.value(ops, sets, TESTS) == brute(MODELS, TESTS, k)
    assert prefix_values(p, MODELS, TESTS) == best_prefixes(ops, MODELS, TESTS)
    assert p.steps[-1].total_models == brute(MODELS, TESTS, k)[0]


def test_known_answers_and_what_each_step_unblocks():
    assert [s.op for s in plan.plan(MODELS, TESTS, 1).steps] == ["e"]   # finishes m5: beats t's 7 tests
    three = plan.plan(MODELS, TESTS, 3)
    assert sorted(s.op for s in three.steps) == ["a", "b", "c"]
    assert [s.op for s in three.steps] == ["b", "a", "c"]  # b has the most tests; a then finishes m1, m2
    assert [s.models for s in three.steps] == [[], ["m1", "m2"], ["m3", "m4"]]
    assert [s.total_models for s in three.steps] == [0, 2, 4] and three.steps[-1].total_tests == 3
    assert three.steps[0].blocks == 4  # b is in m1, m2, m4, m6


def test_greedy_would_be_wrong_here():
    greedy = plan.greedy_set({m: frozenset(s) for m, s in MODELS.items()}, TESTS, 2,
                             sorted(TESTS, key=lambda op: -TESTS[op]))
    assert plan.value(greedy, {m: frozenset(s) for m, s in MODELS.items()}, TESTS) < brute(MODELS, TESTS, 2)


@pytest.mark.parametrize("seed", range(25))
def test_random_fixtures_against_brute_force(seed):
    rnd = random.Random(seed)
    ops = [f"op{i}" for i in range(rnd.randint(3, 9))]
    models_ = {f"m{i}": set(rnd.sample(ops, rnd.randint(1, min(4, len(ops))))) for i in range(rnd.randint(1, 8))}
    tests = {op: rnd.randint(0, 4) for op in rnd.sample(ops, rnd.randint(0, len(ops)))}
    for k in (1, 2, 3):
        p = plan.plan(models_, tests, k)
        chosen = [s.op for s in p.steps]
        sets = {m: frozenset(s) for m, s in models_.items()}
        assert plan.value(chosen, sets, tests) == brute(models_, tests, k), (seed, k)
        assert prefix_values(p, models_, tests) == best_prefixes(chosen, models_, tests), (seed, k)


def test_past_the_limit_the_plan_is_greedy_and_says_so():
    p = plan.plan(MODELS, TESTS, 3, limit=5)
    assert not p.exact and "greedy" in p.note and "greedy" in plan.format_plan(p)
    assert len(p.steps) == 3 and p.to_dict()["method"] == "greedy"


def test_no_step_below_one():
    with pytest.raises(UserError, match="--top 0"):
        plan.plan(MODELS, TESTS, 0)


def test_blocking_follows_blocked_composites_to_the_missing_operator():
    rows = {r.op: r for r in [
        Row("aten::arccos", "composite", reached=["aten::acos"], covered=False, blocked_by=["aten::acos"]),
        Row("aten::acos", "composite", reached=["aten::acos.out"], covered=False, blocked_by=["aten::acos.out"]),
        Row("aten::acos.out", "missing"), Row("aten::sin", "missing")]}
    got = models.blocking(rows, ["aten::arccos", "aten::sin"])
    assert got == {"aten::acos.out": "aten::arccos", "aten::sin": "direct"}


def test_history_first_missing_and_working_since():
    def rows(**status):
        return [Row(op, s) for op, s in status.items()]
    h = impact.history([("b1", rows(a="native", b="missing")), ("b2", rows(a="missing", b="native")),
                        ("b3", rows(a="native", b="native"))])
    assert h["b1"] == {"b": ("b1", "")}
    assert h["b2"] == {"a": ("b2", ""), "b": ("b1", "b2")}
    assert h["b3"] == {"a": ("b2", "b3"), "b": ("b1", "b2")}


# -- the store: census, model sets, results ---------------------------------------------------
CENSUS = [Row("aten::mm", "native"), Row("aten::sin", "missing"), Row("aten::cos.out", "missing"),
          Row("aten::cos", "composite", "CompositeExplicitAutograd", ["aten::cos.out"], False, ["aten::cos.out"]),
          Row("aten::tan", "missing"), Row("aten::relu", "fallback")]
MODEL_OPS = {"hf/a": ["aten::mm", "aten::sin", "aten::cos"], "hf/b": ["aten::sin"], "hf/c": ["aten::mm"],
             "hf/d": ["aten::tan", "aten::cos"]}


def _mop(test_id, op, suite="ops", model=""):
    return Outcome(test_id, "skip_backend", kind="missing_op", missing_op=op, suite=suite, op=model or "x")


def write_fixture(store, build="b", census=True, traced=True):
    store.ensure_build(build, torch_version="2.13.0", device="refdev")
    run = store.start_run(build, suite="ops", host="h")
    store.add_outcomes(run, [_mop("t1", "aten::sin"), _mop("t2", "aten::sin"), _mop("t3", "aten::tan")])
    store.finish_run(run, 0)
    run = store.start_run(build, suite="models", host="h")
    store.add_outcomes(run, [_mop(f"models::{m}::eval", "aten::sin" if m != "hf/d" else "aten::tan", "models", m)
                             for m in ("hf/a", "hf/b", "hf/d")] + [Outcome("models::hf/c::eval", "pass",
                                                                          suite="models", op="hf/c")])
    store.finish_run(run, 0)
    if census:
        records.save(store, build, Census("refdev", "PrivateUse1", "2.13.0", CENSUS))
    if traced:
        for m, ops in MODEL_OPS.items():
            model_ops.save(store, m, "eval", "2.13.0", "4.0", ops)


@pytest.fixture
def fixture_db(tmp_path):
    path = tmp_path / "plan.db"
    with open_store(str(path)) as store:
        write_fixture(store)
        write_fixture(store, "no-census", census=False)
    return path


def test_leaderboard_counts_every_blocker_of_traced_models(fixture_db):
    with open_store(str(fixture_db)) as store:
        board = {e["op"]: e for e in impact.leaderboard(store, "b")}
        plain = {e["op"]: e for e in impact.leaderboard(store, "no-census")}
    # hf/a hit sin first, but cos.out (through aten::cos) blocks it too; no test reached cos.out
    assert board["aten::cos.out"]["model_names"] == ["hf/a", "hf/d"]
    assert board["aten::cos.out"]["through"] == ["aten::cos"] and board["aten::cos.out"]["decomposition_only"]
    assert board["aten::sin"]["model_names"] == ["hf/a", "hf/b"] and board["aten::sin"]["tests"] == 2
    assert board["aten::sin"]["through"] == [] and not board["aten::sin"]["decomposition_only"]
    assert [e["op"] for e in board.values()][:2] == ["aten::sin", "aten::tan"]
    # without a census: the first hits only, and the shape of before
    assert set(plain) == {"aten::sin", "aten::tan"} and "through" not in plain["aten::sin"]
    assert plain["aten::sin"]["model_names"] == ["hf/a", "hf/b"]


def test_plan_from_the_store_and_the_cli(fixture_db):
    with open_store(str(fixture_db)) as store:
        found = impact.load_impact(store, "b")
    assert found.sets() == {"hf/a": {"aten::sin", "aten::cos.out"}, "hf/b": {"aten::sin"}, "hf/c": set(),
                            "hf/d": {"aten::tan", "aten::cos.out"}}
    assert found.tests == {"aten::sin": 2, "aten::tan": 1}
    out = _cli("plan", "--build", "b", "--top", "2", "--json", "--db", str(fixture_db))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["method"] == "exact" and got["blocked_models"] == 3
    assert [(s["op"], s["unblocks_models"]) for s in got["steps"]] == [
        ("aten::sin", ["hf/b"]), ("aten::cos.out", ["hf/a"])]
    assert got["steps"][1]["through"] == ["aten::cos"]
    text = _cli("plan", "--build", "b", "--top", "3", "--db", str(fixture_db)).stdout
    assert "3. aten::tan" in text and "total 3 models, 3 tests" in text


@pytest.mark.parametrize("args, cause", [
    (["--build", "nope"], "unknown build 'nope'"),
    (["--build", "no-census"], "has no census"),
    (["--build", "b", "--top", "0"], "--top 0"),
])
def test_cli_errors_are_one_line(fixture_db, args, cause):
    out = _cli("plan", *args, "--db", str(fixture_db))
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and cause in lines[0] and "torchconform" in lines[0], out.stderr


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "torchconform.cli.main", *args], capture_output=True, text=True)
