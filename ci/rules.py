"""The gate's rules: each compares a build's records with its baseline's and counts findings.

    old, new: {test_id: outcome record as a dict}   (keys of core.outcome.Outcome)

given as plain dicts or as ``ci.records.Records`` (the same mapping, grouped by what
the records say, as the store loads it: rules then work per distinct value).  Each
rule returns a ``RuleResult``; ci/gate.py applies modes and thresholds and decides.
"""
from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable

from torchconform.ci.records import Records, Value, pairs, value_counter
from torchconform.core.breakdown import breakdown_of_counts
from torchconform.core.breakdown import pass_rate as breakdown_pass_rate
from torchconform.core.numeric import drift
from torchconform.core.outcome import (
    FAIL, FAILED, FALLBACK_FORBIDDEN, MISSING_OP, PASS, PASS_FALLBACK, PASSED, SKIP_BACKEND, TRAIT_KIND_PREFIX,
    XPASS, Outcome,
)
from torchconform.census.diff import lost_operator_findings
from torchconform.ci.claimsgate import claim_findings
from torchconform.ci.perfgate import perf_findings

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


def as_records(records) -> Records:
    """``records`` as Records (ci/records.py): plain {test_id: record} dicts are grouped."""
    return records if isinstance(records, Records) else Records.from_dicts(records)


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


# -- rules -------------------------------------------------------------------------------------
# Each rule takes two Records (ci/records.py; plain dicts are turned into them) and
# ``changed``: the tests whose value changed or that are new, by (old value, new value)
# (records.pairs).  Rules decide per distinct value and build full records only for the
# tests their findings name.
def _regresses_to(v: Value, targets: set[str]) -> bool:
    if v.outcome == SKIP_BACKEND:
        return v.kind in targets
    return v.outcome in targets


def _value_trait(v: Value) -> str:
    return v.kind[len(TRAIT_KIND_PREFIX):] if v.outcome == FAIL and v.kind.startswith(TRAIT_KIND_PREFIX) else ""


def _value_missing(v: Value) -> str:
    """The operator a missing-op skip names ("" for any other value)."""
    return v.missing_op if v.outcome == SKIP_BACKEND and v.kind == MISSING_OP else ""


def trait_of(rec: dict) -> str:
    """The declared trait that explains a failure (kind trait:<name>), or ""."""
    kind = rec.get("kind") or ""
    return kind[len(TRAIT_KIND_PREFIX):] if rec["outcome"] == FAIL and kind.startswith(TRAIT_KIND_PREFIX) else ""


def declared_traits(records, recorded=()) -> set[str]:
    """The traits a build declared: those it recorded (builds' ``declared_traits`` metadata)
    plus any a failure of it was attributed to (a build stored before that metadata)."""
    records = as_records(records)
    return set(recorded or ()) | {t for v, _ in records.counts() if (t := _value_trait(v))}


def explained_ids(new, traits: tuple[set, set]) -> frozenset:
    """Failures of ``new`` a trait explains that both builds declare: the trait did not change."""
    old_traits, new_traits = traits
    both = old_traits & new_traits
    return frozenset(as_records(new).where(lambda v: _value_trait(v) in both - {""}))


def _changed(old: Records, new: Records, changed) -> dict:
    return pairs(old, new) if changed is None else changed


def _findings(old: Records, new: Records, tids: list[str], **extra) -> list[dict]:
    """One finding per test id (both builds' records loaded in one batch each), by test id."""
    before = old.load(t for t in tids if t in old.vid)
    after = new.load(t for t in tids if t in new.vid)
    return _by_test([_finding(t, before.get(t), after.get(t), **{k: f(t, before.get(t), after.get(t))
                                                                 for k, f in extra.items()})
                     for t in tids])


