"""The support manifest: what a backend claims, judged against what a build's results and
census show (docs/profiles.md, "Claims").

A backend profile's ``claims:`` block (or the backend itself, ``claims: {from: module:function}``)
declares operators (fnmatch patterns), dtypes and features.  :func:`judge` is pure: it takes
the claims, the build's results grouped into :class:`Cell` s and the build's census rows
(``core.dispatch.Row``; None when no census was taken) and says, per claim, ``verified``,
``broken`` (a broken promise: claimed, but failing or missing), or ``unverified`` (claimed,
nothing in the build shows it either way), and lists what passed without being claimed
(``undeclared``).  Coverage is verified ATen overloads over every overload the census sees for
the device (its denominator), never over what was claimed or run.

Operators: a pattern with ``::`` matches ATen overload names whole (``aten::add`` is the default
overload, ``aten::add.*`` the others: fnmatch, case-sensitive); a pattern without ``::`` matches
OpInfo names (``add``, ``nn.functional.*``, ``max.reduction_with_dim``).
"""
from __future__ import annotations

import fnmatch
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from torchconform.core.outcome import (
    FAILED, MISSING_OP, NOT_EXECUTED, PASSED, SKIP_BACKEND, SKIPLIST, UNSUPPORTED_DTYPE, XPASS,
    DISTRIBUTED_SKIP_KINDS, HOST_ONLY,
)

# Features a backend may claim, and the tests that prove each (feature_of):
#   eager        every test of the ops, modules, upstream and models suites not below
#   compile      a variant with "compile" in its name (ops compile_compare_cpu, models compile)
#   autograd     a variant with "grad" in its name (ops compare_cpu_grad, gradcheck variants), models train
#   distributed  every test of the distributed suite (collectives, DDP, FSDP, DTensor)
#   autocast     a variant with "autocast" in its name (no shipped suite has one yet: such a
#                claim stays unverified until one does)
# The traits and perf suites prove no feature (they measure, they do not judge).
FEATURES = ("eager", "compile", "autograd", "distributed", "autocast")
# Suites whose tests.op is an OpInfo name (the operator claims without ``::`` read them).
OPINFO_SUITES = ("ops", "upstream", "perf")
_NO_FEATURE_SUITES = ("traits", "perf")
# OpInfo namespaces and the prefix of their ATen name (linalg.norm -> aten::linalg_norm).
_NAMESPACES = (("nn.functional.", ""), ("linalg.", "linalg_"), ("special.", "special_"), ("fft.", "fft_"))
# Features whose tests nothing else repeats: any failure of theirs is the feature's.
_STANDALONE = ("distributed",)
VERIFIED, BROKEN, UNVERIFIED = "verified", "broken", "unverified"
# What breaks a promise in a test: a failure, a backend skip that says the device lacks it
# (missing operator, placeholders instead of execution, a known issue in the skiplist).
_BREAKING_KINDS = (MISSING_OP, NOT_EXECUTED, SKIPLIST, *DISTRIBUTED_SKIP_KINDS)


def feature_of(suite: str, variant: str) -> str:
    """The feature a test proves (FEATURES), or "" (traits, perf: none)."""
    v = (variant or "").lower()
    if suite == "distributed":
        return "distributed"
    if suite in _NO_FEATURE_SUITES:
        return ""
    if "compile" in v:
        return "compile"
    if "autocast" in v:
        return "autocast"
    if "grad" in v or v == "train":
        return "autograd"
    return "eager"


def base_of(op: str) -> str:
    """aten::add.Tensor -> aten::add."""
    return op.split(".", 1)[0]


def opinfo_aten_base(name: str) -> str:
    """The ATen operator an OpInfo name most likely tests (a documented guess from the name:
    nn.functional.relu -> aten::relu, linalg.norm -> aten::linalg_norm, max.binary -> aten::max)."""
    for namespace, prefix in _NAMESPACES:
        if name.startswith(namespace):
            return "aten::" + prefix + name[len(namespace):].split(".")[0]
    return "aten::" + name.split(".")[0]


def is_aten_pattern(pattern: str) -> bool:
    return "::" in pattern


def matches(pattern: str, name: str) -> bool:
    """fnmatch, case-sensitive, on the whole name: ``aten::add`` is the default overload only,
    ``aten::add.*`` every other overload, ``aten::linalg_*`` every overload of every linalg operator."""
    return fnmatch.fnmatchcase(name, pattern)


