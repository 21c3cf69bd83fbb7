"""Failures a declared trait explains (collectors/traitfail.py, collectors/traitrerun.py):
the rule, the record, the breakdown's counting, the gate, and on refdev the rerun with the
trait off (tests/fixtures/traits/fx_trait_fail.py, young-backend vs full)."""
import math
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import REPO, by_name, child_env, run_pytest  # noqa: E402

from torchconform.ci.gate import evaluate, index  # noqa: E402
from torchconform.ci.pipeline import gate_build  # noqa: E402
from torchconform.core.breakdown import breakdown, format_breakdown  # noqa: E402
from torchconform.core.outcome import Outcome, check_outcome  # noqa: E402
from torchconform.collectors.traitfail import (  # noqa: E402
    VIA_RERUN, attributed, candidate_trait, declared_traits, downcast_trait, parse_mismatch, rule_reason,
)
from torchconform.collectors.traitrerun import TraitAttribution, rerun_argv  # noqa: E402
from torchconform.db import counts, read_builds  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402
from torchconform.core.profile import BackendProfile  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "traits" / "fx_trait_fail.py"
POLICY = {"downcast": {"float64": "float32", "complex128": "complex64"}}
KIND = "trait:float64_as_float32"
TENSORS_INF = """AssertionError: Tensor-likes are not close!

Mismatched elements: 2 / 4 (50.0%)
Greatest absolute difference: inf at index (2,) (up to 1e-07 allowed)
Greatest relative difference: inf at index (2,) (up to 1e-07 allowed)"""


def _mismatch(abs_, rel):
    return parse_mismatch(f"Tensor-likes are not close!\n\nGreatest absolute difference: {abs_} at index (0,) "
                          f"(up to 1e-07 allowed)\nGreatest relative difference: {rel} at index (0,) (up to 1e-07 allowed)")


# -- the rule ------------------------------------------------------------------------------
def test_parse_mismatch_reads_tensor_and_scalar_messages():
    m = parse_mismatch(TENSORS_INF)
    assert math.isinf(m["abs"]) and math.isinf(m["rel"]) and m["atol"] == 1e-07 and "expected" not in m
    s = parse_mismatch("Scalars are not close!\n\nExpected 1e+300 but got inf.\n"
                       "Absolute difference: inf (up to 1e-07 allowed)\nRelative difference: inf (up to 1e-07 allowed)")
    assert s["expected"] == 1e300 and math.isinf(s["actual"])
    assert parse_mismatch("AssertionError: assert 1 == 2") is None
    assert parse_mismatch("Booleans mismatch: True is not False") is None


def test_rule_accepts_only_mismatches_the_lower_precision_gives():
    assert "overflowed float32" in rule_reason(_mismatch("inf", "inf"), "float32")
    # the device's inf passed as "expected" (upstream's test_nan_to_num): rel = inf/inf = nan
    assert "overflowed float32" in rule_reason(_mismatch("inf", "nan"), "float32")
    assert "within 4 eps" in rule_reason(_mismatch("1e-05", "3e-07"), "float32")
    assert rule_reason(_mismatch("0.5", "0.4"), "float32") is None           # a real numerical bug
    assert rule_reason(_mismatch("nan", "nan"), "float32") is None
    scalar = "Scalars are not close!\n\nExpected {} but got inf.\nAbsolute difference: inf\nRelative difference: inf"
    assert rule_reason(parse_mismatch(scalar.format("1e+300")), "float32")
    assert rule_reason(parse_mismatch(scalar.format("2.0")), "float32") is None  # 2.0 fits float32
    swapped = "Scalars are not close!\n\nExpected inf but got -1e+300.\nAbsolute difference: inf\nRelative difference: nan"
    assert "beyond float32's range" in rule_reason(parse_mismatch(swapped), "float32")


def test_candidates_are_downcast_dtypes_closeness_failures_without_a_kind():
    m = _mismatch("inf", "inf")
    assert downcast_trait("complex128", POLICY) == ("float64_as_float32", "float32")
    assert declared_traits(POLICY) == ["float64_as_float32"] and declared_traits({}) == []
    assert candidate_trait(Outcome("t", "fail", dtype="float64"), m, POLICY) == ("float64_as_float32", "float32")
    assert candidate_trait(Outcome("t", "fail", dtype="float32"), m, POLICY) is None
    assert candidate_trait(Outcome("t", "fail", dtype="float64"), None, POLICY) is None   # not a closeness failure
    assert candidate_trait(Outcome("t", "error", dtype="float64"), m, POLICY) is None
    assert candidate_trait(Outcome("t", "fail", dtype="float64"), m, {}) is None          # nothing declared


