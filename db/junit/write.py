"""JUnit XML sink: standard JUnit, classification carried in a ``tc`` attribute.

Any JUnit reader sees ordinary pass/failure/error/skipped test cases; torchconform's
ingest reads the ``tc`` attribute back (documented in docs/classification.md).
The file is rewritten atomically at every flush, so a killed run still leaves a
valid file holding what finished.

The encoding is lean on purpose: a nightly build has ~150k test cases and the file
is parsed again at every ingest, where each XML element costs.  A test case carries
one extra attribute, ``tc``, packing its fields as ``field=value;field=value``
(values percent-escape ``%``, ``;`` and ``=``).  An attribute and not a
``<properties>`` child: per-test properties are no more part of the JUnit schema
than an extra attribute (pytest's ``record_property`` documents that they break
schema validation), readers ignore attributes they do not know, and the two
elements a property needs cost more to parse than the rest of the test case.

The test suite names a default for the fields many tests share
(``tc.default.<field>``, the most common value), and a test case writes a field only
where it differs from that default; ``test_id`` is written
only when it is not the ``file::Class::name`` a reader rebuilds from the test
case's attributes, ``attempt`` only when it is not 1, ``repro`` only when the suite's
template (``tc.default.repro``, with ``{id}`` and ``{op}`` standing for the test's id
and op) does not give it, and ``message`` only for a passing outcome (pass,
pass_fallback, xpass), which has no result element to carry it.  The numerical errors
against the CPU reference come after the tolerance tier (``tier``, where the test compared
something) and last (``max_abs_err``, ``max_rel_err``: Python's shortest float
text, which reads back exactly) come last and only where the test compared something;
being different for nearly every test, they are the part of the value a reader splits
off before looking the rest up in its cache.
Readers also accept the older forms: the same packed value in a ``tc`` property,
or one ``tc.<field>`` property per field.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
import time
from collections import Counter
from xml.sax.saxutils import escape, quoteattr

from torchconform.core.numeric import FIELDS as ERROR_FIELDS
from torchconform.core.outcome import (
    CRASH, ERROR, FAIL, PASSING, SKIP_BACKEND, SKIP_ELIGIBILITY, TIMEOUT, XFAIL, Outcome, fits_template,
    repro_template,
)

# Outcome fields a test case's ``tc`` attribute carries (ingest reads these back).
TC_FIELDS = ("outcome", "kind", "missing_op", "fallback_ops", "skiplist_entry", "op", "variant", "dtype",
             "device", "suite", "test_id", "repro", "attempt", "message", "tier", *ERROR_FIELDS)
# Fields the test suite may give a default for: short values that most tests of a run
# share, and the repro command as a template (see ``repro_template``).
DEFAULTABLE = ("outcome", "kind", "device", "suite", "variant", "dtype", "repro")
# Run-level properties, written as tc.run.<key> on the test suite.
RUN_KEYS = ("build", "suite", "selection", "device", "profile", "backend", "shard", "torch_version",
            "branch", "commit", "declared_traits")
# Run properties whose value is a list of names (never holding a comma): written comma-separated.
LIST_RUN_KEYS = ("declared_traits",)


def run_property_text(key: str, value) -> str:
    """A run property's value as its tc.run.<key> text ("" for nothing to write)."""
    if key in LIST_RUN_KEYS and isinstance(value, (list, tuple, set)):
        return ",".join(sorted(str(v) for v in value))
    return "" if value is None else str(value)


def run_property_value(key: str, text: str):
    """A tc.run.<key> text read back (inverse of ``run_property_text``): lists as lists."""
    return [v for v in text.split(",") if v] if key in LIST_RUN_KEYS else text

# Characters XML 1.0 (or its UTF-8 file) cannot carry at all: control characters (a
# test's message may hold ANSI colour codes) and lone surrogates (undecodable bytes).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _attr(value) -> str:
    text = str(value)
    return quoteattr(_NOT_XML.sub("\ufffd", text) if _NOT_XML.search(text) else text)


def _text(value) -> str:
    text = str(value)
    return escape(_NOT_XML.sub("\ufffd", text) if _NOT_XML.search(text) else text)


def _module_of(file: str) -> str:
    """The dotted module path of a test file, as pytest's JUnit classname starts."""
    return (file[:-3] if file.endswith(".py") else file).replace("/", ".").replace("\\", ".")


def classname_of(file: str, cls: str) -> str:
    """pytest's JUnit classname: the module path, dotted, then the class."""
    mod = _module_of(file)
    return f"{mod}.{cls}" if cls else mod


@functools.lru_cache(maxsize=4096)  # a report has few distinct (classname, file) pairs
def class_part(classname: str, file: str) -> str:
    """The class inside a JUnit classname: with a file attribute (pytest and the
    runner write ``<module path>.<Class>``), drop the module part."""
    if file:
        module = _module_of(file)
        if classname == module:
            return ""
        if classname.startswith(module + "."):
            return classname[len(module) + 1:]
    return classname


