"""The per-build gate: rules that compare a build against its baseline, and the verdict.

The rules (ci/rules.py) are pure functions over two builds' records, so that they can
be tested without a store, a device or a runner:

    old, new: {test_id: outcome record as a dict}   (keys of core.outcome.Outcome)

(plain dicts, or ``ci.records.Records``, the store's grouped form).  Each rule returns
a ``RuleResult`` with the findings it counted; ``evaluate`` applies the configured mode
(fail / warn / off) and threshold to each and decides the verdict.  Tests confirmed
flaky (see ci/flaky.py) are passed in as ``flaky`` and taken out of the failing
findings: reported, not failing.  Likewise a ``fail`` that a declared trait explains
(kind ``trait:<name>``, collectors/traitfail.py) is left out of ``regression`` and
``new_test_failing`` while both builds declare that trait (reported as ``explained``);
a trait that is new in the build counts in full.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Iterable

from torchconform.ci.config import GateConfig, default_config
from torchconform.ci.records import pairs
# The rules and their inputs, for the callers that import them from here.
from torchconform.ci.rules import (  # noqa: F401
    NO_OP, RULES, RuleResult, _findings, as_record, as_records, declared_traits, error_rows, explained_ids, fixes,
    index, is_missing_op, label, missing_ops, operator_of, pass_rate, record_breakdown, rule_coverage_drop,
    rule_fallback_creep, rule_lost_operator, rule_missing_tests, rule_new_missing_op, rule_new_test_failing,
    rule_numeric_drift, rule_regression, rule_stale_expectations, trait_of,
)
from torchconform.ci.rules import forbidden_ids
from torchconform.core.outcome import FAILED, PASSED


@dataclass
class GateResult:
    old: str
    new: str
    rules: list[RuleResult]
    flaky: list[dict] = field(default_factory=list)
    fixes: dict = field(default_factory=dict)
    # failures left out of regression / new_test_failing: a trait both builds declare explains them
    explained: list[dict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not any(r.status == "fail" for r in self.rules)

    def rule(self, name: str) -> RuleResult:
        for r in self.rules:
            if r.rule == name:
                return r
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {"old": self.old, "new": self.new, "passed": self.passed,
                "rules": [asdict(r) for r in self.rules], "flaky": self.flaky, "fixes": self.fixes,
                "explained": self.explained}


# -- verdict -----------------------------------------------------------------------------------------
def apply_mode(result: RuleResult, mode: str) -> RuleResult:
    result.mode = mode
    if mode == "off":
        result.status = "off"
    elif result.count > result.threshold:
        result.status = mode
    else:
        result.status = "pass"
    return result


def rerun_candidates(result: GateResult) -> list[str]:
    """Tests worth a flaky-confirmation rerun: regressed or new tests that *failed*
    (fail/error/crash/timeout), from rules whose verdict is fail.  A regression to
    skip_backend/missing_op is not rerun: dispatch is deterministic."""
    wanted: list[str] = []
    for name in ("regression", "new_test_failing"):
        r = result.rule(name)
        if r.status != "fail":
            continue
        for f in r.findings:
            if f["new"].split("/")[0] in FAILED and f["test_id"] not in wanted:
                wanted.append(f["test_id"])
    return wanted


# Rules a failure explained by an unchanged declared trait is left out of.
EXCUSING_RULES = ("regression", "new_test_failing")


def evaluate(old, new, config: GateConfig | None = None, flaky: Iterable[dict] = (),
             old_name: str = "baseline", new_name: str = "build", traits: tuple | None = None) -> GateResult:
    """Every configured rule over ``old`` -> ``new`` (Records, or {test_id: record} dicts);
    ``flaky`` lists confirmed flaky tests ({"test_id", "attempts", ...}) that no rule counts as
    failing; ``traits`` = (baseline's, build's) declared traits (default: ``declared_traits``
    of the records alone)."""
    config = config or default_config()
    old, new = as_records(old), as_records(new)
    flaky = list(flaky)
    flaky_ids = frozenset(f["test_id"] for f in flaky)
    if traits is None:
        traits = (declared_traits(old), declared_traits(new))
    excused = explained_ids(new, (set(traits[0]), set(traits[1]))) - flaky_ids
    changed = pairs(old, new)
    # strict mode's fails are judged by their own rule (fallback_forbidden), never rerun as flaky:
    # a rerun without the strict flag would pass and excuse them
    judged_apart = excused | forbidden_ids(new)
    results = []
    for name, fn in RULES.items():
        rule = config.rule(name)
        if rule.mode == "off":
            results.append(RuleResult(name, mode="off", status="off", threshold=0, detail="off"))
            continue
        extra = {"excused": judged_apart} if name in EXCUSING_RULES else {}
        results.append(apply_mode(fn(old, new, rule.params, flaky=flaky_ids, changed=changed, **extra), rule.mode))
    shown = [t for t in excused if t not in old.vid or old.value(t).outcome in PASSED]
    explained = _findings(old, new, shown, trait=lambda t, o, n: trait_of(n))
    return GateResult(old=old_name, new=new_name, rules=results, flaky=flaky, fixes=fixes(old, new, changed),
                      explained=explained)


def regressions_by_operator(result: GateResult) -> dict[str, list[dict]]:
    """Regression findings grouped by operator, most regressed operator first."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for f in result.rule("regression").findings:
        groups[f["operator"]].append(f)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