@dataclass(frozen=True)
class Claims:
    operators: tuple = ()
    dtypes: tuple = ()
    features: tuple = ()

    @classmethod
    def from_dict(cls, data: dict | None) -> "Claims":
        data = data or {}
        return cls(tuple(str(x) for x in data.get("operators") or ()), tuple(str(x) for x in data.get("dtypes") or ()),
                   tuple(str(x) for x in data.get("features") or ()))

    def to_dict(self) -> dict:
        return {"operators": list(self.operators), "dtypes": list(self.dtypes), "features": list(self.features)}

    @property
    def empty(self) -> bool:
        return not (self.operators or self.dtypes or self.features)


@dataclass(frozen=True)
class Cell:
    """A count of a build's latest results that share what the judge reads."""
    suite: str
    op: str
    variant: str
    dtype: str
    outcome: str
    kind: str
    missing_op: str
    count: int = 1
    # operators the failure's own message names as its cause (the plugin's leak check:
    # "leaking operators: aten::flip x6"): blamed instead of the test's operator, feature, dtype
    culprits: tuple = ()


def _own(c: Cell) -> bool:
    """A breaking cell that is its own test's fault (no other operator named as the cause)."""
    return _breaks(c) and c.kind != MISSING_OP and not c.culprits


def _passes(c: Cell) -> bool:
    return (c.outcome in PASSED and c.kind != HOST_ONLY) or c.outcome == XPASS


def _breaks(c: Cell) -> bool:
    return c.outcome in FAILED or (c.outcome == SKIP_BACKEND and c.kind in _BREAKING_KINDS)


def _what(cells) -> str:
    """'fail 2, skip_backend/missing_op 1' for the breaking cells."""
    counts = Counter()
    for c in cells:
        counts[c.outcome + (f"/{c.kind}" if c.outcome == SKIP_BACKEND and c.kind else "")] += c.count
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass
class Verdict:
    claim: str                 # the operator name, dtype or feature
    state: str                 # verified | broken | unverified
    why: str = ""
    kind: str = ""             # operators: aten | opinfo

    def to_dict(self) -> dict:
        return {"claim": self.claim, "state": self.state, "why": self.why, **({"kind": self.kind} if self.kind else {})}


@dataclass
class ClaimReport:
    claims: Claims
    operators: list[Verdict] = field(default_factory=list)
    dtypes: list[Verdict] = field(default_factory=list)
    features: list[Verdict] = field(default_factory=list)
    undeclared: dict = field(default_factory=dict)     # {"operators": [...], "opinfo": [...], "dtypes", "features"}
    unmatched: list[str] = field(default_factory=list)  # operator patterns that matched nothing
    census_total: int | None = None                    # the denominator (None: no census)
    census_works: int | None = None                    # census rows that run on the device
    verified_in_census: int = 0                        # verified claimed overloads the census sees
    undeclared_status: dict = field(default_factory=dict)  # census status -> undeclared overloads

    def of(self, state: str) -> list[Verdict]:
        return [v for v in self.operators + self.dtypes + self.features if v.state == state]

    @property
    def broken(self) -> list[Verdict]:
        return self.of(BROKEN)

    def coverage(self) -> dict:
        verified = self.verified_in_census
        total = self.census_total
        return {"verified": verified, "denominator": total, "census_works": self.census_works,
                "percent": None if not total else round(100.0 * verified / total, 2)}

    def counts(self) -> dict:
        out = {}
        for section in ("operators", "dtypes", "features"):
            states = Counter(v.state for v in getattr(self, section))
            out[section] = {s: states.get(s, 0) for s in (VERIFIED, BROKEN, UNVERIFIED)}
            out[section]["undeclared"] = len(self.undeclared.get(section, ()))
        out["operators"]["undeclared"] += len(self.undeclared.get("opinfo", ()))
        return out

    def to_dict(self) -> dict:
        return {"claims": self.claims.to_dict(), "counts": self.counts(), "coverage": self.coverage(),
                "broken": [v.to_dict() for v in self.broken],
                "operators": [v.to_dict() for v in self.operators], "dtypes": [v.to_dict() for v in self.dtypes],
                "features": [v.to_dict() for v in self.features], "undeclared": self.undeclared,
                "undeclared_operators_by_status": self.undeclared_status,
                "unmatched_patterns": list(self.unmatched)}


