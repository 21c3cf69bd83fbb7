"""The gate's rules, config, report and flaky logic over plain dicts (no store, no device)."""
import xml.etree.ElementTree as ET

import pytest

from torchconform.ci import flaky
from torchconform.ci.config import default_config, load_config, parse_config
from torchconform.ci.gate import (
    evaluate, fixes, index, pass_rate, regressions_by_operator, rerun_candidates, rule_coverage_drop,
    rule_fallback_creep, rule_missing_tests, rule_new_missing_op, rule_new_test_failing, rule_regression,
    rule_stale_expectations,
)
from torchconform.ci.report import failing_findings, junit_xml, markdown, write_outputs
from torchconform.core.breakdown import breakdown
from torchconform.core.outcome import Outcome
from torchconform.errors import UserError


def rec(tid, outcome="pass", kind="", missing_op="", fallback_ops=(), op="", repro=""):
    return {"test_id": tid, "outcome": outcome, "kind": kind, "missing_op": missing_op,
            "fallback_ops": list(fallback_ops), "op": op, "repro": repro, "message": f"{outcome} msg"}


def build(*records):
    return index(records)


def params(name):
    return default_config().rule(name).params


OLD = build(
    rec("t::sin_f32", op="sin"), rec("t::sin_f64", op="sin"), rec("t::cos", op="cos"),
    rec("t::exp", op="exp"), rec("t::add", op="add"), rec("t::mul", "pass_fallback", fallback_ops=["aten::mul.out"]),
    rec("t::old_missing", "skip_backend", "missing_op", "aten::erf.out"),
    rec("t::elig", "skip_eligibility"), rec("t::broken", "fail"),
)


def test_regression_groups_by_the_missing_operator_and_keeps_failures():
    new = dict(OLD)
    new.update(build(rec("t::sin_f32", "skip_backend", "missing_op", "aten::sin.out", op="sin"),
                     rec("t::sin_f64", "skip_backend", "missing_op", "aten::sin.out", op="sin"),
                     rec("t::cos", "crash", op="cos"),
                     rec("t::mul", "timeout"),
                     rec("t::elig", "fail")))          # not passing in the baseline: not a regression
    r = rule_regression(OLD, new, params("regression"))
    assert sorted(f["test_id"] for f in r.findings) == ["t::cos", "t::mul", "t::sin_f32", "t::sin_f64"]
    assert r.count == 4 and "aten::sin.out (2)" in r.detail
    res = evaluate(OLD, new)
    groups = regressions_by_operator(res)
    assert list(groups)[0] == "aten::sin.out" and len(groups["aten::sin.out"]) == 2
    assert groups["cos"][0]["new"] == "crash"


def test_regression_outcomes_are_configurable():
    new = dict(OLD, **build(rec("t::cos", "error"), rec("t::add", "skip_backend", "missing_op", "aten::add.out")))
    only_fail = rule_regression(OLD, new, {"max_tests": 0, "outcomes": ["fail"]})
    assert only_fail.count == 0
    with_error = rule_regression(OLD, new, {"max_tests": 0, "outcomes": ["error", "missing_op"]})
    assert {f["test_id"] for f in with_error.findings} == {"t::cos", "t::add"}


def test_new_missing_op_counts_only_operators_new_to_the_build():
    new = dict(OLD, **build(rec("t::sin_f32", "skip_backend", "missing_op", "aten::sin.out"),
                            rec("t::new1", "skip_backend", "missing_op", "aten::sin.out"),
                            rec("t::elig", "skip_backend", "missing_op", "aten::erf.out")))
    r = rule_new_missing_op(OLD, new, params("new_missing_op"))
    assert [(f["operator"], f["tests"], f["was_passing"]) for f in r.findings] == [("aten::sin.out", 2, 1)]


def test_coverage_drop_threshold_in_points_and_ignores_eligibility_skips():
    assert pass_rate(OLD) == pytest.approx(100 * 6 / 8)
    new = dict(OLD, **build(rec("t::add", "fail")), **{f"t::e{i}": rec(f"t::e{i}", "skip_eligibility") for i in range(50)})
    r = rule_coverage_drop(OLD, new, {"max_drop": 10.0})
    assert r.count == pytest.approx(12.5)
    res = evaluate(OLD, new, parse_config({"rules": {"coverage_drop": {"max_drop": 20}}}))
    assert res.rule("coverage_drop").status == "pass"
    res = evaluate(OLD, new, parse_config({"rules": {"coverage_drop": {"max_drop": 12}}}))
    assert res.rule("coverage_drop").status == "fail"
    # A better build never trips it.
    assert rule_coverage_drop(OLD, dict(OLD, **build(rec("t::broken"))), {"max_drop": 0}).count == 0


