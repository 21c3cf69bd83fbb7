"""The skiplist file format and its validation, with ``file:line`` for every problem.

Declared as pydantic models (``SkiplistFile``, ``SkipEntry``, ``Match``), validated through
``core/yamlschema.py`` so that each message names the line and says what to write instead
(never a JSON-Schema path like ``entries/3/match`` that makes people count list items).  The
format::

    backend: refdev                 # device the entries were written for
    description: free text          # optional
    entries:
      - id: sort-stable-unsupported # optional; unique in the file (derived from match if absent)
        match:                      # exactly one of test / regex / op
          op: sort                  #   OpInfo/ModuleInfo name (glob), or full name "div.floor_rounding"
          variant: ""               #   optional OpInfo variant_test_name ("" = default variant only)
          dtype: [float32]          #   optional: one dtype or a list
          kind: test_compare_cpu    #   optional: generic test name (glob)
          # test: "*TestCommonREFDEV::test_out_*"   glob on the pytest node id
          # regex: "test_out_(add|mul)_"            re.search on the node id
        mode: skip                  # skip (not run) | xfail (run, failure expected)
        category: unsupported_feature   # known_bug | unsupported_feature | flaky | too_slow | crashes_device
        reason: stable sort is not implemented
        issue: https://github.com/org/repo/issues/12
        added: 2026-11-30
        expires: 2027-03-01         # optional: the entry stops applying after this date
        torch: ">=2.12,<2.14"       # optional: PEP 440 range of torch versions it applies to
"""
from __future__ import annotations

import datetime as _dt
import re
from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, BeforeValidator, ValidationInfo, field_validator, model_validator

from torchconform.skiplists.entries import CATEGORIES, MODES, Entry, Skiplist
from torchconform.core.yamlpos import PosDict, Problem, YamlError, load_yaml, suggest
from torchconform.core.yamlschema import Strict, check, fail, field, problems
from torchconform.errors import UserError
from torchconform.skiplists.neuron_spec import skiplist_from_spec

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_URL = re.compile(r"^https?://\S+$")
# Modes that would still run the test are wrong for these categories.
SKIP_ONLY = {"crashes_device": "an xfail still runs the test and takes the device down",
             "too_slow": "an xfail still runs the test"}
OP_ONLY_KEYS = ("variant", "dtype", "kind")


def _as_date(value):
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    if isinstance(value, str):
        try:
            return _dt.date.fromisoformat(value.strip())
        except ValueError:
            return None
    return None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]+", "-", text).strip("-")[:80] or "entry"


def _is_dtype(name: str) -> bool:
    import torch

    return isinstance(getattr(torch, name.removeprefix("torch."), None), torch.dtype)


_HOW = "`{key}` must be a non-empty string"


def _nonempty(value: str) -> str:
    if not value.strip():
        raise fail(_HOW)
    return value


Pattern = Optional[Annotated[str, AfterValidator(_nonempty)]]


def _dtype_list(value):
    dtypes = [value] if isinstance(value, str) else value if isinstance(value, list) else None
    if value is not None:
        if not dtypes or not all(isinstance(d, str) and d for d in dtypes):
            raise fail("`dtype` must be a dtype name (float32) or a list of them")
        bad = [d for d in dtypes if not _is_dtype(d)]
        if bad:
            raise fail(f"unknown dtype {bad[0]!r}; use torch names like float32, int64, bool")
    return dtypes


def _kind(value: str) -> str:
    if not value.startswith("test"):
        raise fail(f"`kind` is the generic test name, starting with 'test' (e.g. test_compare_cpu), got {value!r}")
    return value


class Match(Strict):
    """Which tests an entry covers: exactly one of test / regex / op."""

    test: Pattern = field(bad=_HOW, doc="glob on the pytest node id")
    regex: Pattern = field(bad=_HOW, doc="regular expression searched in the node id")
    op: Pattern = field(bad=_HOW, doc="OpInfo/ModuleInfo name (glob), or full name div.floor_rounding")
    variant: Optional[str] = field(bad='`variant` must be a string ("" for the default variant)',
                                   doc='OpInfo variant_test_name ("" = the default variant only); op only')
    dtype: Annotated[Optional[list[str]], BeforeValidator(_dtype_list)] = field(
        doc="one dtype or a list; op only")
    kind: Optional[Annotated[str, AfterValidator(_kind)]] = field(
        bad="`kind` is the generic test name, starting with 'test' (e.g. test_compare_cpu), got {value!r}",
        doc="generic test name (glob), e.g. test_compare_cpu; op only")

    @model_validator(mode="before")
    @classmethod
    def _one_way(cls, data):
        if isinstance(data, dict):
            chosen = [k for k in ("test", "regex", "op") if k in data]
            if len(chosen) != 1:
                raise fail("`match` needs exactly one of test (glob), regex, op; split it into several entries")
            if chosen[0] != "op":
                extra = [k for k in OP_ONLY_KEYS if k in data]
                if extra:
                    raise fail(f"`{extra[0]}` only works with `op`; put it in the {chosen[0]} pattern instead",
                               at=(extra[0],))
        return data

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value):
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise fail(f"bad regex {value!r}: {exc}; fix or escape it", code="regex") from None
        return value


