"""Strict no-fallback mode (issue 30, item 5): ``run --no-fallback`` makes a test that ran an
operator through the CPU fallback a ``fail`` of kind ``fallback_forbidden``; the breakdown
counts them apart and the gate's ``fallback_forbidden`` rule fails on them.  The run
end to end on refdev: tests/test_neuron_tracking.py (strict mode) and the report's figures."""
import pytest

from torchconform.ci import gate
from torchconform.ci.config import load_config
from torchconform.cli.main import build_parser
from torchconform.collectors import strict
from torchconform.core.breakdown import breakdown, format_breakdown
from torchconform.core.outcome import FALLBACK_FORBIDDEN, Outcome, check_outcome
from torchconform.collectors.settings import no_fallback_flag
from torchconform.errors import UserError

OPS = ["aten::cumsum.out", "aten::sort.values_stable"]


@pytest.mark.parametrize("outcome", ["pass", "pass_fallback"])
def test_a_passing_test_with_fallback_ops_is_forbidden(outcome):
    v = strict.apply({"outcome": outcome, "message": "compiled: ..."}, OPS, "tracking x.get_fallback_ops()", True)
    assert (v["outcome"], v["kind"]) == ("fail", FALLBACK_FORBIDDEN)
    assert "aten::cumsum.out, aten::sort.values_stable" in v["message"] and "x.get_fallback_ops()" in v["message"]


@pytest.mark.parametrize("outcome", ["fail", "error", "crash", "skip_backend", "xfail", "xpass"])
def test_other_outcomes_keep_their_own_cause(outcome):
    verdict = {"outcome": outcome, "message": "own"}
    assert strict.apply(verdict, OPS, "dispatcher", True) == verdict


def test_without_strict_mode_or_fallback_ops_nothing_changes():
    assert strict.apply({"outcome": "pass", "message": ""}, [], "dispatcher", True) == {"outcome": "pass",
                                                                                      "message": ""}
    v = strict.apply({"outcome": "pass_fallback", "message": ""}, OPS, "counter m:f", False)
    assert v == {"outcome": "pass_fallback", "message": "fallback evidence: counter m:f"}
    # a note of its own (compile statistics, timings) is never replaced
    assert strict.apply({"outcome": "pass_fallback", "message": "timing: x"}, OPS, "counter", False)["message"] \
        == "timing: x"


def test_fallback_forbidden_is_a_kind_of_fail_only():
    check_outcome("fail", FALLBACK_FORBIDDEN)
    with pytest.raises(ValueError):
        check_outcome("pass", FALLBACK_FORBIDDEN)


def _records():
    normal = [Outcome("t1", "pass_fallback", fallback_ops=OPS[:1]), Outcome("t2", "pass"),
              Outcome("t3", "pass_fallback", fallback_ops=OPS), Outcome("t4", "fail", message="own")]
    forbidden = [Outcome(o.test_id, "fail", kind=FALLBACK_FORBIDDEN, fallback_ops=o.fallback_ops,
                         message=strict.forbidden_message(o.fallback_ops)) if o.outcome == "pass_fallback" else o
                 for o in normal]
    return normal, forbidden


def test_the_breakdown_counts_them_apart():
    normal, forbidden = _records()
    b = breakdown("strict", forbidden)
    assert b["outcomes"]["fail"] == 3 and b["fail_kinds"] == {FALLBACK_FORBIDDEN: 2}
    text = format_breakdown(b)
    assert "fail 3" in text and "of which fallback forbidden (strict mode) 2" in text
    assert "declared traits" not in text
    assert breakdown("normal", normal)["pass_kinds"]["fallback"] == b["fail_kinds"][FALLBACK_FORBIDDEN]


def test_the_gate_fails_on_them_and_names_the_operators():
    normal, forbidden = _records()
    result = gate.evaluate({o.test_id: o.to_dict() for o in normal}, {o.test_id: o.to_dict() for o in forbidden})
    rule = result.rule("fallback_forbidden")
    assert rule.status == "fail" and rule.count == 2 and not result.passed
    assert {f["test_id"] for f in rule.findings} == {"t1", "t3"}
    assert "aten::cumsum.out (2)" in rule.detail
    # judged by their own rule: not regressions, not rerun as flaky
    assert result.rule("regression").count == 0 and gate.rerun_candidates(result) == []


def test_a_build_without_them_passes_the_rule():
    normal, _ = _records()
    records = {o.test_id: o.to_dict() for o in normal}
    assert gate.evaluate(records, records).rule("fallback_forbidden").status == "pass"


def test_the_shipped_gate_config_fails_on_them():
    rule = load_config().rule("fallback_forbidden")
    assert rule.mode == "fail" and rule.params == {"max_tests": 0}


def test_run_has_the_flag_and_the_plugin_reads_it():
    args = build_parser().parse_args(["run", "--no-fallback"])
    assert args.no_fallback is True
    assert no_fallback_flag("1") and not no_fallback_flag("") and not no_fallback_flag("0")
    with pytest.raises(UserError, match="not a switch"):
        no_fallback_flag("maybe")