def test_new_failing_fallback_creep_stale_and_missing_tests():
    new = dict(OLD, **build(rec("t::brand_new", "fail"), rec("t::brand_new_ok"),
                            rec("t::exp", "pass_fallback", fallback_ops=["aten::exp.out"]),
                            rec("t::xp", "xpass")))
    assert [f["test_id"] for f in rule_new_test_failing(OLD, new, params("new_test_failing")).findings] == ["t::brand_new"]
    creep = rule_fallback_creep(OLD, new, params("fallback_creep"))
    assert [(f["test_id"], f["fallback_ops"]) for f in creep.findings] == [("t::exp", ["aten::exp.out"])]
    assert [f["test_id"] for f in rule_stale_expectations(OLD, new, params("stale_expectations")).findings] == ["t::xp"]
    half = {k: v for i, (k, v) in enumerate(sorted(OLD.items())) if i % 2}
    gone = rule_missing_tests(OLD, half, {"max_fraction": 0.0})
    assert len(gone.findings) == len(OLD) - len(half) and gone.count == pytest.approx(5 / 9, abs=1e-5)
    assert evaluate(OLD, half, parse_config({"rules": {"missing_tests": {"max_fraction": 0.6}}})).rule("missing_tests").status == "pass"


def test_modes_decide_the_verdict():
    new = dict(OLD, **build(rec("t::broken", "xpass")))
    res = evaluate(OLD, new)
    assert res.passed and res.rule("stale_expectations").status == "warn"
    res = evaluate(OLD, new, parse_config({"rules": {"stale_expectations": "fail"}}))
    assert not res.passed
    regressed = dict(OLD, **build(rec("t::add", "fail")))
    assert not evaluate(OLD, regressed).passed
    off = evaluate(OLD, regressed, parse_config({"rules": {"regression": "off", "coverage_drop": "off"}}))
    assert off.passed and off.rule("regression").status == "off"
    relaxed = evaluate(OLD, regressed, parse_config({"rules": {"regression": {"max_tests": 1}, "coverage_drop": "warn"}}))
    assert relaxed.passed and relaxed.rule("coverage_drop").status == "warn"


def test_flaky_tests_do_not_fail_and_are_reported():
    new = dict(OLD, **build(rec("t::add", "fail"), rec("t::sin_f32", "skip_backend", "missing_op", "aten::sin.out")))
    res = evaluate(OLD, new)
    # Only the real failure is worth a rerun; a missing kernel is deterministic.
    assert rerun_candidates(res) == ["t::add"]
    entry = {"test_id": "t::add", "flaky": True, "attempts": [{"attempt": 1, "outcome": "fail"}, {"attempt": 2, "outcome": "pass"}]}
    res2 = evaluate(OLD, new, flaky=[entry])
    assert [f["test_id"] for f in res2.rule("regression").findings] == ["t::sin_f32"]
    only_flaky = dict(OLD, **build(rec("t::add", "fail")))
    res3 = evaluate(OLD, only_flaky, flaky=[entry])
    assert res3.passed and res3.flaky == [entry]


def test_fixes_report_tests_ops_and_native_returns():
    new = dict(OLD, **build(rec("t::broken"), rec("t::old_missing"), rec("t::mul")))
    fx = fixes(OLD, new)
    assert {f["test_id"] for f in fx["tests"]} == {"t::broken", "t::old_missing"}
    assert fx["ops_implemented"] == [{"operator": "aten::erf.out", "tests": 1}]
    assert [f["test_id"] for f in fx["now_native"]] == ["t::mul"]


def test_config_defaults_overrides_and_errors(tmp_path):
    shipped = load_config()
    assert shipped.rule("regression").mode == "fail" and shipped.flaky["reruns"] == 3
    assert shipped.rule("stale_expectations").mode == "warn"
    for text, needle in [
        ("rules: [oops", "g.yaml:1: invalid YAML"),
        ("rules:\n  regresion: fail\n", "unknown rule 'regresion'"),
        ("rules:\n  regression: {mode: block}\n", "mode 'block'"),
        ("rules:\n  regression: {max_test: 1}\n", "unknown key 'max_test'"),
        ("rules:\n  coverage_drop: {max_drop: -1}\n", "max_drop"),
        ("rules:\n  regression: {outcomes: [explode]}\n", "'explode'"),
        ("flaky: {reruns: two}\n", "flaky.reruns"),
        ("- a list\n", "top level"),
    ]:
        path = tmp_path / "g.yaml"
        path.write_text(text)
        with pytest.raises(UserError) as info:
            load_config(str(path))
        msg = str(info.value)
        assert needle in msg and str(path) in msg and "\n" not in msg, msg
    with pytest.raises(UserError, match="cannot read gate config"):
        load_config(str(tmp_path / "absent.yaml"))


