"""Streaming JUnit XML reader: test cases in, Outcome records out.

Test cases that carry torchconform's ``tc`` attribute (written by the runner's JUnit
sink, db/junit/write.py, with the suite's ``tc.default.*``; or the older forms,
a ``tc`` property or one ``tc.<field>`` property per field) are taken as they are; others are classified
from their failure/error/skip messages by the one classifier,
``core.classify.classify_text``, so an ingested file and a live run of the same
tests agree.

Parsing (db/junit/parse.py) streams the file and hands over each test case's
attributes, tc fields, first result element and captured output; this module turns
them into store rows, caching what repeats (tc values, messages, places, values).
"""
from __future__ import annotations

import os

from torchconform.core.classify import classify_text
from torchconform.core.numeric import FIELDS
from torchconform.core.profile import generic_profile
from torchconform.core.outcome import (
    as_float,
    PASS, PASS_FALLBACK, TIERS, Outcome, bound_message, check_outcome, render_repro,
)
from torchconform.db.junit.write import class_part, decode_tc, test_id_of_case, test_id_prefix, unescape_tc
from torchconform.db.junit.parse import iter_cases
from torchconform.db.columns import outcome_from_rows
from torchconform.db.values import US_PER_S, duration_us
from torchconform.errors import UserError

# Classifier verdicts kept per reader (skip reasons repeat thousands of times).
CACHE_LIMIT = 50_000
# The numerical error fields (results' last two columns) and what a tc value holding one contains.
ERROR_FIELDS = frozenset(FIELDS)
ERROR_KEY = "_err="
_ABS_KEY, _REL_SEP = FIELDS[0] + "=", ";" + FIELDS[1] + "="
NO_ERRORS = (None, None)
# The cached entry of a tc value that says no outcome: the test case is classified.
CLASSIFY = ()


