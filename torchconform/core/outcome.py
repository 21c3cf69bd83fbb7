"""The outcome record: the contract between every part of torchconform.

The pytest plugin produces these, ``ingest`` builds them from JUnit XML, the
store persists them, the gate and the dashboard read them back.  Field names
match ``docs/classification.md`` and the ``tests``/``results`` tables.
"""
from __future__ import annotations

import dataclasses
import re
import shlex
from dataclasses import dataclass, field

# Every collected test ends as exactly one of these.
PASS = "pass"
PASS_FALLBACK = "pass_fallback"
FAIL = "fail"
ERROR = "error"
CRASH = "crash"
TIMEOUT = "timeout"
SKIP_ELIGIBILITY = "skip_eligibility"
SKIP_BACKEND = "skip_backend"
XFAIL = "xfail"
XPASS = "xpass"

OUTCOMES = (
    PASS, PASS_FALLBACK, FAIL, ERROR, CRASH, TIMEOUT,
    SKIP_ELIGIBILITY, SKIP_BACKEND, XFAIL, XPASS,
)

# Kinds of backend skip (``kind`` is set for skip_backend, and HOST_ONLY below for pass).
MISSING_OP = "missing_op"
SKIPLIST = "skiplist"
UNSUPPORTED_DTYPE = "unsupported_dtype"
NOT_EXECUTED = "not_executed"
# The distributed suite's: what the device lacks for a distributed API, named in
# ``missing_op`` (docs/classification.md): a collective of its c10d backend
# (all_to_all), a c10d backend for the device type (the device type), a device-module
# attribute the APIs need (torch.<device>.Stream).
MISSING_COLLECTIVE = "missing_collective"
MISSING_C10D_BACKEND = "missing_c10d_backend"
MISSING_DEVICE_API = "missing_device_api"

DISTRIBUTED_SKIP_KINDS = (MISSING_COLLECTIVE, MISSING_C10D_BACKEND, MISSING_DEVICE_API)

BACKEND_SKIP_KINDS = (MISSING_OP, SKIPLIST, UNSUPPORTED_DTYPE, NOT_EXECUTED, *DISTRIBUTED_SKIP_KINDS)

# The message of a test that was running when its run was stopped (SIGTERM, Ctrl-C): a
# placeholder, not the test's result; a resumed sweep runs such tests again.
INTERRUPTED_MESSAGE = "run interrupted before the test finished"

# The one kind of a pass: the test was instantiated for the device but never touched
# it (collectors/devicecheck.py), so it says nothing about the device.
HOST_ONLY = "host_only"

# The kind of a ``fail`` that a trait the backend declares explains (``trait:float64_as_float32``:
# a float64 result that overflowed float32's range), verified by a rerun with the trait off
# or by the documented rule (collectors/traitfail.py).  Still a failure, counted apart.
TRAIT_KIND_PREFIX = "trait:"
# The kind of a ``fail`` under strict mode (``run --no-fallback``): the test ran operators
# through the CPU fallback (named in ``fallback_ops``), which that mode forbids.
FALLBACK_FORBIDDEN = "fallback_forbidden"
_TRAIT_KIND = re.compile(r"^trait:[a-z][a-z0-9_]*$")

PASSED = frozenset({PASS, PASS_FALLBACK})
# Outcomes of a test that ran to the end without failing: PASSED plus an unexpected pass.
PASSING = frozenset({PASS, PASS_FALLBACK, XPASS})
FAILED = frozenset({FAIL, ERROR, CRASH, TIMEOUT})
SKIPPED = frozenset({SKIP_ELIGIBILITY, SKIP_BACKEND})

# Tolerance tiers (core/numeric.py, where they are decided), tightest first.
TIERS = ("exact", "default", "loose", "beyond")

# Messages are bounded so that one pathological test cannot bloat the store.
MESSAGE_LIMIT = 500


# Lone surrogates: Python's stand-ins for undecodable bytes (a file name that is not
# UTF-8), which no UTF-8 writer -- JUnit, JSON lines, the database -- accepts.
_SURROGATES = re.compile("[\ud800-\udfff]")


def replace_surrogates(text: str) -> str:
    """``text`` with every lone surrogate written as U+FFFD."""
    return text if text.isascii() else _SURROGATES.sub("\ufffd", text)


def bound_message(text: str | None, limit: int = MESSAGE_LIMIT) -> str:
    """First non-empty line of ``text``, cut to ``limit`` characters, with lone
    surrogates written as U+FFFD."""
    if not text:
        return ""
    for line in str(text).splitlines():
        line = line.strip()
        if line:
            line = replace_surrogates(line)
            return line if len(line) <= limit else line[: limit - 1] + "\u2026"
    return ""


def repro_template(repro: str, test_id: str, op: str) -> str:
    """``repro`` with its test id written ``{id}`` and a word equal to its op written
    ``{op}``: the runner's repro commands differ only there, so one template serves a
    whole run.  "" when ``render_repro`` would not give ``repro`` back exactly, or when the
    test id or op hold a placeholder themselves (then every reader of the template, Python,
    SQL and the site's page, could not fill it the same way: such a command is kept as text)."""
    if not repro or _holds_placeholder(test_id, op):
        return ""
    template = repro.replace(test_id, "{id}") if test_id else repro
    if op:
        template = " ".join("{op}" if word == op else word for word in template.split(" "))
    return template if render_repro(template, test_id, op) == repro else ""


# The placeholders of a repro template's parts (``repro_parts``).
REPRO_ID, REPRO_OP = 0, 1