def _date(value):
    date = _as_date(value)
    if date is None:
        raise fail(f"`{{key}}` must be a date YYYY-MM-DD, got {value!r}")
    return date


def _torch_range(value):
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(str(value))
        if not str(value).strip():
            raise InvalidSpecifier("empty")
    except InvalidSpecifier:
        raise fail(f"`torch` {value!r} is not a version range; write e.g. \">=2.12,<2.14\"") from None
    return str(value)


def _id(value: str) -> str:
    if not _ID.match(value):
        raise fail(f"id {value!r} must be letters, digits, '.', '_' or '-'")
    return value


def _match_mapping(value):
    if not isinstance(value, dict):
        raise fail("`match` must be a mapping with one of test / regex / op")
    return value


_REASON = "`reason` must say what is wrong in a sentence (8+ characters)"
_ISSUE = "`issue` must be the tracking issue's http(s) URL"


class SkipEntry(Strict):
    """One known issue: which tests, skipped or expected to fail, why, and where it is tracked."""

    id: Optional[Annotated[str, AfterValidator(_id)]] = field(
        bad="id {value!r} must be letters, digits, '.', '_' or '-'",
        doc="unique in the file (derived from match if absent)")
    match: Annotated[Match, BeforeValidator(_match_mapping)] = field(..., doc="exactly one of test / regex / op")
    mode: Literal[MODES] = field(..., bad=f"mode {{value!r}} is not one of {', '.join(MODES)}",
                                 doc="skip (not run) | xfail (run, failure expected)")
    category: Literal[CATEGORIES] = field(..., doc=" | ".join(CATEGORIES))
    reason: str = field(..., bad=_REASON, doc="what is wrong, in a sentence")
    issue: str = field(..., bad=_ISSUE, doc="the tracking issue's URL")
    added: Annotated[_dt.date, BeforeValidator(_date)] = field(..., doc="date the entry was written")
    expires: Annotated[Optional[_dt.date], BeforeValidator(lambda v: None if v is None else _date(v))] = field(
        doc="the entry stops applying after this date")
    torch: Annotated[Optional[str], BeforeValidator(lambda v: None if v is None else _torch_range(v))] = field(
        doc="PEP 440 range of torch versions it applies to")

    @field_validator("category", mode="before")
    @classmethod
    def _category(cls, category, info: ValidationInfo):
        if category not in CATEGORIES:
            raise fail(f"category {category!r} is not one of {', '.join(CATEGORIES)}; {suggest(category, CATEGORIES)}")
        if info.data.get("mode") == "xfail" and category in SKIP_ONLY:
            raise fail(f"category {category} needs mode skip: {SKIP_ONLY[category]}", at=("..", "mode"))
        return category

    @field_validator("reason")
    @classmethod
    def _reason(cls, reason):
        if len(reason.strip()) < 8:
            raise fail(_REASON)
        return reason

    @field_validator("issue")
    @classmethod
    def _issue(cls, issue):
        if not _URL.match(issue.strip()):
            raise fail(_ISSUE)
        if re.match(r"^https?://[^/]*\.invalid(/|$)", issue.strip()):
            raise fail("`issue` is still the placeholder URL; file the issue and paste its URL")
        return issue

    @field_validator("expires")
    @classmethod
    def _after_added(cls, expires, info: ValidationInfo):
        added = info.data.get("added")
        if expires is not None and added is not None and expires <= added:
            raise fail(f"`expires` ({expires}) must be after `added` ({added})")
        return expires


def _entry_mapping(value):
    if not isinstance(value, dict):
        raise fail("each entry must be a mapping (match, mode, category, reason, issue, added)")
    return value


def _backend(value):
    if not value or not value.strip():
        raise fail("`backend` must name the device (e.g. refdev, neuron)")
    return value


def _entries_given(value):
    if value is None:
        raise fail("missing `entries:` list; add one (it may be empty: `entries: []`)")
    return value


class SkiplistFile(Strict):
    """A skiplist: the known issues of one backend."""

    backend: Annotated[Optional[str], AfterValidator(_backend)] = field(
        bad="`backend` must name the device (e.g. refdev, neuron)", validate_default=True,
        doc="device the entries were written for")
    description: Any = field(doc="free text")
    entries: Annotated[Optional[list[Annotated[SkipEntry, BeforeValidator(_entry_mapping)]]],
                       BeforeValidator(_entries_given)] = field(
        bad="`entries` must be a list of mappings (each item starts with `- `)", validate_default=True,
        doc="the entries, in order (the first match wins)")
    spec: Any = field(doc="what a torch-neuronx spec import keeps (skiplists/neuron_spec_io.py)")


