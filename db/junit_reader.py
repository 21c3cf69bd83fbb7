"""Streaming JUnit XML reader: test cases in, Outcome records out.

Test cases that carry torchconform's ``tc`` attribute (written by the runner's JUnit
sink, collectors/sink_junit.py, with the suite's ``tc.default.*``; or the older forms,
a ``tc`` property or one ``tc.<field>`` property per field) are taken as they are; others are classified
from their failure/error/skip messages by the one classifier,
``collectors.classify.classify_text``, so an ingested file and a live run of the same
tests agree.

Parsing is expat with handlers that keep only what an outcome needs (a test case's
attributes, its tc fields, its first result element and captured output): no tree
is built, and a 150k-case file streams in bounded memory.  junitparser, which wraps
ElementTree elements in objects, stays the reference reader in the tests: building
and wrapping every element costs more than the rest of the ingest.
"""
from __future__ import annotations

import os
from xml.parsers import expat

from torchconform.collectors.classify import classify_text
from torchconform.collectors.numeric import FIELDS, as_float
from torchconform.collectors.outcome import (
    PASS, PASS_FALLBACK, Outcome, bound_message, check_outcome, render_repro,
)
from torchconform.collectors.sink_junit import class_part, decode_tc, test_id_of_case, unescape_tc
from torchconform.db.store import outcome_from_rows
from torchconform.errors import UserError

RESULT_TAGS = ("failure", "error", "skipped")
CAPTURE_TAGS = ("system-out", "system-err")
CHUNK = 1 << 20
# Classifier verdicts kept per reader (skip reasons repeat thousands of times).
CACHE_LIMIT = 50_000
# The numerical error fields (results' last two columns) and what a tc value holding one contains.
ERROR_FIELDS = frozenset(FIELDS)
ERROR_KEY = "_err="
_ABS_KEY, _REL_SEP = FIELDS[0] + "=", ";" + FIELDS[1] + "="
NO_ERRORS = (None, None)


def _parse_error(path: str, exc: expat.ExpatError) -> UserError:
    reason = expat.errors.messages.get(exc.code, str(exc))
    return UserError(f"{path}:{exc.lineno}: malformed or truncated XML ({reason}, column {exc.offset}); "
                     "fix or regenerate the file and ingest again")


def _not_junit(path: str, tag: str) -> UserError:
    return UserError(f"{path}: not a JUnit XML report (root element <{tag}>, expected <testsuites> or <testsuite>); "
                     "pass a file written by pytest --junitxml or another JUnit reporter")


def iter_cases(path: str, run_properties: dict, on_case):
    """Streams a JUnit file, calling ``on_case(attributes, packed tc value or None,
    older-form tc fields, result tag, result attributes, result text, captured output,
    its <testsuite>'s state)`` at each </testcase>; yields (None) after each piece of
    the file parsed.  A suite's state is [outer suite name, tc defaults, two caches
    for the reader, repro template]; ``run_properties`` receives the suites' ``tc.run.*``
    as they come."""
    # expat with closures over plain locals: the handlers run once per element, so
    # each attribute lookup counts.
    depth = 0
    suites: list[tuple[int, list]] = []         # per open <testsuite>: depth, state
    case_depth = -1                             # depth of the open <testcase>, -1 outside one
    attrs_ = props = result_attrs = packed = None
    result_tag = result_text = ""
    captured: list[str] = []
    text: list[str] | None = None               # character data of the element being captured
    text_depth = 0
    text_into = ""                              # "result", "captured" or a tc field's name
    no_suite = ["", {}, {}, {}, ""]

    def start(tag, attrs):
        nonlocal depth, case_depth, attrs_, props, packed, result_tag, result_attrs, result_text, captured
        nonlocal text, text_depth, text_into
        depth += 1
        if case_depth >= 0:
            if tag == "property":
                if depth == case_depth + 2:  # <testcase><properties><property>
                    name = attrs.get("name", "")
                    if name == "tc":
                        packed = attrs.get("value") or ""
                    elif name.startswith("tc."):
                        value = attrs.get("value")
                        if value is None:
                            text, text_depth, text_into = [], depth, name[3:]
                        else:
                            props[name[3:]] = value
            elif depth == case_depth + 1:
                if tag in RESULT_TAGS:
                    if not result_tag:
                        result_tag, result_attrs = tag, attrs
                        text, text_depth, text_into = [], depth, "result"
                elif tag in CAPTURE_TAGS:
                    text, text_depth, text_into = [], depth, "captured"
            return
        if depth == 1 and tag not in ("testsuites", "testsuite"):
            raise _not_junit(path, tag)
        if tag == "testcase":
            case_depth, attrs_, packed, props, result_tag, result_attrs, result_text, captured = \
                depth, attrs, attrs.get("tc"), {}, "", {}, "", []
        elif tag == "property":
            if suites and depth == suites[-1][0] + 2:  # the suite's own <properties>
                name = attrs.get("name") or ""
                if name.startswith("tc.run."):
                    run_properties.setdefault(name[7:], attrs.get("value", ""))
                elif name == "tc.default.repro":  # a template (outcome.repro_template)
                    suites[-1][1][4] = attrs.get("value", "")
                elif name.startswith("tc.default."):
                    suites[-1][1][1][name[11:]] = attrs.get("value", "")
        elif tag == "testsuite":
            outer = suites[-1][1] if suites else None
            suites.append((depth, [outer[0], dict(outer[1]), {}, {}, outer[4]] if outer else
                           [attrs.get("name") or "", {}, {}, {}, ""]))

    def end(tag):
        nonlocal depth, case_depth, text, result_text
        if text is not None and depth == text_depth:
            joined, text = "".join(text), None
            if text_into == "result":
                result_text = joined
            elif text_into == "captured":
                captured.append(joined)
            else:
                props[text_into] = joined
        elif depth == case_depth:
            case_depth = -1
            on_case(attrs_, packed, props, result_tag, result_attrs, result_text, captured,
                    suites[-1][1] if suites else no_suite)
        elif suites and depth == suites[-1][0]:
            suites.pop()
        depth -= 1

    def data(chunk):
        if text is not None:
            text.append(chunk)

    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.buffer_size = 1 << 16
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = data
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            try:
                parser.Parse(chunk, not chunk)
            except expat.ExpatError as exc:
                raise _parse_error(path, exc) from None
            yield
            if not chunk:
                return