class JunitReader:
    """Streams one JUnit XML file: ``outcomes()`` yields Outcome records as the parser
    meets each <testcase>.  ``suite`` and ``run_properties`` (the runner's suite-level
    ``tc.run.*``) fill in as parsing goes."""

    def __init__(self, path: str, suite: str | None = None, profile=None):
        if not os.path.isfile(path):
            raise UserError(f"{path}: no such file; pass the path of a JUnit XML report")
        if profile is None:
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
        values: list[tuple] = []
        for tests, results, new_values in self.record_chunks():
            values += new_values
            for test, (attempt, value, us, abs_err, rel_err) in zip(tests, results):
                v = values[value]
                yield outcome_from_rows(test, (attempt, *v[:6], us / US_PER_S, v[6], v[7], abs_err, rel_err, v[8]))

    def record_chunks(self, compact_repro: bool = False):
        """What ingest stores, a parsed piece of the file at a time, without building
        Outcome objects: ``(tests, results, values)``, three lists.  Per test case, its
        ``tests`` row (db/store.py's ``test_row`` layout) and its results row
        ``(attempt, value, duration in microseconds, max_abs_err, max_rel_err)``, where
        ``value`` indexes every value this reader has yielded so far: what a result
        says, VALUE_COLUMNS order (db/values.py).  ``values`` are the values first said
        in this piece: a file of 150k test cases says a few thousand things, each once.

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
        # value -> its index (every value yielded so far); the values new in this chunk
        value_index: dict[tuple, int] = {}
        new_values: list[tuple] = []
        # Per-case texts that repeat (bounded like the other caches): a message as given
        # -> as stored; a time attribute -> microseconds; (classname, file) -> the file,
        # the class part and the test-id prefix
        messages: dict[str, str] = {}
        durations: dict[str | None, int] = {}
        places: dict[tuple, tuple] = {}

        def suite_of(fields, state) -> str:
            # --suite wins, then the runner's per-test tc suite, then the run's, then the outer suite's name.
            suite = override or fields.get("suite") or run_props.get("suite") or state[0]
            self.suite = self.suite or suite
            return suite

        def new_entry(name, fields, state) -> tuple:
            # What a test case's tc fields (its suite's defaults applied) say, checked
            # once per distinct tc value: (op, variant, dtype, test id or "", suite,
            # attempt, the value's first six fields, a passing outcome's message, repro,
            # template to render the repro from, tolerance tier).  Repro: its own, "" with no template,
            # None when left to the run's template (compact_repro), else rendered per test.
            outcome, kind, tier = fields["outcome"], fields.get("kind", ""), fields.get("tier", "")
            try:
                check_outcome(outcome, kind)
                attempt = int(fields.get("attempt") or 1)
                if tier and tier not in TIERS:
                    raise ValueError(f"unknown tolerance tier {tier!r}")
            except ValueError as exc:
                test = fields.get("test_id") or name
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
            message = fields.get("message", "")
            return (fields.get("op", ""), fields.get("variant", ""), fields.get("dtype", ""),
                    fields.get("test_id", ""), suite, attempt,
                    (outcome, kind, fields.get("missing_op", ""),
                     " ".join(fallback.replace(",", " ").split()) if fallback else "",
                     fields.get("skiplist_entry", ""), fields.get("device", "")),
                    bound_message(message) if message else "", repro, render_from, tier)

        def entry_of(name, packed, state):
            # (op, new_entry of the tc value) of a packed tc value; cached per suite, as is
            # the entry of the value without its op: most distinct values differ only by
            # op.  CLASSIFY (cached too) when the value says no outcome: the caller classifies
            # the case from its result element, as for a file from another writer.
            if packed.startswith("op="):
                end = packed.find(";")
                rest, op = ("", packed[3:]) if end < 0 else (packed[end + 1:], packed[3:end])
            else:
                at = packed.find(";op=")
                end = packed.find(";", at + 4)
                rest, op = (packed, None) if at < 0 else (packed[:at], packed[at + 4:]) if end < 0 else \
                    (packed[:at] + packed[end:], packed[at + 4:end])
            if op is not None and (rest.startswith("op=") or ";op=" in rest):
                rest, op = packed, None   # two op fields: decoded whole, and said to be malformed
            base = state[3].get(rest)
            if base is None:
                try:
                    fields = {**state[1], **decode_tc(rest, shared)} if rest else dict(state[1])
                except ValueError:
                    _decode(packed, path, name, shared)   # raises, naming the whole value
                    raise
                if not fields.get("outcome"):
                    if len(state[2]) < CACHE_LIMIT:
                        state[2][packed] = CLASSIFY
                    return CLASSIFY
                base = new_entry(name, fields, state)
                if len(state[3]) < CACHE_LIMIT:
                    state[3][rest] = base
            if op is None:
                entry = (base[0], base)
            else:
                if "%" in op:
                    op = unescape_tc(op)
                entry = (shared(op, op), base)
            if len(state[2]) < CACHE_LIMIT:
                state[2][packed] = entry
            return entry

        # What to do when a per-case cache lookup misses (the lookups themselves are
        # inlined in on_case, which runs for every test case).
        def new_value(value: tuple) -> int:
            index = value_index[value] = len(value_index)
            new_values.append(value)
            return index

        def new_duration(text) -> int:
            us = _duration_us(text)
            if len(durations) < CACHE_LIMIT:
                durations[text] = us
            return us

        def new_place(classname: str, file_: str) -> tuple:
            # (file, class part, test id of a nameless case, test-id prefix of a named one)
            place = (file_, class_part(classname, file_), test_id_of_case(classname, "", file_),
                     test_id_prefix(classname, file_))
            if len(places) < CACHE_LIMIT:
                places[(classname, file_)] = place
            return place

        def on_case(classname, name, time_, file_, packed, props, result_tag, result_attrs, result_text, captured,
                    state):
            # Called by the parser at each </testcase>: one tests row and one results row.
            nonlocal first_template
            if first_template is None:
                first_template = self.repro_template = state[4]
            # The numerical errors differ per test: split off before the cache lookups.
            errors = NO_ERRORS
            if packed and ERROR_KEY in packed:
                packed, errors = _split_errors(packed, path, name, shared)
            if props and (props.keys() & ERROR_FIELDS):
                errors = _errors(props, path, name)
            # The runner's form, a packed tc value or none (with its suite's defaults),
            # repeats across tests: its checked entry is cached per suite.
            if props:
                entry = CLASSIFY
                fields = {**state[1], **_decode(packed, path, name, shared), **props}
                if fields.get("outcome"):
                    base = new_entry(name, fields, state)
                    entry = (base[0], base)
            else:
                entry = state[2].get(packed or "")
                if entry is None:
                    entry = entry_of(name, packed or "", state)
            name = name or ""
            classname, file_ = classname or "", file_ or ""
            place = places.get((classname, file_)) or new_place(classname, file_)
            if entry is CLASSIFY:
                fields = {**state[1], **_decode(packed, path, name, shared), **props} if packed or props else state[1]
                tests.append((fields.get("test_id") or (place[3] + name if name else place[2]), suite_of(fields, state),
                               place[0], place[1], name, fields.get("op", ""), fields.get("variant", ""),
                               fields.get("dtype", "")))
                value = classified_value(fields, result_tag, result_attrs, result_text, captured, profile, verdicts)
                index = value_index.get(value)
                us = durations.get(time_)
                results.append((1, new_value(value) if index is None else index,
                                new_duration(time_) if us is None else us) + errors)
                return
            op, (_, variant, dtype, test_id, suite, attempt, head, message, repro, render_from, tier) = entry
            if not test_id:
                test_id = place[3] + name if name else place[2]
            if render_from:
                repro = render_repro(render_from, test_id, op)
            if result_tag:
                text = result_attrs.get("message") or result_text
                message = messages.get(text)
                if message is None:
                    message = bound_message(text)
                    if len(messages) < CACHE_LIMIT:
                        messages[text] = message
            value = head + (message, repro, tier)
            index = value_index.get(value)
            if index is None:
                index = new_value(value)
            us = durations.get(time_)
            if us is None:
                us = new_duration(time_)
            tests.append((test_id, suite, place[0], place[1], name, op, variant, dtype))
            results.append((attempt, index, us, *errors))

        for _ in iter_cases(path, run_props, on_case):
            if tests:
                chunk = (tests, results, new_values)
                tests, results, new_values = [], [], []
                strings.clear()  # the objects stay shared within a chunk, enough for pickle
                yield chunk


def _decode(packed: str | None, path: str, name: str, shared) -> dict:
    if not packed:
        return {}
    try:
        return decode_tc(packed, shared)
    except ValueError as exc:
        raise _bad_case(path, name, exc) from None


def _bad_case(path: str, name: str, exc: ValueError) -> UserError:
    return UserError(f"{path}: test case {name!r}: {exc}; regenerate the file "
                     "with the torchconform runner")


def _errors(fields: dict, path: str, name: str) -> tuple:
    """(max_abs_err, max_rel_err) of a test case's tc fields, None where absent."""
    try:
        return tuple(as_float(fields.get(name)) for name in FIELDS)
    except ValueError as exc:
        raise _bad_case(path, name, exc) from None