TOP_KEYS = tuple(SkiplistFile.model_fields)
ENTRY_KEYS = tuple(SkipEntry.model_fields)
MATCH_KEYS = tuple(Match.model_fields)


def _unknown(parent: str, key) -> str:
    if parent == "entries":
        return f"unknown entry key {key!r}; {suggest(key, ENTRY_KEYS)}"
    if parent == "entries.match":
        return f"unknown match key {key!r}; {suggest(key, MATCH_KEYS)}"
    return f"unknown top-level key {key!r}; {suggest(key, TOP_KEYS)}"


def _missing(parent: str, key) -> str:
    return f"entry lacks required `{key}`"


def _entry(model: SkipEntry, path: str, line: int) -> Entry:
    match = model.match
    how = next(k for k in ("test", "regex", "op") if getattr(match, k) is not None)
    fields: dict = {how: getattr(match, how)}
    if how == "op":
        fields["variant"], fields["kind"] = match.variant, match.kind
        if match.dtype is not None:
            fields["dtypes"] = tuple(d.removeprefix("torch.") for d in match.dtype)
    entry = Entry(mode=model.mode, category=model.category, reason=model.reason.strip(), issue=model.issue.strip(),
                  added=model.added, expires=model.expires, torch=model.torch, path=path, line=line, **fields)
    entry.id = model.id or _slug(entry.describe_match())
    return entry


def validate(data, path: str) -> tuple[Skiplist, list[Problem]]:
    """Check a loaded document; return what could be built and every problem found."""
    sl = Skiplist(path=path)
    if data is None:
        return sl, [Problem(path, 1, "schema", "empty file; write `backend:` and an `entries:` list")]
    if not isinstance(data, PosDict):
        return sl, [Problem(path, getattr(data, "line", 1), "schema",
                            "top level must be a mapping with `backend` and `entries`")]
    model, failures = check(SkiplistFile, data, unknown=_unknown, missing=_missing)
    found = problems(failures, path)
    sl.description = str(data.get("description") or "")
    raw_entries = data.get("entries")
    if model is not None:
        sl.backend, entries = model.backend.strip(), model.entries
    else:
        # the entries without an error of their own are still built (lint reads them all)
        if isinstance(data.get("backend"), str) and data["backend"].strip():
            sl.backend = data["backend"].strip()
        if not isinstance(raw_entries, list):
            return sl, found
        bad = {f.loc[1] for f in failures if len(f.loc) > 1 and f.loc[0] == "entries"}
        entries = [None if i in bad else SkipEntry.model_validate(raw) for i, raw in enumerate(raw_entries)]
    seen_ids: dict[str, int] = {}
    for item, line in zip(entries, raw_entries.item_lines):
        if item is None:
            continue
        entry = _entry(item, path, line)
        if entry.id in seen_ids:
            found.append(Problem(path, line, "duplicate",
                                 f"id {entry.id!r} already used at line {seen_ids[entry.id]}; ids must be unique "
                                 "in a file"))
            continue
        seen_ids[entry.id] = line
        sl.entries.append(entry)
    return sl, found


def parse_skiplist(path: str, device: str | None = None) -> tuple[Skiplist, list[Problem]]:
    """Load and validate one file; YAML syntax errors come back as problems too.
    A ``.json`` file is a torch-neuronx spec (skiplists/neuron_spec.py), its tests named for ``device``."""
    if path.endswith(".json"):
        try:
            return skiplist_from_spec(path, device), []
        except UserError as exc:
            return Skiplist(path=path), [Problem(path, 1, "spec", str(exc))]
    try:
        data = load_yaml(path)
    except YamlError as exc:
        return Skiplist(path=path), [Problem(path, exc.line, "yaml", exc.message)]
    return validate(data, path)


def load_skiplist(path: str, device: str | None = None) -> Skiplist:
    """Load one file for use; the first error becomes a one-line ``UserError``."""
    if path.endswith(".json"):
        return skiplist_from_spec(path, device)   # its errors are one line already
    sl, problems = parse_skiplist(path)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        p = errors[0]
        more = f" (and {len(errors) - 1} more; run `torchconform skiplist lint {path}`)" if len(errors) > 1 else ""
        raise UserError(f"{p.path}:{p.line}: {p.message}{more}")
    return sl


def load_entries(paths, device: str | None = None) -> list[Entry]:
    """Entries of several files in order (the first match wins when applying)."""
    out: list[Entry] = []
    for path in paths:
        out.extend(load_skiplist(path, device).entries)
    return out