class JunitReader:
    """Streams one JUnit XML file: ``outcomes()`` yields Outcome records as the parser
    meets each <testcase>.  ``suite`` and ``run_properties`` (the runner's suite-level
    ``tc.run.*``) fill in as parsing goes."""

    def __init__(self, path: str, suite: str | None = None, profile=None):
        if not os.path.isfile(path):
            raise UserError(f"{path}: no such file; pass the path of a JUnit XML report")
        if profile is None:
            from torchconform.skiplists.profile import generic_profile
            profile = generic_profile()
        self.path = path
        self.suite_override = suite
        self.suite = suite or ""
        self.profile = profile
        self.run_properties: dict[str, str] = {}
        # The repro template of the first test case's suite: see ``record_chunks``.
        self.repro_template: str | None = None
        # The classifier is a pure function of its input, so its verdicts are cached.
        self._verdicts: dict = {}

    def outcomes(self):
        """Outcome records, one per test case, in file order."""
        for tests, results in self.record_chunks():
            for test, result in zip(tests, results):
                yield outcome_from_rows(test, result)

    def record_chunks(self, compact_repro: bool = False):
        """Per test case, its ``tests`` row and ``results`` fields (db/store.py's
        ``test_row`` and ``result_fields`` layout), a parsed piece of the file at a time,
        as two lists that ingest extends its batches with: what ingest stores, without
        building Outcome objects.

        ``compact_repro``: a repro command that ``repro_template`` (the file's, fixed
        at its first test case) gives is left as None, as the store keeps it (a run
        started with that template renders it on reading)."""
        self.run_properties = {}
        self.repro_template = None
        override, run_props, path, profile, verdicts = (self.suite_override, self.run_properties, self.path,
                                                        self.profile, self._verdicts)
        # The rows repeat the same files, skip messages and tc values thousands of times:
        # one str object per distinct value (per chunk) saves memory and lets pickle
        # (ingest sends the rows from its parsing process) write each value once.
        strings: dict[str, str] = {}
        shared = strings.setdefault   # shared(s, s): the one object equal to s
        first_template = None
        tests: list[tuple] = []
        results: list[tuple] = []

        def suite_of(fields, state) -> str:
            # --suite wins, then the runner's per-test tc suite, then the run's, then the outer suite's name.
            suite = override or fields.get("suite") or run_props.get("suite") or state[0]
            self.suite = self.suite or suite
            return suite

        def new_entry(attrs, fields, state) -> tuple:
            # What a test case's tc fields (its suite's defaults applied) say, checked
            # once per distinct tc value: (tests-row tail, test id or "", suite,
            # results-row head, a passing outcome's message, repro, template to render
            # the repro from).  Repro: its own, "" with no template, None when left to
            # the run's template (compact_repro), else rendered per test.
            outcome, kind = fields["outcome"], fields.get("kind", "")
            try:
                check_outcome(outcome, kind)
                attempt = int(fields.get("attempt") or 1)
            except ValueError as exc:
                test = fields.get("test_id") or attrs.get("name")
                raise UserError(f"{path}: test {test!r} has inconsistent tc properties ({exc}); "
                                "regenerate the file with the torchconform runner") from None
            suite = suite_of(fields, state)
            fallback = fields.get("fallback_ops", "")
            repro, render_from, template = fields.get("repro"), "", state[4]
            if repro is None:
                if not template:
                    repro = ""
                elif not (compact_repro and template == first_template):
                    render_from = template
            return ((fields.get("op", ""), fields.get("variant", ""), fields.get("dtype", "")),
                    fields.get("test_id", ""), suite,
                    (attempt, outcome, kind, fields.get("missing_op", ""),
                     " ".join(fallback.replace(",", " ").split()) if fallback else "",
                     fields.get("skiplist_entry", ""), fields.get("device", "")),
                    fields.get("message", ""), repro, render_from)

        def entry_but_op(attrs, packed, state):
            # Most distinct tc values differ only by op: their entries are the entry of
            # the value without its op (cached too) with the op put in.  None when the
            # value has no op field, or two.
            if packed.startswith("op="):
                end = packed.find(";")
                rest, op = ("", packed[3:]) if end < 0 else (packed[end + 1:], packed[3:end])
            else:
                at = packed.find(";op=")
                if at < 0:
                    return None
                end = packed.find(";", at + 4)
                rest, op = (packed[:at], packed[at + 4:]) if end < 0 else \
                    (packed[:at] + packed[end:], packed[at + 4:end])
            if rest.startswith("op=") or ";op=" in rest:
                return None
            base = state[3].get(rest)
            if base is None:
                try:
                    fields = {**state[1], **(decode_tc(rest, shared) if rest else {})}
                except ValueError:
                    return None  # the whole value is malformed too: the caller says so
                if not fields.get("outcome"):
                    return None
                base = new_entry(attrs, fields, state)
                if len(state[3]) < CACHE_LIMIT:
                    state[3][rest] = base
            if "%" in op:
                op = unescape_tc(op)
            entry = ((shared(op, op),) + base[0][1:],) + base[1:]
            if len(state[2]) < CACHE_LIMIT:
                state[2][packed] = entry
            return entry

        def on_case(attrs, packed, props, result_tag, result_attrs, result_text, captured, state):
            # Called by the parser at each </testcase>: one tests row and one results row.
            nonlocal first_template
            if first_template is None:
                first_template = self.repro_template = state[4]
            # The numerical errors differ per test: split off before the cache lookups.
            errors = NO_ERRORS
            if packed and ERROR_KEY in packed:
                packed, errors = _split_errors(packed, path, attrs, shared)
            if props and (props.keys() & ERROR_FIELDS):
                errors = _errors(props, path, attrs)
            # The runner's form, a packed tc value or none (with its suite's defaults),
            # repeats across tests: its checked entry is cached per suite.
            entry = None if props else state[2].get(packed)
            if entry is None and packed and not props:
                entry = entry_but_op(attrs, packed, state)
            if entry is None:
                defaults = state[1]
                fields = {**defaults, **_decode(packed, path, attrs, shared), **props} if packed or defaults else props
                if not fields.get("outcome"):
                    test, result = classified_record(attrs, fields, result_tag, result_attrs, result_text, captured,
                                                     suite_of(fields, state), profile, verdicts, shared)
                    tests.append(test)
                    results.append(result + errors)
                    return
                entry = new_entry(attrs, fields, state)
                if not props and len(state[2]) < CACHE_LIMIT:
                    state[2][packed] = entry
            tail, test_id, suite, head, message, repro, render_from = entry
            classname = attrs.get("classname") or ""
            name = attrs.get("name") or ""
            file_ = attrs.get("file") or ""
            test_id = test_id or test_id_of_case(classname, name, file_)
            if render_from:
                repro = render_repro(render_from, test_id, tail[0])
            if result_tag:
                message = result_attrs.get("message") or result_text
            if message:
                message = bound_message(message)
                message = shared(message, message)
            tests.append((test_id, suite, shared(file_, file_), class_part(classname, file_), name) + tail)
            results.append(head + (_duration(attrs), message, repro) + errors)

        for _ in iter_cases(path, run_props, on_case):
            if tests:
                chunk = (tests, results)
                tests, results = [], []
                strings.clear()  # the objects stay shared within a chunk, enough for pickle
                yield chunk


