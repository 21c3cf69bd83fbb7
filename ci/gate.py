"""The per-build gate: rules that compare a build against its baseline.

Everything here is a pure function over plain dicts so that it can be tested
without a store, a device or a runner:

    old, new: {test_id: outcome record as a dict}   (keys of collectors.outcome.Outcome)

Each rule returns a ``RuleResult`` with the findings it counted; ``evaluate``
applies the configured mode (fail / warn / off) and threshold to each and
decides the verdict.  Tests confirmed flaky (see ci/flaky.py) are passed in as
``flaky`` and taken out of the failing findings: reported, not failing.  Likewise a
``fail`` that a declared trait explains (kind ``trait:<name>``, collectors/traitfail.py)
is left out of ``regression`` and ``new_test_failing`` while both builds declare that
trait (reported as ``explained``); a trait that is new in the build counts in full.
"""
from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

from torchconform.ci.config import GateConfig, default_config
from torchconform.collectors.breakdown import breakdown_of_counts
from torchconform.collectors.breakdown import pass_rate as breakdown_pass_rate
from torchconform.collectors.numeric import drift
from torchconform.collectors.outcome import (
    FAIL, FAILED, MISSING_OP, PASS, PASS_FALLBACK, PASSED, SKIP_BACKEND, TRAIT_KIND_PREFIX, XPASS, Outcome,
)

NO_OP = "(no operator)"


@dataclass
class RuleResult:
    rule: str
    mode: str = "fail"
    count: float = 0              # what the threshold is compared with
    threshold: float = 0
    findings: list[dict] = field(default_factory=list)
    detail: str = ""              # one line for the rules table
    status: str = "pass"          # pass | warn | fail | off

    @property
    def tripped(self) -> bool:
        return self.status in ("warn", "fail")


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


# -- inputs ------------------------------------------------------------------------------
_FIELDS = tuple(f.name for f in dataclasses.fields(Outcome))


def as_record(o) -> dict:
    """An Outcome or a dict, as a plain dict with every outcome-record key present."""
    if isinstance(o, Outcome):
        # Not dataclasses.asdict: its deep copy dominates loading a 154k-outcome build.
        rec = {name: getattr(o, name) for name in _FIELDS}
        rec["fallback_ops"] = list(o.fallback_ops or ())
        return rec
    # Through Outcome so that a malformed record fails here, not deep in a rule.
    return Outcome.from_dict({k: v for k, v in o.items() if v is not None}).to_dict()


def index(outcomes: Iterable) -> dict[str, dict]:
    """{test_id: record}; a later record of the same test wins (like the store's latest)."""
    return {rec["test_id"]: rec for rec in map(as_record, outcomes)}


def label(rec: dict | None) -> str:
    """skip_backend/missing_op style label; 'absent' for a test not in the build."""
    if rec is None:
        return "absent"
    return f"{rec['outcome']}/{rec['kind']}" if rec.get("kind") else rec["outcome"]


def is_missing_op(rec: dict) -> bool:
    return rec["outcome"] == SKIP_BACKEND and rec.get("kind") == MISSING_OP


def operator_of(rec: dict) -> str:
    """The operator a finding is grouped under: the missing overload the dispatcher
    named when there is one, else the OpInfo/model name of the test."""
    if is_missing_op(rec) and rec.get("missing_op"):
        return rec["missing_op"]
    return rec.get("op") or NO_OP


def _finding(test_id: str, old: dict | None, new: dict | None, **extra) -> dict:
    rec = new or old or {}
    f = {"test_id": test_id, "op": rec.get("op", ""), "operator": operator_of(new) if new else operator_of(old),
         "old": label(old), "new": label(new), "message": (new or {}).get("message", ""),
         "repro": (new or old or {}).get("repro", "")}
    f.update(extra)
    return f


def _by_test(findings: list[dict]) -> list[dict]:
    # Sort the (few) findings, never the (many) records: sorting 154k test ids per rule dominated.
    return sorted(findings, key=lambda f: f["test_id"])


def pass_rate(records: dict[str, dict]) -> float | None:
    """collectors.breakdown.pass_rate of the records, in percent (None when no test ran on the device)."""
    rate = breakdown_pass_rate(record_breakdown("", records))
    return None if rate is None else 100.0 * rate