def test_id_of_case(classname: str, name: str, file: str) -> str:
    """The test id a JUnit test case names without a ``test_id`` tc field: with a file
    attribute pytest's node id (file::Class::name), else the convention classname::name."""
    prefix = test_id_prefix(classname, file)
    if name:
        return prefix + name
    return prefix[:-2] if file else prefix


@functools.lru_cache(maxsize=4096)
def test_id_prefix(classname: str, file: str) -> str:
    """What precedes a named test case's name in its id (``test_id_of_case``), "::" included."""
    if file:
        cls = class_part(classname, file)
        return f"{file}::{cls}::" if cls else f"{file}::"
    return f"{classname}::" if classname else ""


def count_defaultable(outcomes: list[Outcome], counts: dict[str, Counter] | None = None) -> dict[str, Counter]:
    """Per DEFAULTABLE field, a Counter of its values (for ``repro``, of templates) over
    ``outcomes``, added to ``counts`` when given: the JUnit sink keeps them up to date
    batch by batch instead of counting every outcome again at each rewrite."""
    counts = counts if counts is not None else {field: Counter() for field in DEFAULTABLE}
    for field, counter in counts.items():
        if field == "repro":
            counter.update(repro_template(o.repro, o.test_id, o.op) for o in outcomes)
        else:
            counter.update(getattr(o, field) for o in outcomes)
    return counts


def suite_defaults(outcomes: list[Outcome], counts: dict[str, Counter] | None = None) -> dict[str, str]:
    """Per DEFAULTABLE field, its most common value (for ``repro``, template), unless
    that is empty (an empty value is never written anyway): each test holding it saves
    writing the field.  ``counts``: ``count_defaultable(outcomes)``, already made."""
    defaults = {}
    for field, counter in (counts if counts is not None else count_defaultable(outcomes)).items():
        if counter:
            value = counter.most_common(1)[0][0]
            if value:
                defaults[field] = value
    return defaults


def encode_tc(fields: list[tuple[str, str]]) -> str:
    """``field=value;...`` with ``%``, ``;`` and ``=`` percent-escaped in values."""
    return ";".join(f"{k}={_escape_tc(v)}" for k, v in fields)


def _escape_tc(value: str) -> str:
    if "%" in value or ";" in value or "=" in value:
        return value.replace("%", "%25").replace(";", "%3B").replace("=", "%3D")
    return value


def unescape_tc(value: str) -> str:
    """One value of a ``tc`` value as it was (inverse of the escaping in ``encode_tc``)."""
    return value.replace("%3B", ";").replace("%3D", "=").replace("%25", "%")


_TC_SPLIT = re.compile("[;=]")


def decode_tc(text: str, shared=None) -> dict[str, str]:
    """The fields of a ``tc`` value (inverse of ``encode_tc``); ``shared(s, s)``, when
    given, maps each key and value to the str object to use (a reader's interning)."""
    # Values escape ";" and "=", so splitting on both alternates keys and values.
    parts = _TC_SPLIT.split(text)
    if len(parts) % 2:
        raise ValueError(f"malformed tc value {text[:80]!r} (expected field=value;field=value)")
    if "%" in text:
        parts = [unescape_tc(p) for p in parts]
    if shared is not None:
        parts = list(map(shared, parts, parts))
    return dict(zip(parts[::2], parts[1::2]))


def case_fields(o: Outcome, defaults: dict[str, str], classname: str, name: str) -> list[tuple[str, str]]:
    """The (field, value) pairs test case ``o`` needs on top of the suite's defaults."""
    props = []
    for field in TC_FIELDS:
        value = getattr(o, field)
        if field == "repro" and "repro" in defaults:
            if not fits_template(defaults["repro"], value, o.test_id, o.op):
                props.append((field, value))
            continue
        if field in defaults:
            if value != defaults[field]:
                props.append((field, value))  # even "", which overrides the default
            continue
        if field == "fallback_ops":
            value = ",".join(value)
        elif field == "attempt":
            value = "" if value in (1, None) else str(value)
        elif field == "test_id" and value == test_id_of_case(classname, name, o.file):
            continue
        elif field == "message" and o.outcome not in PASSING:
            continue  # the <failure>/<error>/<skipped> element carries it
        elif field in ERROR_FIELDS:
            if value is not None:   # 0.0 too: an exact comparison is worth saying
                props.append((field, repr(float(value))))
            continue
        if value or field == "outcome":
            props.append((field, value))
    return props


