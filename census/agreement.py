"""The census joined with what the build's tests found, and where the two disagree.

The census says what the dispatcher offers the device for each operator; the build's
tests say what happened when they asked: an operator named missing by a test (the
dispatcher's "no kernel" error, the boxed fallback without a CPU kernel, a borrowed
kernel's DispatchStub without the device), or one a passing test ran through the CPU
fallback.  An operator both know of agrees when the census calls it missing (or
unavailable) exactly where a test found it missing, and fallback exactly where a test
passed through the fallback.  A disagreement is either a census that calls a broken
operator working (a kernel registered that then fails) or a run that names an operator
the census cannot see; both are printed, never hidden.  A census taken after the build's
tests joins their fallback evidence (``take_census(observed_fallback=...)``): a registered
kernel seen calling the CPU fallback is then ``fallback`` (via observed-in-tests) and agrees.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from torchconform.core.dispatch import FALLBACK, MISSING, NATIVE, UNAVAILABLE, Row
from torchconform.core.outcome import MISSING_OP, PASS_FALLBACK, SKIP_BACKEND

CANNOT_RUN = frozenset({MISSING, UNAVAILABLE})


@dataclass
class Found:
    """What the build's tests found of one operator."""
    missing: int = 0        # tests that named it missing
    fallback: int = 0       # passing tests that ran it through the CPU fallback

    def to_dict(self) -> dict:
        return {"missing": self.missing, "fallback": self.fallback}


@dataclass
class Agreement:
    found: dict[str, Found] = field(default_factory=dict)      # operators the tests found something of
    seen_by_both: int = 0
    disagree: list[tuple[str, str, str]] = field(default_factory=list)   # (op, census status, tests' finding)

    def to_dict(self) -> dict:
        return {"seen_by_both": self.seen_by_both, "agree": self.seen_by_both - len(self.disagree),
                "disagree": [{"op": op, "census": st, "tests": what} for op, st, what in self.disagree],
                "found": {op: f.to_dict() for op, f in sorted(self.found.items())}}

    def line(self) -> str:
        text = (f"census vs the build's tests: {self.seen_by_both} operators known to both, "
                f"{self.seen_by_both - len(self.disagree)} agree, {len(self.disagree)} disagree")
        if self.disagree:
            text += "\n" + "\n".join(f"  {op}: census {st}, tests {what}" for op, st, what in self.disagree)
        return text


def findings(outcomes) -> dict[str, Found]:
    """Per operator, what the outcomes found (only ATen operators: a missing collective or
    c10d backend is not a census row)."""
    out: dict[str, Found] = {}
    for o in outcomes:
        if o.outcome == SKIP_BACKEND and o.kind == MISSING_OP and o.missing_op.startswith("aten::"):
            out.setdefault(o.missing_op, Found()).missing += 1
        elif o.outcome == PASS_FALLBACK:
            for op in o.fallback_ops:
                out.setdefault(op, Found()).fallback += 1
    return out


def compare(rows: list[Row], outcomes) -> Agreement:
    by_op = {r.op: r for r in rows}
    found = findings(outcomes)
    result = Agreement(found=found)
    for op, f in sorted(found.items()):
        row = by_op.get(op)
        if row is None:
            continue
        result.seen_by_both += 1
        if f.missing and row.status not in CANNOT_RUN:
            result.disagree.append((op, row.status, f"missing in {f.missing} test(s)"))
        elif f.fallback and row.status != FALLBACK:
            what = f"through the CPU fallback in {f.fallback} passing test(s)"
            if row.status == NATIVE:
                # a registered kernel that calls the CPU fallback itself (torch-opencl's add.out):
                # the dispatch table cannot show it; a census taken after the tests joins it
                what += " (its own kernel calls the CPU fallback; take the census after the build's tests to join it)"
            result.disagree.append((op, row.status, what))
    return result