def _decode(packed: str | None, path: str, attrs: dict, shared) -> dict:
    if not packed:
        return {}
    try:
        return decode_tc(packed, shared)
    except ValueError as exc:
        raise _bad_case(path, attrs, exc) from None


def _bad_case(path: str, attrs: dict, exc: ValueError) -> UserError:
    return UserError(f"{path}: test case {attrs.get('name')!r}: {exc}; regenerate the file "
                     "with the torchconform runner")


def _errors(fields: dict, path: str, attrs: dict) -> tuple:
    """(max_abs_err, max_rel_err) of a test case's tc fields, None where absent."""
    try:
        return tuple(as_float(fields.get(name)) for name in FIELDS)
    except ValueError as exc:
        raise _bad_case(path, attrs, exc) from None


def _split_errors(packed: str, path: str, attrs: dict, shared) -> tuple[str, tuple]:
    """(the tc value without its error fields, the errors).  The runner writes them last,
    both (``...;max_abs_err=A;max_rel_err=R``: read without decoding, once per test case);
    any other arrangement is decoded, and a value with other fields after them is kept
    whole (its errors are still read)."""
    at = packed.find(_ABS_KEY)
    if at >= 0:
        cut = packed.find(_REL_SEP, at)
        if cut >= 0 and ";" not in packed[cut + 1:]:
            try:
                errors = (_error(packed[at + len(_ABS_KEY):cut]), _error(packed[cut + len(_REL_SEP):]))
            except ValueError as exc:
                raise _bad_case(path, attrs, exc) from None
            return (packed[:at - 1] if at else ""), errors
    at = min((i for i in (packed.find(name + "=") for name in FIELDS) if i >= 0), default=-1)
    if at < 0:
        return packed, NO_ERRORS
    tail = _decode(packed[at:], path, attrs, shared)
    errors = _errors(tail, path, attrs)
    if tail.keys() <= ERROR_FIELDS:
        packed = packed[:at - 1] if at else ""
    return packed, errors