def testcase_xml(o: Outcome, defaults: dict[str, str]) -> str:
    """One ``<testcase>`` element as text (one line)."""
    classname, name = classname_of(o.file, o.cls), o.name or o.test_id
    fields = case_fields(o, defaults, classname, name)
    packed = f" tc={_attr(encode_tc(fields))}" if fields else ""
    head = (f"<testcase classname={_attr(classname)} name={_attr(name)} time=\"{o.duration:.3f}\""
            f" file={_attr(o.file)}{packed}")
    if o.outcome in PASSING:
        return head + " />"
    parts = [head, ">"]
    if o.outcome == FAIL:
        parts.append(f'<failure message={_attr(o.message)} type="fail">{_text(o.message)}</failure>')
    elif o.outcome in (ERROR, CRASH, TIMEOUT):
        parts.append(f'<error message={_attr(o.message)} type="{o.outcome}">{_text(o.message)}</error>')
    elif o.outcome in (SKIP_ELIGIBILITY, SKIP_BACKEND):
        parts.append(f"<skipped message={_attr(o.message)} type={_attr(o.kind or o.outcome)} />")
    elif o.outcome == XFAIL:
        parts.append(f'<skipped message={_attr(o.message)} type="pytest.xfail" />')
    parts.append("</testcase>")
    return "".join(parts)


def junit_counts(outcomes: list[Outcome]) -> dict:
    """The <testsuite> counters JUnit readers expect, from outcome records."""
    counts = {"tests": len(outcomes), "failures": 0, "errors": 0, "skipped": 0}
    for o in outcomes:
        if o.outcome == FAIL:
            counts["failures"] += 1
        elif o.outcome in (ERROR, CRASH, TIMEOUT):
            counts["errors"] += 1
        elif o.outcome in (SKIP_ELIGIBILITY, SKIP_BACKEND, XFAIL):
            counts["skipped"] += 1
    return counts


def write_junit_stream(out, run: dict, outcomes: list[Outcome], suite_name: str | None = None,
                       counts: dict[str, Counter] | None = None) -> None:
    """The whole JUnit document for ``outcomes`` (one test suite) to the text stream ``out``
    (``counts``: see ``suite_defaults``)."""
    attrs = {"name": suite_name or f"torchconform.{run.get('suite') or 'tests'}"}
    if run.get("start_time"):
        attrs["timestamp"] = str(run["start_time"])
    if run.get("host"):
        attrs["hostname"] = str(run["host"])
    attrs["time"] = f"{sum(o.duration for o in outcomes):.3f}"
    attrs.update((k, str(v)) for k, v in junit_counts(outcomes).items())
    out.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n<testsuite '
              + " ".join(f"{k}={_attr(v)}" for k, v in attrs.items()) + ">\n<properties>\n")
    for key in RUN_KEYS:
        text = run_property_text(key, run.get(key))
        if text:
            out.write(f'  <property name="tc.run.{key}" value={_attr(text)} />\n')
    defaults = suite_defaults(outcomes, counts)
    for field, value in defaults.items():
        out.write(f'  <property name="tc.default.{field}" value={_attr(value)} />\n')
    out.write("</properties>\n")
    for o in outcomes:
        out.write(testcase_xml(o, defaults))
        out.write("\n")
    out.write("</testsuite>\n</testsuites>\n")


def write_junit(path, run: dict, outcomes: list[Outcome], counts: dict[str, Counter] | None = None) -> None:
    """Write the JUnit file atomically (a reader never sees half a file); ``counts``: see
    ``suite_defaults``."""
    run = dict(run)
    run.setdefault("host", socket.gethostname())
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            write_junit_stream(out, run, outcomes, counts=counts)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # never leave a half-written file next to the report
        raise


class JunitSink:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self.run: dict = {}
        self.outcomes: list[Outcome] = []
        self._counts = count_defaultable([])  # of self.outcomes, for the suite's defaults
        self._next_write = 0.0

    # Rewriting the whole file is O(n).  A rewrite at most every REWRITE_EVERY seconds,
    # and never more than REWRITE_SHARE of the time (a 150k-test nightly takes ~2 s per
    # rewrite, on the controller the workers share the CPUs with), keeps a run linear
    # while a killed run still leaves a recent, valid file.
    REWRITE_EVERY = 10.0
    REWRITE_SHARE = 0.05

    def pytest_torchconform_run_start(self, config, run):
        self.run = dict(run)

    def pytest_torchconform_outcomes(self, config, outcomes):
        self.outcomes.extend(outcomes)
        count_defaultable(outcomes, self._counts)
        start = time.monotonic()
        if start >= self._next_write:
            write_junit(self.path, self.run, self.outcomes, self._counts)
            took = time.monotonic() - start
            self._next_write = start + max(self.REWRITE_EVERY, took / self.REWRITE_SHARE)

    def pytest_torchconform_run_end(self, config, run, exitstatus):
        self.run = dict(run)
        write_junit(self.path, self.run, self.outcomes, self._counts)
