"""The one classifier: live exceptions (the plugin) and rendered text (JUnit ingest).

Both entry points reduce their input to text and apply the same rules, so a
live run and an ingested JUnit file of the same run agree.  The rules, in order:

1. timeout markers  -> ``timeout``;  worker-crash markers -> ``crash``
2. torchconform's own skip prefixes -> ``skip_backend`` with that kind
3. a dispatcher "no kernel for this backend" message anywhere in the chain
   -> ``skip_backend/missing_op`` naming the first (root) operator
4. the profile's unsupported-dtype messages -> ``skip_backend/unsupported_dtype``;
   its not-executed messages (placeholder outputs) -> ``skip_backend/not_executed``
5. otherwise by status: skipped -> ``skip_eligibility``, xfailed -> ``xfail``,
   unexpected success -> ``xpass``, failure -> ``fail``, error -> ``error``.

See docs/classification.md for the contract.
"""
from __future__ import annotations

import re
import traceback
from dataclasses import dataclass

from torchconform.core.profile import generic_profile, load_profile
from torchconform.core.outcome import (
    CRASH, ERROR, FAIL, MISSING_C10D_BACKEND, MISSING_COLLECTIVE, MISSING_DEVICE_API, MISSING_OP, NOT_EXECUTED,
    PASS, SKIP_BACKEND, SKIP_ELIGIBILITY, SKIPLIST, TIMEOUT, UNSUPPORTED_DTYPE, XFAIL, XPASS, bound_message,
)

# Prefixes torchconform puts on the skips it makes itself, so that the reason
# text alone (e.g. in a JUnit file) says which kind of backend skip it was.
SKIPLIST_PREFIX = "torchconform skiplist:"
DTYPE_PREFIX = "torchconform unsupported dtype:"
NOT_EXECUTED_PREFIX = "torchconform not executed:"
TIMEOUT_PREFIX = "torchconform timeout:"
# The distributed suite's: a rank process that died (a crash of that test), and what the
# device lacks before any collective runs ("...: <name> <why>", the name first).
CRASH_PREFIX = "torchconform crash:"
C10D_BACKEND_PREFIX = "torchconform missing c10d backend:"
# An operator the device lacks although no dispatcher message names the device: the
# boxed CPU fallback found no CPU kernel, or a borrowed CPU kernel's DispatchStub has
# none for the device ("...: aten::X <why>"; refine_by_device_ops writes it).
MISSING_OP_PREFIX = "torchconform missing op:"
DEVICE_API_PREFIX = "torchconform missing device api:"

_CRASH = re.compile(re.escape(CRASH_PREFIX) + r"|worker '?[\w-]+'? crashed while running"
                    r"|Fatal Python error: (Segmentation fault|Aborted)"
                    r"|(?:^|\n)\s*(?:Segmentation fault|Aborted)(?: \(core dumped\))?\s*$")
_TIMEOUT = re.compile(re.escape(TIMEOUT_PREFIX) + r"|\bTestTimeout\b|^Timeout\b|Failed: Timeout >")
_UNEXPECTED_SUCCESS = re.compile(r"\bUnexpected success\b|\[XPASS\(strict\)\]")

# Statuses classify_text understands (JUnit element names and pytest words).
FAILURE_STATUSES = {"failure", "failed", "fail"}
ERROR_STATUSES = {"error", "errored"}
SKIP_STATUSES = {"skipped", "skip"}
XFAIL_STATUSES = {"xfail", "xfailed"}


class TestTimeout(Exception):
    """Raised in the main thread when a test exceeds --tc-timeout (serial runs)."""

    __test__ = False  # not a test class, whatever pytest thinks of the name


@dataclass
class Verdict:
    outcome: str
    kind: str = ""
    missing_op: str = ""
    message: str = ""
    skiplist_entry: str = ""

    def to_dict(self) -> dict:
        return dict(outcome=self.outcome, kind=self.kind, missing_op=self.missing_op,
                    message=self.message, skiplist_entry=self.skiplist_entry)


def _profile(profile):
    if profile is None:
        return generic_profile()
    if isinstance(profile, str):
        return load_profile(profile)
    return profile


def exception_chain(exc: BaseException) -> list[BaseException]:
    """The chain as Python renders it: the exception, its __cause__, or its
    unsuppressed __context__, and so on; outermost first."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        if exc.__cause__ is not None:
            exc = exc.__cause__
        elif exc.__context__ is not None and not exc.__suppress_context__:
            exc = exc.__context__
        else:
            exc = None
    return chain


# An exception's text kept for classification: the dispatcher's and the profile's
# messages come first, and a test may raise with megabytes of text (every rule is a
# regex over the whole chain, and the chain travels to the controller).
EXCEPTION_TEXT_LIMIT = 64 * 1024


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, whatever the exception does: a test's exception is the test's code,
    and its ``__str__`` may raise or return a non-string (then
    ``<unprintable ValueError: str() raised RuntimeError>``); cut to EXCEPTION_TEXT_LIMIT
    characters."""
    name = exception_name(exc)
    try:
        text = str(exc)
        if type(text) is not str:   # a str subclass may override its own formatting too
            text = str.__str__(text)
    except BaseException as failure:  # noqa: BLE001 - anything the test's class raises
        if isinstance(failure, (KeyboardInterrupt, SystemExit)):
            raise
        text = f"<unprintable {name}: str() raised {exception_name(failure)}>"
    if len(text) > EXCEPTION_TEXT_LIMIT:
        text = text[:EXCEPTION_TEXT_LIMIT] + f"\u2026 [{len(text) - EXCEPTION_TEXT_LIMIT:,} more characters]"
    return text