def test_the_record_says_how_it_was_attributed_and_check_outcome_allows_only_fail():
    o = attributed(Outcome("t", "fail", dtype="float64", message="x" * 600), "float64_as_float32", VIA_RERUN)
    assert o.kind == KIND and o.message.endswith("[attributed to trait float64_as_float32: rerun with the trait off passed]")
    assert len(o.message) <= 500
    check_outcome("fail", KIND)
    for outcome, kind in (("pass", KIND), ("error", KIND), ("fail", "trait:"), ("fail", "other")):
        with pytest.raises(ValueError):
            check_outcome(outcome, kind)


def test_without_a_trait_off_hook_the_rule_decides_at_once():
    profile = BackendProfile(name="n", device="neuron", dtype_policy=POLICY)
    t = TraitAttribution(profile, limit=200)
    o = t.take(Outcome("t", "fail", dtype="float64", message="AssertionError: Tensor-likes are not close!"),
               _mismatch("inf", "inf"), "t")
    assert o.kind == KIND and "[attributed to trait float64_as_float32: by rule: an infinite difference" in o.message
    bug = t.take(Outcome("u", "fail", dtype="float64"), _mismatch("0.5", "0.4"), "u")
    assert bug.kind == "" and t.stats == {"candidates": 2, "rerun": 0, "attributed": 0, "by_rule": 1, "not_rerun": 0}


def test_with_a_hook_candidates_are_held_up_to_the_limit():
    profile = BackendProfile(name="r", device="refdev", dtype_policy=POLICY, trait_off="torchconform.refdev:trait_off_env")
    t = TraitAttribution(profile, limit=1)
    m = _mismatch("inf", "inf")
    assert t.take(Outcome("a", "fail", dtype="float64"), m, "/abs/a") is None
    assert t.take(Outcome("b", "fail", dtype="float64"), m, "/abs/b").kind == ""     # past the limit: plain fail
    assert t.resolve(None, interrupted=True, per_test_timeout=0)[0].kind == ""       # interrupted: not rerun
    assert t.stats["not_rerun"] == 2


def test_rerun_argv_keeps_the_session_options_and_drops_paths_workers_and_sinks():
    inv = ["-c", "/s/pytest.ini", "--rootdir", "/src", "-p", "torchconform.suites.upstream.plugin", "--noconftest",
           "/src/test/test_x.py", "-p", "no:cacheprovider", "--tc-device", "refdev", "--tc-jsonl", "/o.jsonl",
           "--tc-db=sqlite:///x.db", "-n", "2", "--max-worker-restart", "1000", "-k", "float64", "-nauto",
           "-p", "torchconform.sweep.pytest_shard", "--tc-sweep-shards", "2", "--tc-sweep-resume"]
    argv = rerun_argv(inv, ["/src/test/test_x.py"], ["/src/test/test_x.py::T::t"], "/tmp/r.jsonl")
    assert argv[1:3] == ["-m", "pytest"]
    rest = argv[3:]
    assert rest[:7] == ["-c", "/s/pytest.ini", "--rootdir", "/src", "-p", "torchconform.suites.upstream.plugin",
                        "--noconftest"]
    for gone in ("/src/test/test_x.py", "/o.jsonl", "-n", "1000", "-nauto", "--tc-sweep-resume",
                 "torchconform.sweep.pytest_shard", "--tc-db=sqlite:///x.db"):
        assert gone not in rest
    assert rest[-7:] == ["/src/test/test_x.py::T::t", "-p", "no:xdist", "-p", "no:cacheprovider",
                         "--tc-jsonl", "/tmp/r.jsonl"]
    assert "-k" in rest and "float64" in rest


# -- counting ------------------------------------------------------------------------------
def _outcomes():
    return [Outcome("a", "fail", dtype="float64", kind=KIND), Outcome("b", "fail", dtype="float64"),
            Outcome("c", "pass"), Outcome("d", "error")]


def test_breakdown_counts_trait_failures_apart_inside_fail():
    b = breakdown("b", _outcomes())
    assert b["outcomes"]["fail"] == 2 and b["fail_kinds"] == {KIND: 1}
    assert {"build", "total", "outcomes", "pass_kinds", "backend_skip_kinds", "missing_ops", "complete",
            "unfinished_runs"} <= set(b)
    text = format_breakdown(b)
    assert "failed          3   (fail 2, error 1, crash 0, timeout 0), of which explained by declared traits 1 " \
           f"({KIND} 1)" in text
    plain = format_breakdown(breakdown("p", [Outcome("b", "fail")]))
    assert "explained" not in plain and breakdown("p", [])["fail_kinds"] == {}
    merged = breakdown("m", [*_outcomes(), Outcome("e", "fail", dtype="float64", kind=KIND)])
    assert merged["fail_kinds"] == {KIND: 2}