def _error(text: str) -> float:
    number = float(text)
    if not number >= 0:
        raise ValueError(f"a numeric error must be a number >= 0, got {text!r}")
    return number


def _duration(attrs: dict) -> float:
    try:
        return float(attrs.get("time") or 0.0)
    except ValueError:
        return 0.0


def classified_record(attrs: dict, props: dict, result_tag: str, result_attrs: dict, result_text: str,
                      captured: list[str], suite: str, profile, cache: dict, shared) -> tuple[tuple, tuple]:
    """One test case without torchconform's classification -> (tests row, results
    fields), classified from its rendered text like the plugin would."""
    classname = attrs.get("classname") or ""
    name = attrs.get("name") or ""
    file_ = attrs.get("file") or ""
    file_ = shared(file_, file_)
    test = (props.get("test_id") or test_id_of_case(classname, name, file_), suite, file_,
            class_part(classname, file_), name, props.get("op", ""), props.get("variant", ""), props.get("dtype", ""))
    if result_tag:
        status, type_name = result_tag, result_attrs.get("type") or ""
        text = "\n".join(t for t in (result_attrs.get("message"), result_text) if t)
    else:
        status, text, type_name = "passed", "", ""
    key = (text, status, type_name)
    verdict = cache.get(key)
    if verdict is None:
        verdict = classify_text(text, profile, status=status, type_name=type_name)
        if len(cache) < CACHE_LIMIT:
            cache[key] = verdict
    fallback = []
    if verdict.outcome == PASS and captured:
        # A pass whose captured output shows CPU-fallback warnings passed only through fallback.
        fallback = profile.find_fallback_ops("\n".join(captured))
    message = bound_message(verdict.message or
                            ((result_attrs.get("message") or result_text) if result_tag else props.get("message", "")))
    return test, (1, PASS_FALLBACK if fallback else verdict.outcome, verdict.kind, verdict.missing_op,
                  " ".join(fallback), verdict.skiplist_entry, props.get("device", ""), _duration(attrs),
                  shared(message, message), props.get("repro", ""))


def parse_junit(path: str, suite: str | None = None, profile=None) -> list[Outcome]:
    """Every outcome of one JUnit XML file (a list; ``JunitReader`` streams)."""
    return list(JunitReader(path, suite, profile).outcomes())