def exception_name(exc: BaseException, qualified: bool = False) -> str:
    """The exception's class name (``module.Qualname`` when ``qualified``), never raising
    (a metaclass may make even these raise: then the type's own C-level name)."""
    cls = type(exc)
    try:
        name = f"{cls.__module__}.{cls.__qualname__}" if qualified else cls.__name__
        if type(name) is str:
            return name
    except Exception:  # noqa: BLE001
        pass
    return type.__dict__["__name__"].__get__(cls)


def render_chain(exc: BaseException) -> str:
    """Root cause first, like a rendered traceback, so the first match is the root.
    Every part through ``exception_text``: rendering a test's exception never raises."""
    parts = []
    for e in reversed(exception_chain(exc)):
        parts.append(f"{exception_name(e, qualified=True)}: {exception_text(e)}")
    return "\n".join(parts)


def _headline(text: str) -> str:
    """The most telling line of a rendered failure: the last ``E   `` line block's
    first line (pytest longrepr), else the first non-empty line."""
    lines = (text or "").splitlines()
    e_lines = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    if e_lines:
        return bound_message(e_lines[0])
    return bound_message(text)


def _skiplist_entry(line: str) -> str:
    rest = line[len(SKIPLIST_PREFIX):].strip() if line.startswith(SKIPLIST_PREFIX) else ""
    return rest.split(" ", 1)[0].rstrip(":,;") if rest else ""


def _special(text: str, profile, status: str) -> Verdict | None:
    """Rules 1-4, shared by every status."""
    if _TIMEOUT.search(text):
        return Verdict(TIMEOUT, message=_line_with(text, _TIMEOUT))
    if _CRASH.search(text):
        return Verdict(CRASH, message=_line_with(text, _CRASH))
    if status not in XFAIL_STATUSES:
        for prefix, kind in ((SKIPLIST_PREFIX, SKIPLIST), (DTYPE_PREFIX, UNSUPPORTED_DTYPE),
                             (NOT_EXECUTED_PREFIX, NOT_EXECUTED)):
            idx = text.find(prefix)
            if idx >= 0:
                line = bound_message(text[idx:])
                return Verdict(SKIP_BACKEND, kind=kind, message=line,
                               skiplist_entry=_skiplist_entry(line) if kind == SKIPLIST else "")
        for prefix, kind in ((C10D_BACKEND_PREFIX, MISSING_C10D_BACKEND), (DEVICE_API_PREFIX, MISSING_DEVICE_API),
                             (MISSING_OP_PREFIX, MISSING_OP)):
            idx = text.find(prefix)
            if idx >= 0:
                line = bound_message(text[idx:])
                name = line[len(prefix):].split()[:1]
                return Verdict(SKIP_BACKEND, kind=kind, missing_op=name[0] if name else "", message=line)
    collective = profile.find_missing_collective(text)
    if collective:
        return Verdict(SKIP_BACKEND, kind=MISSING_COLLECTIVE, missing_op=collective,
                       message=_collective_line(text, profile, collective))
    ops = profile.find_missing_ops(text)
    if ops:
        return Verdict(SKIP_BACKEND, kind=MISSING_OP, missing_op=ops[0], message=_line_with_op(text, ops[0]))
    if profile.matches_unsupported_dtype(text):
        return Verdict(SKIP_BACKEND, kind=UNSUPPORTED_DTYPE,
                       message=_matching_line(text, profile.matches_unsupported_dtype))
    if profile.matches_not_executed(text):
        return Verdict(SKIP_BACKEND, kind=NOT_EXECUTED, message=_matching_line(text, profile.matches_not_executed))
    return None


def _matching_line(text: str, matches) -> str:
    """The first line the profile's patterns recognise (it names the dtype or the
    placeholder), else the headline."""
    for line in text.splitlines():
        if matches(line):
            return bound_message(re.sub(r"^E\s+", "", line).strip())
    return _headline(text)


def _line_with(text: str, rx: re.Pattern) -> str:
    m = rx.search(text)
    start = text.rfind("\n", 0, m.start()) + 1 if m else 0
    return bound_message(text[start:])


def _collective_line(text: str, profile, collective: str) -> str:
    """The line saying the collective is missing (the profile's recognisers find it)."""
    for line in text.splitlines():
        if profile.find_missing_collective(line):
            return bound_message(line.lstrip("E").strip())
    return bound_message(f"missing collective {collective}")