# -- rules -------------------------------------------------------------------------------------
def _regresses_to(rec: dict, targets: set[str]) -> bool:
    if rec["outcome"] == SKIP_BACKEND:
        return rec.get("kind") in targets
    return rec["outcome"] in targets


def trait_of(rec: dict) -> str:
    """The declared trait that explains a failure (kind trait:<name>), or ""."""
    kind = rec.get("kind") or ""
    return kind[len(TRAIT_KIND_PREFIX):] if rec["outcome"] == FAIL and kind.startswith(TRAIT_KIND_PREFIX) else ""


def declared_traits(records: dict[str, dict], recorded=()) -> set[str]:
    """The traits a build declared: those it recorded (builds' ``declared_traits`` metadata)
    plus any a failure of it was attributed to (a build stored before that metadata)."""
    return set(recorded or ()) | {t for t in map(trait_of, records.values()) if t}


def explained_ids(new: dict[str, dict], traits: tuple[set, set]) -> frozenset:
    """Failures of ``new`` a trait explains that both builds declare: the trait did not change."""
    old_traits, new_traits = traits
    return frozenset(tid for tid, r in new.items() if (t := trait_of(r)) and t in old_traits and t in new_traits)


def rule_regression(old, new, params, flaky=frozenset(), excused=frozenset()) -> RuleResult:
    targets = set(params.get("outcomes", ()))
    found = []
    for tid, n in new.items():
        o = old.get(tid)
        if o is not None and o["outcome"] in PASSED and _regresses_to(n, targets) and tid not in flaky \
                and tid not in excused:
            found.append(_finding(tid, o, n, missing_op=n.get("missing_op", "")))
    found = _by_test(found)
    by_op = Counter(f["operator"] for f in found)
    detail = ", ".join(f"{op} ({n})" for op, n in sorted(by_op.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    return RuleResult("regression", count=len(found), threshold=params["max_tests"], findings=found,
                      detail=f"{len(found)} regressed tests" + (f": {detail}" if detail else ""))


def record_breakdown(build: str, records: dict[str, dict]) -> dict:
    """The seed's breakdown (collectors.breakdown shape) of a {test_id: record} map."""
    return breakdown_of_counts(build, ((r["outcome"], r.get("kind") or "", r.get("missing_op") or "", 1)
                                       for r in records.values()))


def missing_ops(records: dict[str, dict]) -> Counter:
    """{operator overload: tests it blocks} over the records' missing-op skips."""
    return Counter(r["missing_op"] for r in records.values() if is_missing_op(r) and r.get("missing_op"))


def rule_new_missing_op(old, new, params, flaky=frozenset()) -> RuleResult:
    before = missing_ops(old)
    blocked: dict[str, list[str]] = defaultdict(list)   # one pass, not one per operator
    for tid, r in new.items():
        if is_missing_op(r) and r.get("missing_op") and r["missing_op"] not in before:
            blocked[r["missing_op"]].append(tid)
    found = []
    for op, tests in sorted(blocked.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        n = len(tests)
        tests.sort()
        # Blocked tests that passed before are the operator's regressions.
        was_passing = [t for t in tests if t in old and old[t]["outcome"] in PASSED]
        found.append({"operator": op, "tests": n, "test_ids": tests, "was_passing": len(was_passing)})
    return RuleResult("new_missing_op", count=len(found), threshold=params["max_ops"], findings=found,
                      detail=", ".join(f["operator"] for f in found) or "none")


def rule_coverage_drop(old, new, params, flaky=frozenset()) -> RuleResult:
    # A confirmed flaky test passed on a rerun: count it as passing, or one flake
    # in a small selection would trip the coverage rule it was excused from.
    if flaky:
        new = {tid: (dict(r, outcome=PASS) if tid in flaky else r) for tid, r in new.items()}
    before, now = pass_rate(old), pass_rate(new)
    if before is None or now is None:
        return RuleResult("coverage_drop", count=0, threshold=params["max_drop"],
                          detail="no eligible outcomes to compare")
    drop = round(before - now, 3)
    finding = {"old_rate": round(before, 3), "new_rate": round(now, 3), "drop": drop}
    return RuleResult("coverage_drop", count=max(drop, 0.0), threshold=params["max_drop"],
                      findings=[finding] if drop > 0 else [],
                      detail=f"pass rate {before:.2f}% -> {now:.2f}% ({round(now - before, 2) + 0.0:+.2f} points)")


def rule_new_test_failing(old, new, params, flaky=frozenset(), excused=frozenset()) -> RuleResult:
    found = _by_test([_finding(tid, None, n) for tid, n in new.items()
                      if tid not in old and n["outcome"] in FAILED and tid not in flaky and tid not in excused])
    return RuleResult("new_test_failing", count=len(found), threshold=params["max_tests"], findings=found,
                      detail=f"{len(found)} new tests failing")


def rule_fallback_creep(old, new, params, flaky=frozenset()) -> RuleResult:
    found = []
    for tid, n in new.items():
        o = old.get(tid)
        if o is not None and o["outcome"] == PASS and n["outcome"] == PASS_FALLBACK:
            new_ops = sorted(set(n.get("fallback_ops") or ()) - set(o.get("fallback_ops") or ()))
            found.append(_finding(tid, o, n, fallback_ops=new_ops or list(n.get("fallback_ops") or ())))
    found = _by_test(found)
    ops = Counter(op for f in found for op in f["fallback_ops"])
    detail = ", ".join(f"{op} ({n})" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    return RuleResult("fallback_creep", count=len(found), threshold=params["max_tests"], findings=found,
                      detail=f"{len(found)} tests now on CPU fallback" + (f": {detail}" if detail else ""))


def rule_stale_expectations(old, new, params, flaky=frozenset()) -> RuleResult:
    found = _by_test([_finding(tid, old.get(tid), n) for tid, n in new.items() if n["outcome"] == XPASS])
    return RuleResult("stale_expectations", count=len(found), threshold=params["max_tests"], findings=found,
                      detail=f"{len(found)} unexpected passes (xpass)")


def rule_missing_tests(old, new, params, flaky=frozenset()) -> RuleResult:
    gone = sorted(tid for tid in old if tid not in new)
    fraction = len(gone) / len(old) if old else 0.0
    found = [_finding(tid, old[tid], None) for tid in gone]
    return RuleResult("missing_tests", count=round(fraction, 6), threshold=params["max_fraction"], findings=found,
                      detail=f"{len(gone)} of {len(old)} baseline tests absent ({100 * fraction:.1f}%)")


def error_rows(records: dict[str, dict]) -> dict[str, tuple]:
    """{test_id: (op, dtype, outcome, max_abs_err, max_rel_err)} of the records with errors
    (collectors.numeric.drift's input)."""
    return {tid: (r["op"], r.get("dtype") or "", r["outcome"], r["max_abs_err"], r.get("max_rel_err"))
            for tid, r in records.items() if r.get("max_abs_err") is not None}


def rule_numeric_drift(old, new, params, flaky=frozenset()) -> RuleResult:
    """Per (op, dtype): the largest error of the tests that pass in both builds grew by more
    than ``factor`` (absolute error floored at ``min_abs``, relative at ``min_rel``):
    results sliding toward the tolerance, seen before tests start failing."""
    rows = drift(error_rows(old), error_rows(new), params["min_abs"], params["min_rel"])
    factor, found = params["factor"], []
    for d in rows:
        grew = [m for m in ("abs", "rel") if d[f"{m}_growth"] > factor]
        if not grew:
            continue
        tid = d["test_id"]
        found.append({"test_id": tid, "op": d["op"], "dtype": d["dtype"], "operator": d["op"],
                      "old": f"{label(old[tid])}, max " + ", ".join(f"{m} err {d['old_' + m]:.3g}" for m in grew),
                      "new": f"{label(new[tid])}, max " + ", ".join(f"{m} err {d['new_' + m]:.3g}" for m in grew),
                      "message": ", ".join(f"{m} err {d['old_' + m]:.3g} -> {d['new_' + m]:.3g} "
                                           f"({_times(d[m + '_growth'])})" for m in grew),
                      "repro": new[tid].get("repro", ""),
                      **{k: d[k] for k in ("old_abs", "new_abs", "abs_growth", "old_rel", "new_rel", "rel_growth")}})
    detail = f"{len(found)} op x dtype errors grew over {factor:g}x"
    if found:
        detail += ": " + "; ".join(f"{f['op']} {f['dtype']}: {f['message']}" for f in found[:5])
    return RuleResult("numeric_drift", count=len(found), threshold=params["max_pairs"], findings=found, detail=detail)


def _times(growth: float) -> str:
    return "was exact" if growth == float("inf") else f"{growth:.3g}x"


RULES: dict[str, Callable[..., RuleResult]] = {
    "regression": rule_regression,
    "new_missing_op": rule_new_missing_op,
    "coverage_drop": rule_coverage_drop,
    "new_test_failing": rule_new_test_failing,
    "fallback_creep": rule_fallback_creep,
    "stale_expectations": rule_stale_expectations,
    "missing_tests": rule_missing_tests,
    "numeric_drift": rule_numeric_drift,
    "lost_operator": None,  # defined below (reads the censuses, not the outcome records)
}


# -- fixes (reported, never failing) -------------------------------------------------------------
def fixes(old: dict, new: dict) -> dict:
    """What got better: tests now passing that failed or were backend-skipped, operators
    no longer missing, tests back from CPU fallback to native."""
    fixed = [_finding(tid, old[tid], n) for tid, n in new.items()
             if tid in old and n["outcome"] in PASSED
             and (old[tid]["outcome"] in FAILED or old[tid]["outcome"] == SKIP_BACKEND)]
    native = [_finding(tid, old[tid], n, fallback_ops=list(old[tid].get("fallback_ops") or ()))
              for tid, n in new.items()
              if tid in old and old[tid]["outcome"] == PASS_FALLBACK and n["outcome"] == PASS]
    before, now = missing_ops(old), missing_ops(new)
    ops = [{"operator": op, "tests": n} for op, n in sorted(before.items(), key=lambda kv: (-kv[1], kv[0]))
           if op not in now]
    return {"tests": _by_test(fixed), "now_native": _by_test(native), "ops_implemented": ops}


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


def evaluate(old: dict, new: dict, config: GateConfig | None = None, flaky: Iterable[dict] = (),
             old_name: str = "baseline", new_name: str = "build", traits: tuple | None = None) -> GateResult:
    """Every configured rule over ``old`` -> ``new``; ``flaky`` lists confirmed flaky tests
    ({"test_id", "attempts", ...}) that no rule counts as failing; ``traits`` = (baseline's,
    build's) declared traits (default: ``declared_traits`` of the records alone)."""
    config = config or default_config()
    flaky = list(flaky)
    flaky_ids = frozenset(f["test_id"] for f in flaky)
    if traits is None:
        traits = (declared_traits(old), declared_traits(new))
    excused = explained_ids(new, (set(traits[0]), set(traits[1]))) - flaky_ids
    results = []
    for name, fn in RULES.items():
        rule = config.rule(name)
        if rule.mode == "off":
            results.append(RuleResult(name, mode="off", status="off", threshold=0, detail="off"))
            continue
        extra = {"excused": excused} if name in EXCUSING_RULES else {}
        results.append(apply_mode(fn(old, new, rule.params, flaky=flaky_ids, **extra), rule.mode))
    explained = _by_test([_finding(tid, old.get(tid), new[tid], trait=trait_of(new[tid])) for tid in excused
                          if tid not in old or old[tid]["outcome"] in PASSED])
    return GateResult(old=old_name, new=new_name, rules=results, flaky=flaky, fixes=fixes(old, new),
                      explained=explained)


def regressions_by_operator(result: GateResult) -> dict[str, list[dict]]:
    """Regression findings grouped by operator, most regressed operator first."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for f in result.rule("regression").findings:
        groups[f["operator"]].append(f)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


# -- lost_operator (torchconform.census) -------------------------------------------------
def rule_lost_operator(old, new, params, flaky=frozenset()) -> RuleResult:
    """An operator that ran on the baseline's device (census: native, autograd, fallback or a
    covered composite) and does not on the build's.  The censuses come from
    census.diff.gate_context(store, baseline, build); without both, the rule passes quietly."""
    from torchconform.census.diff import lost_operator_findings

    found, detail = lost_operator_findings()
    return RuleResult("lost_operator", count=len(found or ()), threshold=params["max_ops"],
                      findings=found or [], detail=detail)


RULES["lost_operator"] = rule_lost_operator
