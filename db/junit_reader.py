"""Streaming JUnit XML reader: test cases in, Outcome records out.

Test cases that carry torchconform's ``tc`` property (written by the runner's JUnit
sink, collectors/sink_junit.py, with the suite's ``tc.default.*``; or the older form,
one ``tc.<field>`` property per field) are taken as they are; others are classified
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
from torchconform.collectors.outcome import PASS, PASS_FALLBACK, Outcome, bound_message, check_outcome
from torchconform.collectors.sink_junit import class_part, decode_tc, test_id_of_case
from torchconform.db.store import outcome_from_rows
from torchconform.errors import UserError

RESULT_TAGS = ("failure", "error", "skipped")
CAPTURE_TAGS = ("system-out", "system-err")
CHUNK = 1 << 20
# Classifier verdicts kept per reader (skip reasons repeat thousands of times).
CACHE_LIMIT = 50_000


def _parse_error(path: str, exc: expat.ExpatError) -> UserError:
    reason = expat.errors.messages.get(exc.code, str(exc))
    return UserError(f"{path}:{exc.lineno}: malformed or truncated XML ({reason}, column {exc.offset}); "
                     "fix or regenerate the file and ingest again")


def _not_junit(path: str, tag: str) -> UserError:
    return UserError(f"{path}: not a JUnit XML report (root element <{tag}>, expected <testsuites> or <testsuite>); "
                     "pass a file written by pytest --junitxml or another JUnit reporter")


def iter_cases(path: str, run_properties: dict):
    """Every <testcase> of a JUnit file, streamed, as (attributes, tc fields, result tag,
    result attributes, result text, captured output, outer suite name, the suite's tc
    defaults).  ``run_properties`` receives the suites' ``tc.run.*`` as they come."""
    # expat with closures over plain locals: the handlers run once per element (a
    # runner report has ~3.5 per test case), so each attribute lookup counts.
    depth = 0
    suites: list[tuple[int, str, dict]] = []   # per open <testsuite>: depth, outer name, tc defaults
    case_depth = -1                             # depth of the open <testcase>, -1 outside one
    attrs_ = props = result_attrs = None
    result_tag = result_text = ""
    captured: list[str] = []
    text: list[str] | None = None               # character data of the element being captured
    text_depth = 0
    text_into = ""                              # "result", "captured" or a tc field's name
    done: list[tuple] = []

    def start(tag, attrs):
        nonlocal depth, case_depth, attrs_, props, result_tag, result_attrs, result_text, captured
        nonlocal text, text_depth, text_into
        depth += 1
        if case_depth >= 0:
            if tag == "property":
                if depth == case_depth + 2:  # <testcase><properties><property>
                    name = attrs.get("name", "")
                    if name == "tc":
                        try:
                            props.update(decode_tc(attrs.get("value") or ""))
                        except ValueError as exc:
                            raise UserError(f"{path}: test case {attrs_.get('name')!r}: {exc}; regenerate the file "
                                            "with the torchconform runner") from None
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
            case_depth, attrs_, props, result_tag, result_attrs, result_text, captured = depth, attrs, {}, "", {}, "", []
        elif tag == "property":
            if suites and depth == suites[-1][0] + 2:  # the suite's own <properties>
                name = attrs.get("name") or ""
                if name.startswith("tc.run."):
                    run_properties.setdefault(name[7:], attrs.get("value", ""))
                elif name.startswith("tc.default."):
                    suites[-1][2][name[11:]] = attrs.get("value", "")
        elif tag == "testsuite":
            suites.append((depth, suites[0][1] if suites else (attrs.get("name") or ""),
                           dict(suites[-1][2]) if suites else {}))

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
            suite = suites[-1] if suites else (0, "", {})
            done.append((attrs_, props, result_tag, result_attrs, result_text, captured, suite[1], suite[2]))
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
            yield from done
            done.clear()
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
        self.count = 0
        # The classifier is a pure function of its input, so its verdicts are cached.
        self._verdicts: dict = {}

    def outcomes(self):
        """Outcome records, one per test case, in file order."""
        for test, result in self.records():
            yield outcome_from_rows(test, result)

    def records(self):
        """Per test case, its ``tests`` row and ``results`` fields (db/store.py's ``test_row``
        and ``result_fields`` layout): what ingest stores, without building Outcome objects."""
        self.run_properties = {}
        override, run_props = self.suite_override, self.run_properties
        for attrs, props, result_tag, result_attrs, result_text, captured, outer, defaults in \
                iter_cases(self.path, run_props):
            if defaults:
                props = {**defaults, **props}
            # --suite wins, then the runner's per-test tc suite, then the run's, then the outer suite's name.
            suite = override or props.get("suite") or run_props.get("suite") or outer
            self.suite = self.suite or suite
            yield case_record(attrs, props, result_tag, result_attrs, result_text, captured, suite, self.profile,
                              self.path, self._verdicts)
            self.count += 1


def case_record(attrs: dict, props: dict, result_tag: str, result_attrs: dict, result_text: str,
                captured: list[str], suite: str, profile, path: str, cache: dict) -> tuple[tuple, tuple]:
    """One test case -> (tests row, results fields): its tc fields first, else the classifier."""
    classname = attrs.get("classname") or ""
    name = attrs.get("name") or ""
    try:
        duration = float(attrs.get("time") or 0.0)
    except ValueError:
        duration = 0.0
    message = (result_attrs.get("message") or result_text) if result_tag else props.get("message", "")
    file_ = attrs.get("file") or ""
    test_id = props.get("test_id") or test_id_of_case(classname, name, file_)
    test = (test_id, suite, file_, class_part(classname, file_), name, props.get("op", ""),
            props.get("variant", ""), props.get("dtype", ""))
    outcome = props.get("outcome")
    if outcome:
        kind = props.get("kind", "")
        try:
            check_outcome(outcome, kind)
            attempt = int(props.get("attempt") or 1)
        except ValueError as exc:
            raise UserError(f"{path}: test {test_id!r} has inconsistent tc properties ({exc}); "
                            "regenerate the file with the torchconform runner") from None
        fallback = props.get("fallback_ops", "")
        return test, (attempt, outcome, kind, props.get("missing_op", ""),
                      " ".join(fallback.replace(",", " ").split()) if fallback else "",
                      props.get("skiplist_entry", ""), props.get("device", ""), duration,
                      bound_message(message), props.get("repro", ""))
    # No torchconform properties: classify from the rendered text like the plugin would.
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
    return test, (1, PASS_FALLBACK if fallback else verdict.outcome, verdict.kind, verdict.missing_op,
                  " ".join(fallback), verdict.skiplist_entry, props.get("device", ""), duration,
                  bound_message(verdict.message or message), props.get("repro", ""))


def parse_junit(path: str, suite: str | None = None, profile=None) -> list[Outcome]:
    """Every outcome of one JUnit XML file (a list; ``JunitReader`` streams)."""
    return list(JunitReader(path, suite, profile).outcomes())
