"""The skiplist file format and its validation, with ``file:line`` for every problem.

Hand-written rather than a JSON Schema so that each message can name the line and
say what to write instead (a JSON-Schema error path like ``entries/3/match`` makes
people count list items).  The format::

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

from torchconform.skiplists.entries import CATEGORIES, MODES, Entry, Skiplist
from torchconform.core.yamlpos import PosDict, PosList, Problem, YamlError, load_yaml, suggest

TOP_KEYS = ("backend", "description", "entries", "spec")   # spec: skiplists/neuron_spec_io.py
ENTRY_KEYS = ("id", "match", "mode", "category", "reason", "issue", "added", "expires", "torch")
REQUIRED_ENTRY_KEYS = ("match", "mode", "category", "reason", "issue", "added")
MATCH_KEYS = ("test", "regex", "op", "variant", "dtype", "kind")
OP_ONLY_KEYS = ("variant", "dtype", "kind")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_URL = re.compile(r"^https?://\S+$")
# Modes that would still run the test are wrong for these categories.
SKIP_ONLY = {"crashes_device": "an xfail still runs the test and takes the device down",
             "too_slow": "an xfail still runs the test"}


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


def validate(data, path: str) -> tuple[Skiplist, list[Problem]]:
    """Check a loaded document; return what could be built and every problem found."""
    problems: list[Problem] = []
    sl = Skiplist(path=path)

    def err(line, code, msg, severity="error"):
        problems.append(Problem(path, line, code, msg, severity))

    if data is None:
        err(1, "schema", "empty file; write `backend:` and an `entries:` list")
        return sl, problems
    if not isinstance(data, PosDict):
        err(getattr(data, "line", 1), "schema", "top level must be a mapping with `backend` and `entries`")
        return sl, problems
    for key in data:
        if key not in TOP_KEYS:
            err(data.line_of(key), "schema", f"unknown top-level key {key!r}; {suggest(key, TOP_KEYS)}")
    backend = data.get("backend")
    if not isinstance(backend, str) or not backend.strip():
        err(data.line_of("backend"), "schema", "`backend` must name the device (e.g. refdev, neuron)")
    else:
        sl.backend = backend.strip()
    sl.description = str(data.get("description") or "")
    entries = data.get("entries")
    if entries is None:
        err(data.line, "schema", "missing `entries:` list; add one (it may be empty: `entries: []`)")
        return sl, problems
    if not isinstance(entries, PosList):
        err(data.line_of("entries"), "schema", "`entries` must be a list of mappings (each item starts with `- `)")
        return sl, problems

    seen_ids: dict[str, int] = {}
    for raw, line in zip(entries, entries.item_lines):
        entry = _validate_entry(raw, line, path, err)
        if entry is None:
            continue
        if entry.id in seen_ids:
            err(line, "duplicate", f"id {entry.id!r} already used at line {seen_ids[entry.id]}; ids must be unique in a file")
            continue
        seen_ids[entry.id] = line
        sl.entries.append(entry)
    return sl, problems


def _validate_entry(raw, line, path, err) -> Entry | None:
    if not isinstance(raw, PosDict):
        err(line, "schema", "each entry must be a mapping (match, mode, category, reason, issue, added)")
        return None
    ok = True
    for key in raw:
        if key not in ENTRY_KEYS:
            err(raw.line_of(key), "schema", f"unknown entry key {key!r}; {suggest(key, ENTRY_KEYS)}")
            ok = False
    for key in REQUIRED_ENTRY_KEYS:
        if key not in raw:
            err(line, "schema", f"entry lacks required `{key}`")
            ok = False
    if not ok:
        return None

    mode, category = raw["mode"], raw["category"]
    if mode not in MODES:
        err(raw.line_of("mode"), "schema", f"mode {mode!r} is not one of {', '.join(MODES)}")
        ok = False
    if category not in CATEGORIES:
        err(raw.line_of("category"), "schema", f"category {category!r} is not one of {', '.join(CATEGORIES)}; {suggest(category, CATEGORIES)}")
        ok = False
    elif mode == "xfail" and category in SKIP_ONLY:
        err(raw.line_of("mode"), "schema", f"category {category} needs mode skip: {SKIP_ONLY[category]}")
        ok = False
    reason = raw["reason"]
    if not isinstance(reason, str) or len(reason.strip()) < 8:
        err(raw.line_of("reason"), "schema", "`reason` must say what is wrong in a sentence (8+ characters)")
        ok = False
    issue = raw["issue"]
    if not isinstance(issue, str) or not _URL.match(issue.strip()):
        err(raw.line_of("issue"), "schema", "`issue` must be the tracking issue's http(s) URL")
        ok = False
    elif re.match(r"^https?://[^/]*\.invalid(/|$)", issue.strip()):
        err(raw.line_of("issue"), "schema", "`issue` is still the placeholder URL; file the issue and paste its URL")
        ok = False
    added = _as_date(raw["added"])
    if added is None:
        err(raw.line_of("added"), "schema", f"`added` must be a date YYYY-MM-DD, got {raw['added']!r}")
        ok = False
    expires = None
    if raw.get("expires") is not None:
        expires = _as_date(raw["expires"])
        if expires is None:
            err(raw.line_of("expires"), "schema", f"`expires` must be a date YYYY-MM-DD, got {raw['expires']!r}")
            ok = False
        elif added is not None and expires <= added:
            err(raw.line_of("expires"), "schema", f"`expires` ({expires}) must be after `added` ({added})")
            ok = False
    torch_range = raw.get("torch")
    if torch_range is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(str(torch_range))
            if not str(torch_range).strip():
                raise InvalidSpecifier("empty")
        except InvalidSpecifier:
            err(raw.line_of("torch"), "schema", f"`torch` {torch_range!r} is not a version range; write e.g. \">=2.12,<2.14\"")
            ok = False

    match = raw["match"]
    fields = _validate_match(match, raw.line_of("match"), err)
    if fields is None:
        ok = False
    entry_id = raw.get("id")
    if entry_id is not None and (not isinstance(entry_id, str) or not _ID.match(entry_id)):
        err(raw.line_of("id"), "schema", f"id {entry_id!r} must be letters, digits, '.', '_' or '-'")
        ok = False
    if not ok:
        return None
    entry = Entry(mode=mode, category=category, reason=reason.strip(), issue=issue.strip(), added=added,
                  expires=expires, torch=str(torch_range) if torch_range is not None else None,
                  path=path, line=line, **fields)
    entry.id = entry_id or _slug(entry.describe_match())
    return entry


def _validate_match(match, line, err) -> dict | None:
    if not isinstance(match, PosDict):
        err(line, "schema", "`match` must be a mapping with one of test / regex / op")
        return None
    ok = True
    for key in match:
        if key not in MATCH_KEYS:
            err(match.line_of(key), "schema", f"unknown match key {key!r}; {suggest(key, MATCH_KEYS)}")
            ok = False
    chosen = [k for k in ("test", "regex", "op") if k in match]
    if len(chosen) != 1:
        err(line, "schema", "`match` needs exactly one of test (glob), regex, op; split it into several entries")
        return None
    how = chosen[0]
    if how != "op":
        extra = [k for k in OP_ONLY_KEYS if k in match]
        if extra:
            err(match.line_of(extra[0]), "schema", f"`{extra[0]}` only works with `op`; put it in the {how} pattern instead")
            ok = False
    value = match[how]
    if not isinstance(value, str) or not value.strip():
        err(match.line_of(how), "schema", f"`{how}` must be a non-empty string")
        return None
    out: dict = {how: value}
    if how == "regex":
        try:
            re.compile(value)
        except re.error as exc:
            err(match.line_of("regex"), "regex", f"bad regex {value!r}: {exc}; fix or escape it")
            ok = False
    if how == "op":
        variant = match.get("variant")
        if variant is not None and not isinstance(variant, str):
            err(match.line_of("variant"), "schema", "`variant` must be a string (\"\" for the default variant)")
            ok = False
        out["variant"] = variant
        dtype = match.get("dtype")
        dtypes = [dtype] if isinstance(dtype, str) else dtype if isinstance(dtype, list) else None
        if dtype is not None:
            if not dtypes or not all(isinstance(d, str) and d for d in dtypes):
                err(match.line_of("dtype"), "schema", "`dtype` must be a dtype name (float32) or a list of them")
                ok = False
            else:
                bad = [d for d in dtypes if not _is_dtype(d)]
                if bad:
                    err(match.line_of("dtype"), "schema", f"unknown dtype {bad[0]!r}; use torch names like float32, int64, bool")
                    ok = False
                out["dtypes"] = tuple(d.removeprefix("torch.") for d in dtypes)
        kind = match.get("kind")
        if kind is not None and (not isinstance(kind, str) or not kind.startswith("test")):
            err(match.line_of("kind"), "schema", f"`kind` is the generic test name, starting with 'test' (e.g. test_compare_cpu), got {kind!r}")
            ok = False
        out["kind"] = kind
    return out if ok else None


def _is_dtype(name: str) -> bool:
    import torch

    return isinstance(getattr(torch, name.removeprefix("torch."), None), torch.dtype)


def parse_skiplist(path: str, device: str | None = None) -> tuple[Skiplist, list[Problem]]:
    """Load and validate one file; YAML syntax errors come back as problems too.
    A ``.json`` file is a torch-neuronx spec (skiplists/neuron_spec.py), its tests named for ``device``."""
    if path.endswith(".json"):
        from torchconform.errors import UserError
        from torchconform.skiplists.neuron_spec import skiplist_from_spec

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
    from torchconform.errors import UserError

    if path.endswith(".json"):
        from torchconform.skiplists.neuron_spec import skiplist_from_spec

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