def rule_regression(old, new, params, flaky=frozenset(), excused=frozenset(), changed=None) -> RuleResult:
    old, new = as_records(old), as_records(new)
    targets = set(params.get("outcomes", ()))
    tids = [t for (ov, nv), ts in _changed(old, new, changed).items()
            if ov is not None and old.values[ov].outcome in PASSED and _regresses_to(new.values[nv], targets)
            for t in ts if t not in flaky and t not in excused]
    found = _findings(old, new, tids, missing_op=lambda t, o, n: n.get("missing_op", ""))
    by_op = Counter(f["operator"] for f in found)
    detail = ", ".join(f"{op} ({n})" for op, n in sorted(by_op.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    return RuleResult("regression", count=len(found), threshold=params["max_tests"], findings=found,
                      detail=f"{len(found)} regressed tests" + (f": {detail}" if detail else ""))


def record_breakdown(build: str, records) -> dict:
    """The seed's breakdown (core.breakdown shape) of a {test_id: record} map."""
    return breakdown_of_counts(build, ((v.outcome, v.kind, v.missing_op, n) for v, n in as_records(records).counts()))


def missing_ops(records) -> Counter:
    """{operator overload: tests it blocks} over the records' missing-op skips."""
    return value_counter(as_records(records), lambda v: _value_missing(v) or None)


def rule_new_missing_op(old, new, params, flaky=frozenset(), changed=None) -> RuleResult:
    old, new = as_records(old), as_records(new)
    before = missing_ops(old)
    blocked: dict[str, list[str]] = defaultdict(list)   # one pass, not one per operator
    for tid in new.where(lambda v: bool(_value_missing(v)) and v.missing_op not in before):
        blocked[new.value(tid).missing_op].append(tid)
    found = []
    for op, tests in sorted(blocked.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        tests.sort()
        # Blocked tests that passed before are the operator's regressions.
        was_passing = [t for t in tests if t in old.vid and old.value(t).outcome in PASSED]
        found.append({"operator": op, "tests": len(tests), "test_ids": tests, "was_passing": len(was_passing)})
    return RuleResult("new_missing_op", count=len(found), threshold=params["max_ops"], findings=found,
                      detail=", ".join(f["operator"] for f in found) or "none")


def _pass_rate(records: Records, passing=frozenset()) -> float | None:
    """pass_rate in percent, with the tests of ``passing`` counted as passes (None: no test ran)."""
    counts = Counter()
    for v, n in records.counts():
        counts[(v.outcome, v.kind, v.missing_op)] += n
    for tid in passing:
        if tid in records:
            v = records.value(tid)
            counts[(v.outcome, v.kind, v.missing_op)] -= 1
            counts[(PASS, "", "")] += 1
    rate = breakdown_pass_rate(breakdown_of_counts("", ((*k, n) for k, n in counts.items() if n)))
    return None if rate is None else 100.0 * rate


def pass_rate(records) -> float | None:
    """core.breakdown.pass_rate of the records, in percent (None when no test ran on the device)."""
    return _pass_rate(as_records(records))


def rule_coverage_drop(old, new, params, flaky=frozenset(), changed=None) -> RuleResult:
    old, new = as_records(old), as_records(new)
    # A confirmed flaky test passed on a rerun: count it as passing, or one flake
    # in a small selection would trip the coverage rule it was excused from.
    before, now = _pass_rate(old), _pass_rate(new, flaky)
    if before is None or now is None:
        return RuleResult("coverage_drop", count=0, threshold=params["max_drop"],
                          detail="no eligible outcomes to compare")
    drop = round(before - now, 3)
    finding = {"old_rate": round(before, 3), "new_rate": round(now, 3), "drop": drop}
    return RuleResult("coverage_drop", count=max(drop, 0.0), threshold=params["max_drop"],
                      findings=[finding] if drop > 0 else [],
                      detail=f"pass rate {before:.2f}% -> {now:.2f}% ({round(now - before, 2) + 0.0:+.2f} points)")


def rule_new_test_failing(old, new, params, flaky=frozenset(), excused=frozenset(), changed=None) -> RuleResult:
    old, new = as_records(old), as_records(new)
    tids = [t for (ov, nv), ts in _changed(old, new, changed).items()
            if ov is None and new.values[nv].outcome in FAILED for t in ts if t not in flaky and t not in excused]
    found = _findings(old, new, tids)
    return RuleResult("new_test_failing", count=len(found), threshold=params["max_tests"], findings=found,
                      detail=f"{len(found)} new tests failing")


def rule_fallback_creep(old, new, params, flaky=frozenset(), changed=None) -> RuleResult:
    old, new = as_records(old), as_records(new)
    tids = [t for (ov, nv), ts in _changed(old, new, changed).items()
            if ov is not None and old.values[ov].outcome == PASS and new.values[nv].outcome == PASS_FALLBACK
            for t in ts]

    def new_ops(t, o, n):
        ops = sorted(set(n.get("fallback_ops") or ()) - set(o.get("fallback_ops") or ()))
        return ops or list(n.get("fallback_ops") or ())
    found = _findings(old, new, tids, fallback_ops=new_ops)
    ops = Counter(op for f in found for op in f["fallback_ops"])
    detail = ", ".join(f"{op} ({n})" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    return RuleResult("fallback_creep", count=len(found), threshold=params["max_tests"], findings=found,
                      detail=f"{len(found)} tests now on CPU fallback" + (f": {detail}" if detail else ""))


def rule_stale_expectations(old, new, params, flaky=frozenset(), changed=None) -> RuleResult:
    old, new = as_records(old), as_records(new)
    found = _findings(old, new, new.where(lambda v: v.outcome == XPASS))
    return RuleResult("stale_expectations", count=len(found), threshold=params["max_tests"], findings=found,
                      detail=f"{len(found)} unexpected passes (xpass)")


def rule_missing_tests(old, new, params, flaky=frozenset(), changed=None) -> RuleResult:
    old, new = as_records(old), as_records(new)
    gone = list(old.vid.keys() - new.vid.keys())
    fraction = len(gone) / len(old) if old else 0.0
    found = _findings(old, new, gone)
    return RuleResult("missing_tests", count=round(fraction, 6), threshold=params["max_fraction"], findings=found,
                      detail=f"{len(gone)} of {len(old)} baseline tests absent ({100 * fraction:.1f}%)")


def error_rows(records) -> dict[str, tuple]:
    """{test_id: (op, dtype, outcome, max_abs_err, max_rel_err)} of the records with errors
    (core.numeric.drift's input)."""
    records = as_records(records)
    full = records.load(records.errors)
    return {tid: (r["op"], r.get("dtype") or "", r["outcome"], r["max_abs_err"], r.get("max_rel_err"))
            for tid, r in full.items()}


def rule_numeric_drift(old, new, params, flaky=frozenset(), changed=None) -> RuleResult:
    """Per (op, dtype): the largest error of the tests that pass in both builds grew by more
    than ``factor`` (absolute error floored at ``min_abs``, relative at ``min_rel``):
    results sliding toward the tolerance, seen before tests start failing."""
    old, new = as_records(old), as_records(new)
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


def forbidden_ids(records) -> frozenset:
    """The build's fails of kind fallback_forbidden (strict mode, run --no-fallback)."""
    return frozenset(as_records(records).where(lambda v: v.outcome == FAIL and v.kind == FALLBACK_FORBIDDEN))


def rule_fallback_forbidden(old, new, params, flaky=frozenset(), changed=None) -> RuleResult:
    """Strict mode: every test of the build that ran an operator through the CPU fallback
    (a fail of kind fallback_forbidden), whatever the baseline said; grouped by operator."""
    old, new = as_records(old), as_records(new)
    found = _findings(old, new, list(forbidden_ids(new)),
                      fallback_ops=lambda t, o, n: list(n.get("fallback_ops") or ()))
    ops = Counter(op for f in found for op in f["fallback_ops"])
    detail = ", ".join(f"{op} ({n})" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    return RuleResult("fallback_forbidden", count=len(found), threshold=params["max_tests"], findings=found,
                      detail=f"{len(found)} tests ran operators through the CPU fallback under --no-fallback"
                             + (f": {detail}" if detail else ""))


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
    "fallback_forbidden": rule_fallback_forbidden,
}


# -- fixes (reported, never failing) -------------------------------------------------------------
def fixes(old, new, changed=None) -> dict:
    """What got better: tests now passing that failed or were backend-skipped, operators
    no longer missing, tests back from CPU fallback to native."""
    old, new = as_records(old), as_records(new)
    changed = _changed(old, new, changed)
    fixed = [t for (ov, nv), ts in changed.items() if ov is not None and new.values[nv].outcome in PASSED
             and (old.values[ov].outcome in FAILED or old.values[ov].outcome == SKIP_BACKEND) for t in ts]
    native = [t for (ov, nv), ts in changed.items()
              if ov is not None and old.values[ov].outcome == PASS_FALLBACK and new.values[nv].outcome == PASS
              for t in ts]
    before, now = missing_ops(old), missing_ops(new)
    ops = [{"operator": op, "tests": n} for op, n in sorted(before.items(), key=lambda kv: (-kv[1], kv[0]))
           if op not in now]
    return {"tests": _findings(old, new, fixed),
            "now_native": _findings(old, new, native, fallback_ops=lambda t, o, n: list(o.get("fallback_ops") or ())),
            "ops_implemented": ops}


# -- lost_operator (torchconform.census) -------------------------------------------------
def rule_lost_operator(old, new, params, flaky=frozenset(), changed=None) -> RuleResult:
    """An operator that ran on the baseline's device (census: native, autograd, fallback or a
    covered composite) and does not on the build's.  The censuses come from
    torchconform.gated.gate_context(store, baseline, build); without both, the rule passes quietly."""
    found, detail = lost_operator_findings()
    return RuleResult("lost_operator", count=len(found or ()), threshold=params["max_ops"],
                      findings=found or [], detail=detail)


RULES["lost_operator"] = rule_lost_operator


# -- perf_regression (the perf suite's timings, db/perf.py) ------------------------------
def rule_perf_regression(old, new, params, flaky=frozenset(), changed=None) -> RuleResult:
    """Operators whose device/CPU ratio grew by more than ``threshold`` against the baseline
    (torchconform/core/perf.py).  The timings come from torchconform.gated.gate_context(store, baseline,
    build); without perf results in both builds, the rule passes quietly."""
    found, detail = perf_findings(params["threshold"], params["floor_s"], params["max_spread"])
    return RuleResult("perf_regression", count=len(found or ()), threshold=params["max_ops"],
                      findings=found or [], detail=detail)


RULES["perf_regression"] = rule_perf_regression


# -- broken_claim (the support manifest: what the backend claims, db/claims.py) ----------
def rule_broken_claim(old, new, params, flaky=frozenset(), changed=None) -> RuleResult:
    """Claims recorded with the build (operators, dtypes, features) that its results or census
    break (torchconform/core/claims.py); judged on the build alone, so a first build too.  The
    build comes from torchconform.gated.gate_context; without recorded claims the rule passes quietly."""
    found, detail = claim_findings()
    return RuleResult("broken_claim", count=len(found or ()), threshold=params["max_claims"],
                      findings=found or [], detail=detail)


RULES["broken_claim"] = rule_broken_claim