def _split_errors(packed: str, path: str, name: str, shared) -> tuple[str, tuple]:
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
                raise _bad_case(path, name, exc) from None
            return (packed[:at - 1] if at else ""), errors
    at = min((i for i in (packed.find(name + "=") for name in FIELDS) if i >= 0), default=-1)
    if at < 0:
        return packed, NO_ERRORS
    tail = _decode(packed[at:], path, name, shared)
    errors = _errors(tail, path, name)
    if tail.keys() <= ERROR_FIELDS:
        packed = packed[:at - 1] if at else ""
    return packed, errors


def _error(text: str) -> float:
    number = float(text)
    if not number >= 0:
        raise ValueError(f"a numeric error must be a number >= 0, got {text!r}")
    return number


def _duration_us(text: str | None) -> int:
    """A time attribute as whole microseconds (0 when missing or not a finite number)."""
    try:
        return duration_us(float(text or 0.0))
    except (ValueError, OverflowError):
        return 0


def classified_value(fields: dict, result_tag: str, result_attrs: dict, result_text: str, captured, profile,
                     cache: dict) -> tuple:
    """What the result of a test case without torchconform's classification says
    (VALUE_COLUMNS order), classified from its rendered text like the plugin would;
    ``cache`` keeps the verdict and the stored message per result element."""
    if result_tag:
        message, type_name = result_attrs.get("message"), result_attrs.get("type") or ""
        key = (result_tag, type_name, message, result_text)
    else:
        key = message = type_name = None
    known = cache.get(key)
    if known is None:
        if result_tag:
            text = "\n".join(t for t in (message, result_text) if t)
            verdict = classify_text(text, profile, status=result_tag, type_name=type_name)
            stored = bound_message(verdict.message or message or result_text)
        else:
            verdict = classify_text("", profile, status="passed", type_name="")
            stored = bound_message(verdict.message) if verdict.message else None   # None: the case's own
        known = (verdict, stored)
        if len(cache) < CACHE_LIMIT:
            cache[key] = known
    verdict, stored = known
    fallback = ""
    if verdict.outcome == PASS and captured:
        # A pass whose captured output shows CPU-fallback warnings passed only through fallback.
        fallback = " ".join(profile.find_fallback_ops("\n".join(captured)))
    if stored is None:
        stored = bound_message(fields.get("message", ""))
    return (PASS_FALLBACK if fallback else verdict.outcome, verdict.kind, verdict.missing_op, fallback,
            verdict.skiplist_entry, fields.get("device", ""), stored, fields.get("repro", ""), "")


def parse_junit(path: str, suite: str | None = None, profile=None) -> list[Outcome]:
    """Every outcome of one JUnit XML file (a list; ``JunitReader`` streams)."""
    return list(JunitReader(path, suite, profile).outcomes())