def judge(claims: Claims, cells, census=None) -> ClaimReport:
    """Every claim of ``claims`` judged against a build's result ``cells`` (iterable of Cell)
    and its ``census`` (core.dispatch.Row list; None: no census)."""
    cells = [c for c in cells if c.count]
    report = ClaimReport(claims, census_total=None if census is None else len(census),
                         census_works=None if census is None else sum(1 for r in census if r.works))
    rows = {r.op: r for r in census or ()}
    aten_patterns = [p for p in claims.operators if is_aten_pattern(p)]
    opinfo_patterns = [p for p in claims.operators if not is_aten_pattern(p)]
    missing_by_op: dict[str, list[Cell]] = defaultdict(list)
    for c in cells:
        if c.outcome == SKIP_BACKEND and c.kind == MISSING_OP and c.missing_op:
            missing_by_op[c.missing_op].append(c)
    # the ATen names the build knows of: the census, the missing operators tests named, and
    # the claims' own names without wildcards (judged even when nothing else names them)
    literal = {p for p in aten_patterns if not any(ch in p for ch in "*?[")}
    aten_names = sorted(set(rows) | set(missing_by_op) | literal)
    wild = [p for p in aten_patterns if p not in literal]
    claimed_aten = [n for n in aten_names if n in literal or any(matches(p, n) for p in wild)]
    claimed_set = set(claimed_aten)
    claimed_bases = {base_of(n) for n in claimed_aten}
    opinfo_cells = [c for c in cells if c.suite in OPINFO_SUITES and c.op]
    opinfo_names = sorted({c.op for c in opinfo_cells})
    claimed_opinfo = [n for n in opinfo_names if any(matches(p, n) for p in opinfo_patterns)]
    opinfo_claimed_set = set(claimed_opinfo)
    report.unmatched = [p for p in wild if not any(matches(p, n) for n in aten_names)] + \
                       [p for p in opinfo_patterns if not any(matches(p, n) for n in opinfo_names)]

    def in_scope(c: Cell) -> bool:
        """Within the claimed dtypes and features (a claim list left out claims nothing less)."""
        feature = feature_of(c.suite, c.variant)
        return ((not claims.dtypes or not c.dtype or c.dtype in claims.dtypes)
                and (not claims.features or not feature or feature in claims.features))

    def op_claimed(c: Cell) -> bool:
        if c.suite not in OPINFO_SUITES or not c.op:
            return True   # modules, models, distributed: judged by dtype and feature alone
        return c.op in opinfo_claimed_set or opinfo_aten_base(c.op) in claimed_bases

    scoped = [c for c in cells if in_scope(c)]
    by_base: dict[str, list[Cell]] = defaultdict(list)
    culprit_of: dict[str, list[Cell]] = defaultdict(list)   # operator (or its base) -> cells naming it
    for c in scoped:
        if c.suite in OPINFO_SUITES and c.op:
            by_base[opinfo_aten_base(c.op)].append(c)
        if _breaks(c):
            for op in c.culprits:
                culprit_of[op].append(c)

    # -- operators: ATen overloads ---------------------------------------------------
    for name in claimed_aten:
        row = rows.get(name)
        missing = missing_by_op.get(name, [])
        tested = by_base.get(base_of(name), [])
        # a missing operator is blamed on the operator the dispatcher named, never by the guess
        failing = [c for c in tested if _own(c)]
        named = culprit_of.get(name) or [c for op, cs in culprit_of.items() if op == base_of(name) for c in cs]
        if missing:
            report.operators.append(Verdict(name, BROKEN, f"the dispatcher reported it missing in "
                                                          f"{sum(c.count for c in missing)} tests", "aten"))
        elif row is not None and not row.works and row.status == "unavailable":
            report.operators.append(Verdict(name, UNVERIFIED, "not available in this torch build "
                                                              "(no backend has a kernel)", "aten"))
        elif row is not None and not row.works:
            why = f"census: {row.status}" + (f" (blocked by {', '.join(row.blocked_by[:3])})" if row.blocked_by else "")
            report.operators.append(Verdict(name, BROKEN, why, "aten"))
        elif failing or named:
            ops = sorted({c.op for c in failing + named})
            why = f"tests of {', '.join(ops[:3])}{', ...' if len(ops) > 3 else ''} fail ({_what(failing + named)})"
            if named:
                why += f"; {sum(c.count for c in named)} name it as the cause"
            report.operators.append(Verdict(name, BROKEN, why, "aten"))
        elif row is not None:
            report.operators.append(Verdict(name, VERIFIED, f"census: {row.status}", "aten"))
        elif any(_passes(c) for c in tested):
            report.operators.append(Verdict(name, VERIFIED, "its OpInfo tests pass (no census)", "aten"))
        else:
            report.operators.append(Verdict(name, UNVERIFIED, "not in the census and no test names it"
                                            if census is not None else "no census and no test names it", "aten"))

    report.verified_in_census = sum(1 for v in report.operators if v.state == VERIFIED and v.claim in rows)

    # -- operators: OpInfo names -----------------------------------------------------
    by_opinfo: dict[str, list[Cell]] = defaultdict(list)
    for c in scoped:
        if c.suite in OPINFO_SUITES and c.op:
            by_opinfo[c.op].append(c)
    for name in claimed_opinfo:
        mine = by_opinfo.get(name, [])
        aten = opinfo_aten_base(name)
        # its own failures, and other tests' failures whose message names its operator as the cause
        failing = [c for c in mine if _breaks(c) and not c.culprits] + \
                  [c for op, cs in culprit_of.items() if base_of(op) == aten for c in cs]
        if failing:
            missing = sorted({c.missing_op for c in failing if c.kind == MISSING_OP and c.missing_op})
            why = f"{sum(c.count for c in failing)} tests: {_what(failing)}"
            if missing:
                why += f" (needs {', '.join(missing[:3])})"
            report.operators.append(Verdict(name, BROKEN, why, "opinfo"))
        elif any(_passes(c) for c in mine):
            report.operators.append(Verdict(name, VERIFIED, f"{sum(c.count for c in mine if _passes(c))} tests pass",
                                            "opinfo"))
        else:
            report.operators.append(Verdict(name, UNVERIFIED, "no test of it passed or failed in the claimed "
                                                              "dtypes and features", "opinfo"))

    # -- dtypes ----------------------------------------------------------------------
    passing_keys: dict[tuple, set] = defaultdict(set)   # (suite, op, variant) -> dtypes that pass
    for c in cells:
        if _passes(c):
            passing_keys[(c.suite, c.op, c.variant)].add(c.dtype)
    for dtype in claims.dtypes:
        mine = [c for c in cells if c.dtype == dtype and op_claimed(c)
                and (not claims.features or not feature_of(c.suite, c.variant)
                     or feature_of(c.suite, c.variant) in claims.features)]
        refused = [c for c in cells if c.dtype == dtype and c.outcome == SKIP_BACKEND and c.kind == UNSUPPORTED_DTYPE]
        # a failure the dtype explains: the same test passes at another dtype
        explained = [c for c in mine if _own(c)
                     and passing_keys.get((c.suite, c.op, c.variant), set()) - {dtype}]
        if refused:
            report.dtypes.append(Verdict(dtype, BROKEN, f"the device refuses it ({sum(c.count for c in refused)} "
                                                        "tests skip_backend/unsupported_dtype)"))
        elif explained:
            report.dtypes.append(Verdict(dtype, BROKEN, f"{sum(c.count for c in explained)} tests fail at {dtype} "
                                                        f"that pass at another dtype ({_some_ops(explained)})"))
        elif any(_passes(c) for c in mine):
            report.dtypes.append(Verdict(dtype, VERIFIED, f"{sum(c.count for c in mine if _passes(c))} tests pass"))
        else:
            report.dtypes.append(Verdict(dtype, UNVERIFIED, f"no test ran at {dtype}"))

    # -- features --------------------------------------------------------------------
    features_of_key: dict[tuple, set] = defaultdict(set)   # (suite, op, dtype) -> features with a result
    passing_features: dict[tuple, set] = defaultdict(set)
    for c in cells:
        key, feature = (c.suite, c.op, c.dtype), feature_of(c.suite, c.variant)
        if feature:
            features_of_key[key].add(feature)
            if _passes(c):
                passing_features[key].add(feature)
    for feature in claims.features:
        mine = [c for c in cells if feature_of(c.suite, c.variant) == feature and op_claimed(c)
                and (not claims.dtypes or not c.dtype or c.dtype in claims.dtypes)]
        # a failure the feature explains: the same test passes under another feature, or, for
        # a feature whose tests have no counterpart elsewhere (distributed), any failure
        explained = [c for c in mine if _own(c)
                     and (passing_features[(c.suite, c.op, c.dtype)] - {feature}
                          or (feature in _STANDALONE and not features_of_key[(c.suite, c.op, c.dtype)] - {feature}))]
        if explained:
            report.features.append(Verdict(feature, BROKEN, f"{sum(c.count for c in explained)} tests: "
                                                            f"{_what(explained)} ({_some_ops(explained)})"))
        elif any(_passes(c) for c in mine):
            report.features.append(Verdict(feature, VERIFIED, f"{sum(c.count for c in mine if _passes(c))} tests pass"))
        else:
            report.features.append(Verdict(feature, UNVERIFIED, "no test proves it in this build"
                                           + (" (no suite has an autocast variant yet)" if feature == "autocast" else "")))

    # -- undeclared support: passing (or, for overloads, running) without a claim ----
    unclaimed = [r for r in census or () if r.works and (r.op not in claimed_set or not claims.operators)]
    report.undeclared_status = dict(Counter(r.status for r in unclaimed))
    report.undeclared = {
        "operators": sorted(r.op for r in unclaimed),
        "opinfo": sorted({c.op for c in opinfo_cells if _passes(c) and c.op not in opinfo_claimed_set
                          and opinfo_aten_base(c.op) not in claimed_bases}) if claims.operators else [],
        "dtypes": sorted({c.dtype for c in cells if _passes(c) and c.dtype and c.dtype not in claims.dtypes}),
        "features": sorted({f for c in cells if _passes(c) and (f := feature_of(c.suite, c.variant))
                            and f not in claims.features}),
    }
    return report