def test_markdown_and_junit_carry_every_section(tmp_path):
    new = dict(OLD, **build(rec("t::sin_f32", "skip_backend", "missing_op", "aten::sin.out", op="sin"),
                            rec("t::cos", "fail", op="cos", repro="python -m pytest /abs/t.py::cos --tc-device refdev"),
                            rec("t::exp", "pass_fallback", fallback_ops=["aten::exp.out"]),
                            rec("t::broken"), rec("t::xp", "xpass")))
    del new["t::add"]
    entry = {"test_id": "t::flk", "flaky": True, "attempts": [{"attempt": 1, "outcome": "fail"}, {"attempt": 2, "outcome": "pass"}]}
    res = evaluate(OLD, new, flaky=[entry], old_name="A", new_name="B")
    to_b = lambda recs, name: breakdown(name, (Outcome.from_dict(r) for r in recs.values()))
    text = markdown(res, to_b(OLD, "A"), to_b(new, "B"), device="refdev")
    for needle in ("gate: FAILED", "## Rules", "build B:", "Delta against the baseline",
                   "### `aten::sin.out` (1 tests)", "## New missing operators", "`aten::exp.out`",
                   "## Missing tests (1)", "t::add", "## Flaky tests", "t::flk", "## Fixes", "t::broken",
                   "## Repro commands", "python -m pytest /abs/t.py::cos --tc-device refdev",
                   "python -m pytest t::sin_f32 --tc-device refdev", "stale_expectations | warn | WARN"):
        assert needle in text, needle
    # One repro per failing test, none for warn-only findings.
    assert {f["test_id"] for f in failing_findings(res)} == {"t::sin_f32", "t::cos", "t::exp"}
    root = ET.fromstring(junit_xml(res))
    suite = root.find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["regression"].find("failure") is not None
    assert cases["stale_expectations"].find("failure") is None
    assert "t::flk" in cases and suite.get("failures") == str(
        sum(1 for r in res.rules if r.status == "fail"))
    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    written = write_outputs(text, junit_xml(res), str(tmp_path / "s.md"), str(tmp_path / "j.xml"),
                            environ={"GITHUB_STEP_SUMMARY": str(step)})
    assert len(written) == 3
    assert step.read_text().startswith("earlier step\n# torchconform gate: FAILED")


def test_rerun_command_comes_from_the_repro_and_scrubs_nothing_it_needs():
    r = rec("t.py::test_x", "fail",
            repro="TORCHCONFORM_REFDEV_PROFILE=/p/b.yaml /venv/bin/python -m pytest '/abs/t.py::test_x[a b]' "
                  "--tc-device refdev --tc-profile /s/profile.yaml")
    env, argv = flaky.rerun_command(r)
    assert env == {"TORCHCONFORM_REFDEV_PROFILE": "/p/b.yaml"}
    assert argv[:4] == ["/venv/bin/python", "-m", "pytest", "/abs/t.py::test_x[a b]"]
    assert "--tc-device" in argv and "no:xdist" in argv
    env, argv = flaky.rerun_command(rec("t.py::test_y", "fail"), device="cpu")
    assert env == {} and argv[3:6] == ["t.py::test_y", "--tc-device", "cpu"]
    with pytest.raises(ValueError):
        flaky.rerun_command(rec("t.py::test_y", "fail"))


def test_confirm_numbers_attempts_and_detects_flakes():
    script = {"a": ["fail", "pass", "fail"], "b": ["fail", "fail", "fail"]}
    stored = []

    def runner(record, attempt):
        return Outcome(test_id="/abs/" + record["test_id"], outcome=script[record["test_id"]][attempt - 2],
                       attempt=attempt)

    confs = flaky.confirm([rec("a", "fail", op="x"), rec("b", "crash")], 3, runner, on_attempt=stored.append)
    assert [c.flaky for c in confs] == [True, False]
    assert [o.attempt for o in stored] == [2, 3, 4, 2, 3, 4]
    assert all(o.test_id in ("a", "b") for o in stored) and stored[0].op == "x"
    assert confs[0].to_dict()["attempts"][0] == {"attempt": 1, "outcome": "fail"}