def test_the_store_summary_has_fail_kinds(tmp_path):
    with open_store(str(tmp_path / "s.db")) as store:
        store.ensure_build("b", device="refdev")
        run = store.start_run("b", suite="unit")
        store.add_outcomes(run, _outcomes())
        store.finish_run(run, 0)
        assert read_builds.summary(store, "b")["fail_kinds"] == {KIND: 1}
        assert [b["fail_kinds"] for b in counts.summary_by(store, "b", "file").values()] == [{KIND: 1}]
    # the site's build page shows them apart (the outcomes table and the breakdown text)
    from torchconform.dashboard import build_site

    index_html = build_site(str(tmp_path / "s.db"), tmp_path / "site")
    page = next((index_html.parent / "builds").glob("*/index.html")).read_text()
    assert f"fail/{KIND}" in page and "of which explained by declared traits 1" in page


# -- the gate ------------------------------------------------------------------------------
OLD = index([Outcome("t::exp", "pass", dtype="float64"), Outcome("t::sin", "pass", dtype="float64")])
NEW = index([Outcome("t::exp", "fail", dtype="float64", kind=KIND), Outcome("t::sin", "fail", dtype="float64"),
             Outcome("t::cosh", "fail", dtype="float64", kind=KIND)])


def _failing(result, rule):
    return sorted(f["test_id"] for f in result.rule(rule).findings)


def test_gate_a_trait_explained_failure_is_no_regression_while_a_plain_fail_is():
    same = ({"float64_as_float32"}, {"float64_as_float32"})
    r = evaluate(OLD, NEW, traits=same)
    assert _failing(r, "regression") == ["t::sin"] and _failing(r, "new_test_failing") == []
    assert sorted(f["test_id"] for f in r.explained) == ["t::cosh", "t::exp"] and not r.passed
    # the trait itself changed (the baseline did not declare it): counted in full
    changed = evaluate(OLD, NEW, traits=(set(), {"float64_as_float32"}))
    assert _failing(changed, "regression") == ["t::exp", "t::sin"] and changed.explained == []
    assert _failing(changed, "new_test_failing") == ["t::cosh"]
    # nothing recorded: the records alone say what each build declared (the baseline: nothing)
    assert _failing(evaluate(OLD, NEW), "regression") == ["t::exp", "t::sin"]


def test_gate_build_reads_declared_traits_from_the_builds(tmp_path):
    with open_store(str(tmp_path / "g.db")) as store:
        for name, outcomes in (("old", OLD), ("new", NEW)):
            store.ensure_build(name, device="refdev", branch="main", declared_traits=["float64_as_float32"])
            run = store.start_run(name, suite="unit")
            store.add_outcomes(run, [Outcome.from_dict(r) for r in outcomes.values()])
            store.finish_run(run, 0)
            time.sleep(0.01)
        run = gate_build(store, "new", baseline="old", reruns=0)
        assert [f["test_id"] for f in run.result.rule("regression").findings] == ["t::sin"]
        assert "Explained by declared traits (2, not failing the gate)" in run.markdown
        assert f"| fail/{KIND} | 0 | 2 | +2 |" in run.markdown


# -- on refdev: the rerun with the trait off -----------------------------------------------
@pytest.mark.parametrize("profile", ["young-backend", "full"])
def test_fixture_on_refdev_rerun_with_the_trait_off_decides(tmp_path, profile):
    proc, run, outcomes = run_pytest([FIXTURE, "--tc-device", "refdev"], tmp_path,
                                     env=child_env(TORCHCONFORM_REFDEV_PROFILE=profile))
    got = {name: (o.outcome, o.kind) for name, o in by_name(outcomes).items()}
    if profile == "young-backend":
        assert got == {"test_exp_large_float64": ("fail", KIND), "test_exp_wrong_float64": ("fail", ""),
                       "test_add_small_float64": ("pass", "")}
        assert by_name(outcomes)["test_exp_large_float64"].message.endswith(f"[attributed to trait "
                                                                           f"float64_as_float32: {VIA_RERUN}]")
        assert "attributed" not in by_name(outcomes)["test_exp_wrong_float64"].message
        assert run["declared_traits"] == ["float64_as_float32"]
        assert run["trait_reruns"] == {"candidates": 2, "rerun": 2, "attributed": 1, "by_rule": 0, "not_rerun": 0}
    else:
        assert got == {"test_exp_large_float64": ("pass", ""), "test_exp_wrong_float64": ("fail", ""),
                       "test_add_small_float64": ("pass", "")}
        assert "declared_traits" not in run or run["declared_traits"] == [] and "trait_reruns" not in run