def repro_parts(template: str) -> list:
    """A ``repro_template`` as parts: text, REPRO_ID, REPRO_OP.  The one reading of a
    template: ``render_repro`` joins the parts and the site's page joins the same parts; the
    store's SQL replaces ``{id}`` then ``{op}``, the same wherever a template is made
    (``repro_template`` makes none for a test id or op holding a placeholder)."""
    parts: list = []
    for i, piece in enumerate(template.split("{id}")):
        if i:
            parts.append(REPRO_ID)
        for j, text in enumerate(piece.split("{op}")):
            if j:
                parts.append(REPRO_OP)
            if text:
                parts.append(text)
    return parts


def render_repro(template: str, test_id: str, op: str) -> str:
    """A test's repro command from its suite's template (inverse of ``repro_template``)."""
    if "{op}" not in test_id:
        # Plain replacement reads the parts the same way unless the test id itself holds
        # "{op}" (an op holding "{id}" is filled after it): the store calls this per result.
        return template.replace("{id}", test_id).replace("{op}", op)
    return "".join(p if isinstance(p, str) else test_id if p == REPRO_ID else op for p in repro_parts(template))


def _holds_placeholder(*values: str) -> bool:
    return any(mark in (value or "") for mark in ("{id}", "{op}") for value in values)


def fits_template(template: str, repro: str, test_id: str, op: str) -> bool:
    """``repro`` is ``template`` filled with this test id and op, and every reader would fill
    it so: store, JUnit and site keep such a command as its run's template only."""
    return bool(template) and not _holds_placeholder(test_id, op) and render_repro(template, test_id, op) == repro


def repro_command(repro: str, test_id: str, device: str = "") -> str:
    """What to run to repeat a test, as the gate's report and the site show it: the
    command the runner recorded (or its run's template rendered), else plain pytest on
    the test id with the device option where the device is known."""
    if repro:
        return repro
    cmd = f"python -m pytest {shlex.quote(test_id)}"
    return cmd + (f" --tc-device {shlex.quote(device)}" if device else "")


def check_outcome(outcome: str, kind: str) -> None:
    """ValueError unless ``outcome``/``kind`` is a valid pair (every record passes this)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; expected one of {', '.join(OUTCOMES)}")
    if outcome == SKIP_BACKEND:
        if kind not in BACKEND_SKIP_KINDS:
            raise ValueError(f"skip_backend needs a kind from {', '.join(BACKEND_SKIP_KINDS)}, got {kind!r}")
    elif kind and not (outcome == PASS and kind == HOST_ONLY) \
            and not (outcome == FAIL and (_TRAIT_KIND.match(kind) or kind == FALLBACK_FORBIDDEN)):
        raise ValueError(f"kind {kind!r} is only meaningful for skip_backend (and {HOST_ONLY} for pass, "
                         f"{TRAIT_KIND_PREFIX}<name> or {FALLBACK_FORBIDDEN} for fail), not {outcome}")


@dataclass
class Outcome:
    test_id: str
    outcome: str
    suite: str = ""
    file: str = ""
    cls: str = ""
    name: str = ""
    op: str = ""
    variant: str = ""
    dtype: str = ""
    device: str = ""
    kind: str = ""
    missing_op: str = ""
    fallback_ops: list[str] = field(default_factory=list)
    skiplist_entry: str = ""
    duration: float = 0.0
    message: str = ""
    repro: str = ""
    attempt: int = 1
    # The largest absolute and relative error of the test's comparisons with the CPU
    # reference (torchconform/core/numeric.py); None when it compared nothing.
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    # The tightest tolerance tier the test's comparisons met (core/numeric.py TIERS: exact,
    # default, loose, beyond; docs/classification.md "Tolerance tiers"); "": compared nothing.
    tier: str = ""
    # Not a field (so not a results column, not compared, not in the queries' column
    # lists): a models-suite run's operator set, {"ops": [...], "torch_version",
    # "library_version"} (census/models.py).  It rides along wherever the record
    # travels as a dict (worker pipe, Ray, JSON lines) and is stored by
    # Store.add_outcomes in the outcome's own transaction.
    trace = None
    # Likewise not a field: the perf suite's timing rows (torchconform/core/perf.py), stored by
    # Store.add_outcomes in perf_results (db/perf.py).
    perf = None
    # Not a field either: where the fallback and host_only verdicts came from ("tracking
    # torch_neuronx.get_fallback_ops()", "dispatcher + warning", ...; docs/classification.md,
    # "Fallback evidence"), in JSON lines; stored in the message of a pass_fallback.
    evidence = ""

    def __post_init__(self):
        check_outcome(self.outcome, self.kind)
        self.message = bound_message(self.message)
        if self.tier and self.tier not in TIERS:
            raise ValueError(f"unknown tolerance tier {self.tier!r}; expected one of {', '.join(TIERS)} or empty")
        if self.max_abs_err is not None or self.max_rel_err is not None:
            self.max_abs_err, self.max_rel_err = as_float(self.max_abs_err), as_float(self.max_rel_err)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        if self.trace is not None:
            data["trace"] = self.trace
        if self.perf is not None:
            data["perf"] = self.perf
        if self.evidence:
            data["evidence"] = self.evidence
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Outcome":
        names = {f.name for f in dataclasses.fields(cls)}
        out = cls(**{k: v for k, v in data.items() if k in names})
        if data.get("trace") is not None:
            out.trace = data["trace"]
        if data.get("perf") is not None:
            out.perf = data["perf"]
        if data.get("evidence"):
            out.evidence = str(data["evidence"])
        return out


def as_float(value) -> float | None:
    """A stored or transported error as a float (None stays None); ValueError when not a number >= 0."""
    if value is None or value == "":
        return None
    number = float(value)
    if not number >= 0:  # NaN too
        raise ValueError(f"a numeric error must be a number >= 0 or empty, got {value!r}")
    return number
