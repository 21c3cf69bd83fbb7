"""Load JUnit XML from any runner into the store.

Test cases that carry torchconform's ``tc.*`` properties (written by the
runner's JUnit sink, see collectors/sink_junit.py) are taken as they are;
others are classified from their failure/error/skip messages by the one
classifier, ``collectors.classify.classify_text``, so an ingested file and a
live run of the same tests agree.

All files are parsed and checked before anything is written, and the whole
ingest is one transaction: bad input stores nothing.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from junitparser import TestCase

from torchconform.collectors.classify import classify_text
from torchconform.collectors.outcome import OUTCOMES, PASS, PASS_FALLBACK, Outcome
from torchconform.errors import UserError

PROPERTY_PREFIX = "tc."
RESULT_TAGS = ("failure", "error", "skipped")


# Outcomes written per add_outcomes call while streaming a file into the store.
BATCH = 20_000
CACHE_LIMIT = 50_000


def _xml_error(path: str, exc: ET.ParseError) -> UserError:
    line, col = getattr(exc, "position", (0, 0))
    reason = str(exc).split(":", 1)[0]
    return UserError(f"{path}:{line}: malformed or truncated XML ({reason}, column {col}); "
                     "fix or regenerate the file and ingest again")


def _properties(elem) -> dict[str, str]:
    props = elem.find("properties")
    if props is None:
        return {}
    out = {}
    for p in props.iter("property"):
        value = p.get("value")
        out[p.get("name", "")] = value if value is not None else (p.text or "")
    return out


def _class_part(classname: str, file_: str) -> str:
    """The class inside a JUnit classname: with a file attribute (pytest and the
    runner write ``<module path>.<Class>``), drop the module part."""
    if file_:
        module = (file_[:-3] if file_.endswith(".py") else file_).replace("/", ".").replace("\\", ".")
        if classname == module:
            return ""
        if classname.startswith(module + "."):
            return classname[len(module) + 1:]
    return classname


def _case_outcome(case: TestCase, props: dict, profile, suite: str, path: str, cache: dict | None = None) -> Outcome:
    """One junitparser TestCase -> Outcome (tc.* properties first, else the classifier)."""
    elem = case._elem
    classname = case.classname or ""
    name = case.name or ""
    try:
        duration = float(elem.get("time") or 0.0)
    except ValueError:
        duration = 0.0
    # Direct children only: a result is <failure>/<error>/<skipped> right under <testcase>.
    first = next((child for child in elem if child.tag in RESULT_TAGS), None)
    message = ""
    if first is not None:
        message = first.get("message") or (first.text or "")
    file_ = elem.get("file") or ""
    cls = _class_part(classname, file_)
    # With a file attribute this rebuilds pytest's node id (file::Class::name);
    # without one, the JUnit convention classname::name.
    test_id = props.get("tc.test_id") or (
        "::".join(p for p in (file_, cls, name) if p) if file_ else (f"{classname}::{name}" if classname else name))
    base = dict(test_id=test_id, suite=suite, file=file_, cls=cls, name=name,
                op=props.get("tc.op", ""), variant=props.get("tc.variant", ""), dtype=props.get("tc.dtype", ""),
                device=props.get("tc.device", ""), duration=duration, repro=props.get("tc.repro", ""))
    outcome = props.get("tc.outcome")
    if outcome:
        if outcome not in OUTCOMES:
            raise UserError(f"{path}: test {test_id!r} has unknown tc.outcome {outcome!r}; "
                            f"expected one of {', '.join(OUTCOMES)}")
        fallback = [op for op in props.get("tc.fallback_ops", "").replace(" ", ",").split(",") if op]
        try:
            attempt = int(props.get("tc.attempt") or 1)
            return Outcome(outcome=outcome, kind=props.get("tc.kind", ""), missing_op=props.get("tc.missing_op", ""),
                           fallback_ops=fallback, skiplist_entry=props.get("tc.skiplist_entry", ""),
                           message=message, attempt=attempt, **base)
        except ValueError as exc:
            raise UserError(f"{path}: test {test_id!r} has inconsistent tc.* properties ({exc}); "
                            "regenerate the file with the torchconform runner") from None
    # No torchconform properties: classify from the rendered text like the plugin would.
    if first is None:
        status, text, type_name = "passed", "", ""
    else:
        status = first.tag
        type_name = first.get("type") or ""
        text = "\n".join(t for t in (first.get("message"), first.text) if t)
    key = (text, status, type_name)
    verdict = cache.get(key) if cache is not None else None
    if verdict is None:
        verdict = classify_text(text, profile, status=status, type_name=type_name)
        if cache is not None and len(cache) < CACHE_LIMIT:
            cache[key] = verdict
    fallback = []
    if verdict.outcome == PASS and len(elem):
        # A pass whose captured output shows CPU-fallback warnings passed only through fallback.
        captured = "\n".join(c.text or "" for c in elem if c.tag in ("system-out", "system-err"))
        fallback = profile.find_fallback_ops(captured) if captured else []
    return Outcome(outcome=PASS_FALLBACK if fallback else verdict.outcome, kind=verdict.kind,
                   missing_op=verdict.missing_op, skiplist_entry=verdict.skiplist_entry,
                   fallback_ops=fallback, message=verdict.message or message, **base)


class JunitReader:
    """Streams one JUnit XML file: ``outcomes()`` yields Outcome records as the
    parser meets each <testcase>, whose element is then freed, so a 150k-case
    file never sits in memory as a tree.  ``suite`` and ``run_properties``
    (the runner's suite-level ``tc.run.*``) fill in as parsing goes."""

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
        # Skip reasons and dispatcher messages repeat thousands of times in a
        # report; the classifier is a pure function of its input, so cache it.
        self._verdicts: dict = {}

    def outcomes(self):
        suites: list[str] = []   # names of the enclosing <testsuite> elements
        in_case = 0              # >0 while inside a <testcase>
        root = None
        try:
            for event, elem in ET.iterparse(self.path, events=("start", "end")):
                tag = elem.tag
                # <property> is most of a runner report's elements: dismissed first.
                if tag == "property" and root is not None:
                    continue
                if event == "start":
                    if root is None:
                        root = tag
                        if tag not in ("testsuites", "testsuite"):
                            raise UserError(f"{self.path}: not a JUnit XML report (root element <{tag}>, expected "
                                            "<testsuites> or <testsuite>); pass a file written by pytest --junitxml "
                                            "or another JUnit reporter")
                    if tag == "testsuite":
                        suites.append(elem.get("name") or "")
                    elif tag == "testcase":
                        in_case += 1
                    continue
                if tag == "testcase":
                    in_case -= 1
                    case = TestCase.fromelem(elem)
                    props = _properties(elem)
                    # --suite wins, then the runner's per-test tc.suite, then the suite's name.
                    suite = self.suite_override or props.get("tc.suite") or self._suite_name(suites)
                    self.suite = self.suite or suite
                    yield _case_outcome(case, props, self.profile, suite, self.path, self._verdicts)
                    self.count += 1
                    elem.clear()
                elif tag == "properties" and suites and not in_case:
                    # the suite's own properties (the runner's tc.run.*), not a test's
                    for prop in elem.iter("property"):
                        name = prop.get("name") or ""
                        if name.startswith("tc.run."):
                            self.run_properties.setdefault(name[len("tc.run."):], prop.get("value", ""))
                elif tag == "testsuite":
                    suites.pop()
        except ET.ParseError as exc:
            raise _xml_error(self.path, exc) from None

    def _suite_name(self, suites: list[str]) -> str:
        return self.run_properties.get("suite") or (suites[0] if suites else "")


def parse_junit(path: str, suite: str | None = None, profile=None) -> list[Outcome]:
    """Every outcome of one JUnit XML file (a list; ``JunitReader`` streams)."""
    return list(JunitReader(path, suite, profile).outcomes())


def ingest(store, paths: list[str], build: str, suite: str | None = None, append: bool = False,
           profile=None, command: str = "", host: str = "") -> dict:
    """Store JUnit files as one build (one run per file) in one transaction.

    Files are streamed in batches inside that transaction; any bad input
    raises UserError and rolls everything back, so nothing is stored.
    """
    if not paths:
        raise UserError("no files to ingest; pass one or more JUnit XML paths")
    if isinstance(profile, str):
        from torchconform.skiplists.profile import load_profile
        profile = load_profile(profile)
    readers = [JunitReader(p, suite=suite, profile=profile) for p in paths]  # missing files fail first
    total = 0
    with store.write() as conn:
        store.ensure_build(build, append=append, conn=conn)
        meta: dict = {}
        for reader in readers:
            run_id = None
            batch: list[Outcome] = []
            for outcome in reader.outcomes():
                batch.append(outcome)
                if len(batch) >= BATCH:
                    run_id = run_id or _start(store, conn, build, reader, host, command)
                    total += store.add_outcomes(run_id, batch, conn=conn)
                    batch = []
            run_id = run_id or _start(store, conn, build, reader, host, command)
            total += store.add_outcomes(run_id, batch, conn=conn)
            store.finish_run(run_id, 0, conn=conn)
            for key, value in reader.run_properties.items():
                if key not in ("build", "suite", "selection", "shard"):
                    meta.setdefault(key, value)
        if meta:
            store.ensure_build(build, append=True, conn=conn, **meta)
    return {"build": build, "files": len(readers), "outcomes": total}


def _start(store, conn, build, reader, host, command) -> int:
    props = reader.run_properties
    return store.start_run(build, suite=reader.suite, selection=props.get("selection") or reader.path,
                           shard=props.get("shard", ""), host=host, command=command, conn=conn)