def _line_with_op(text: str, op: str) -> str:
    short = op.split("::", 1)[-1]
    for line in text.splitlines():
        if short in line and ("Could not run" in line or "not currently implemented" in line or "not supported" in line):
            return bound_message(line.lstrip("E").strip())
    return bound_message(f"missing operator {op}")


def classify_text(text: str | None, profile=None, status: str = "failure", type_name: str = "") -> Verdict:
    """Classify a rendered outcome: a pytest longrepr, a JUnit message/body, a skip reason.

    ``status`` is what the runner said: ``failure``/``error``/``skipped``/``xfail``
    (JUnit element names) or ``passed``.  ``type_name`` is the JUnit ``type``
    attribute where there is one (``pytest.xfail`` marks an expected failure).
    """
    profile = _profile(profile)
    text = text or ""
    status = (status or "failure").lower()
    if status in SKIP_STATUSES and "xfail" in (type_name or "").lower():
        status = "xfail"
    if status in ("passed", "pass", "success"):
        return Verdict(PASS)
    special = _special(text, profile, status)
    if special is not None:
        # An expected failure whose cause is a missing operator still counts as
        # a missing operator: the expectation was about numerics, not coverage.
        return special
    if status in XFAIL_STATUSES:
        idx = text.find(SKIPLIST_PREFIX)
        entry = _skiplist_entry(bound_message(text[idx:])) if idx >= 0 else ""
        return Verdict(XFAIL, message=_headline(text), skiplist_entry=entry)
    if status in SKIP_STATUSES:
        return Verdict(SKIP_ELIGIBILITY, message=bound_message(text))
    if _UNEXPECTED_SUCCESS.search(text):
        return Verdict(XPASS, message=_line_with(text, _UNEXPECTED_SUCCESS))
    if status in ERROR_STATUSES:
        return Verdict(ERROR, message=_headline(text))
    return Verdict(FAIL, message=_headline(text))


def classify_exception(exc: BaseException, profile=None, status: str = "failure") -> Verdict:
    """Classify a live exception by reading its whole chain (__cause__ and __context__)."""
    import unittest

    profile = _profile(profile)
    if isinstance(exc, TestTimeout):
        return Verdict(TIMEOUT, message=bound_message(f"{TIMEOUT_PREFIX} {exception_text(exc)}"))
    chain_text = render_chain(exc)
    if isinstance(exc, unittest.SkipTest) or type(exc).__name__ in ("Skipped", "SkipTest"):
        status = "skipped"
    verdict = classify_text(chain_text, profile, status=status)
    if verdict.outcome in (FAIL, ERROR):
        verdict.message = bound_message(f"{exception_name(exc)}: {exception_text(exc)}")
    return verdict


def format_exception(exc: BaseException) -> str:
    """Full rendered chain (for debugging output, same shape pytest prints)."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


# Errors that name no device although the device caused them (see refine_by_device_ops).
_CPU_NO_KERNEL = re.compile(r"Could not run '(?P<op>[\w:]+(?:\.\w+)?)' with arguments from the 'CPU' backend")
_STUB_MISSING = re.compile(r"DispatchStub: missing kernel for (?P<device>\w+)")


def refine_by_device_ops(verdict: Verdict, text: str, device: str, seen, served_by_fallback) -> Verdict:
    """A failing verdict made exact by what the dispatcher observer saw the test ask of
    the device (``seen``: dispatchwatch.Seen; ``served_by_fallback(op)``: the dispatch
    table's answer).  Two errors a device causes without naming it become
    ``skip_backend/missing_op``, their message prefixed so that the stored text alone
    classifies the same way (rule 2):

    - ``Could not run 'aten::X' with arguments from the 'CPU' backend`` where X was
      called with device tensors and the backend's boxed CPU fallback serves X (or X's
      own kernel called the CPU fallback: ``seen.via_cpu``): the fallback had no CPU
      kernel to call (a CPU reference computation failing the same way never called X on
      the device, so it stays as it was);
    - ``DispatchStub: missing kernel for <device>``: a CPU kernel the backend borrowed
      has no stub for the device; the operator is the innermost device call the error ended.
    """
    if verdict.outcome not in (FAIL, ERROR, XFAIL) or seen is None or not getattr(seen, "recorded", False):
        return verdict
    for m in _CPU_NO_KERNEL.finditer(text):
        op = m["op"] if "::" in m["op"] else "aten::" + m["op"]
        if op in seen.ops and (served_by_fallback(op) or op in getattr(seen, "via_cpu", ())):
            why = "the backend's CPU fallback has no CPU kernel to call"
            return Verdict(SKIP_BACKEND, kind=MISSING_OP, missing_op=op,
                           message=bound_message(f"{MISSING_OP_PREFIX} {op} {why} ({m[0]})"))
    m = _STUB_MISSING.search(text)
    if m and m["device"] == device and seen.raised:
        return Verdict(SKIP_BACKEND, kind=MISSING_OP, missing_op=seen.raised,
                       message=bound_message(f"{MISSING_OP_PREFIX} {seen.raised} has no {device} kernel in the CPU "
                                             f"kernel's DispatchStub ({m[0]})"))
    return verdict