def _some_ops(cells) -> str:
    """The first three operators of ``cells`` by name, "..." when there are more."""
    ops = sorted({c.op for c in cells})
    return ", ".join(ops[:3]) + (", ..." if len(ops) > 3 else "")


def format_report(report: ClaimReport, build: str = "", limit: int = 20) -> str:
    """The report as text: coverage with its denominator, broken promises first, then counts."""
    cov = report.coverage()
    lines = [f"claims of build {build}" if build else "claims"]
    if cov["denominator"]:
        lines.append(f"  coverage: {cov['verified']} verified of {cov['denominator']} ATen overloads the census "
                     f"sees for the device ({cov['percent']:.1f}%; {cov['census_works']} run there)")
    else:
        lines.append("  coverage: not stated: no census for this build, so no denominator "
                     "(take one: torchconform census --build B)")
    counts = report.counts()
    for section in ("operators", "dtypes", "features"):
        c = counts[section]
        lines.append(f"  {section:<10} verified {c['verified']}, broken {c['broken']}, unverified {c['unverified']}, "
                     f"undeclared {c['undeclared']}")
    broken = report.broken
    lines.append(f"  broken promises: {len(broken)}")
    for v in _grouped(broken)[:limit]:
        lines.append(f"    {v}")
    if len(_grouped(broken)) > limit:
        lines.append(f"    ... and {len(_grouped(broken)) - limit} more (--json lists all)")
    unverified = report.of(UNVERIFIED)
    if unverified:
        lines.append(f"  unverified: {len(unverified)}")
        for v in _grouped(unverified)[:min(limit, 10)]:
            lines.append(f"    {v}")
    if report.undeclared.get("operators"):
        by = ", ".join(f"{k} {n}" for k, n in sorted(report.undeclared_status.items(), key=lambda kv: -kv[1]))
        lines.append(f"  undeclared operators (run on the device, not claimed): {len(report.undeclared['operators'])} "
                     f"({by})")
    if report.undeclared.get("opinfo"):
        lines.append(f"  undeclared OpInfo operators (pass, not claimed): {len(report.undeclared['opinfo'])}: "
                     f"{', '.join(report.undeclared['opinfo'][:limit])}")
    for key, label in (("dtypes", "dtypes"), ("features", "features")):
        if report.undeclared.get(key):
            lines.append(f"  undeclared {label} (pass, not claimed): {', '.join(report.undeclared[key])}")
    if report.unmatched:
        lines.append(f"  patterns that match nothing in this build: {', '.join(report.unmatched[:limit])}")
    return "\n".join(lines)


def _grouped(verdicts: list[Verdict]) -> list[str]:
    """One line per claim; ATen overloads of one operator with the same reason share a line."""
    groups: dict[tuple, list[str]] = {}
    for v in verdicts:
        key = (base_of(v.claim) if v.kind == "aten" else v.claim, v.why, v.kind)
        groups.setdefault(key, []).append(v.claim)
    out = []
    for (name, why, kind), members in groups.items():
        label = members[0] if len(members) == 1 else f"{name} ({len(members)} overloads)"
        out.append(f"{label}: {why}" if why else label)
    return out
