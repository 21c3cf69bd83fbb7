"""``torchconform skiplist lint``: keep skiplists honest.

Checks, each reported as ``file:line: severity: [code] message``:

* ``schema``   the file format (see ``schema.py``), YAML syntax, duplicate keys;
* ``regex``    regular expressions that do not compile;
* ``duplicate`` two entries with the same match (in one file or across files);
* ``overlap``  an entry whose tests are all covered by an earlier one (it never applies:
  error), or, with collected tests, tests matched by two entries (warning);
* ``expired``  entries past their ``expires`` date (they no longer apply: remove or renew);
* ``torch``    entries whose torch range excludes the installed torch (warning: inactive);
* ``profile``  a backend profile (``profile.yaml``, or any file with ``device:`` and no
  ``entries:``) is checked against its own format instead (``profile_schema.py``):
  unknown keys, wrong types, regexes without their group;
* ``stale``    with collected tests: entries that match no test.  A skip line naming a
  test that no longer exists would silently swallow a real failure later, when a test
  with that name comes back with a different meaning.
"""
from __future__ import annotations

import datetime as _dt
import fnmatch
import os
import re

from torchconform.skiplists.entries import Entry, TestInfo
from torchconform.core.yamlpos import Problem
from torchconform.skiplists.schema import parse_skiplist
from torchconform.core.profile_schema import check_profile, is_profile_document
from torchconform.core.yamlpos import YamlError, load_yaml

_GLOB_CHARS = re.compile(r"[*?\[]")


def lint(paths, collected: list[TestInfo] | None = None, today: _dt.date | None = None,
         torch_version: str | None = None) -> list[Problem]:
    problems: list[Problem] = []
    entries: list[Entry] = []
    for path in paths:
        profile_problems = lint_profile(path)
        if profile_problems is not None:
            problems.extend(profile_problems)
            continue
        sl, found = parse_skiplist(path)
        problems.extend(found)
        entries.extend(sl.entries)
    problems.extend(_duplicates_and_shadows(entries))
    for e in entries:
        if e.expired(today):
            problems.append(Problem(e.path, e.line, "expired",
                                    f"entry {e.id} expired on {e.expires}; it no longer applies: check the issue, then remove it or extend `expires`"))
        elif not e.applies_to_torch(torch_version):
            problems.append(Problem(e.path, e.line, "torch",
                                    f"entry {e.id} is inactive on this torch (range {e.torch})", severity="warning"))
    if collected is not None:
        problems.extend(_against_collected(entries, collected, today, torch_version))
    return sorted(problems, key=lambda p: (p.path, p.line, p.code))


def lint_profile(path: str) -> list[Problem] | None:
    """The problems of a backend profile file; None when ``path`` is a skiplist."""
    named = os.path.basename(path) in ("profile.yaml", "profile.yml")
    try:
        data = load_yaml(path)
    except YamlError as exc:
        return [Problem(path, exc.line, "yaml", exc.message)] if named else None
    return check_profile(data, path) if named or is_profile_document(data) else None


def _duplicates_and_shadows(entries: list[Entry]) -> list[Problem]:
    out: list[Problem] = []
    first_by_key: dict[tuple, Entry] = {}
    for i, e in enumerate(entries):
        key = e.match_key()
        if key in first_by_key:
            d = first_by_key[key]
            out.append(Problem(e.path, e.line, "duplicate",
                               f"entry {e.id} matches the same tests as {d.id} at {d.where}; keep one"))
            continue
        first_by_key[key] = e
        for earlier in entries[:i]:
            if earlier.match_key() != key and covers(earlier, e):
                out.append(Problem(e.path, e.line, "overlap",
                                   f"entry {e.id} ({e.describe_match()}) is covered by {earlier.id} at {earlier.where}, "
                                   "which wins; remove one or narrow the earlier match"))
                break
    return out


def covers(a: Entry, b: Entry) -> bool:
    """True when every test ``b`` matches is also matched by ``a`` (decidable cases only)."""
    if a.op is not None and b.op is not None:
        a_full = f"{a.op}.{a.variant}" if a.variant else a.op
        b_full = f"{b.op}.{b.variant}" if b.variant else b.op
        if _GLOB_CHARS.search(b_full):
            if a_full != b_full and a.op != "*":
                return False
        elif not (fnmatch.fnmatchcase(b_full, a_full) or (a.variant is None and fnmatch.fnmatchcase(b_full, a.op + ".*"))):
            return False
        if a.variant is not None and b.variant is None:
            return False
        if a.dtypes and (not b.dtypes or not set(b.dtypes) <= set(a.dtypes)):
            return False
        if a.kind:
            if not b.kind:
                return False
            if _GLOB_CHARS.search(b.kind):
                return a.kind == b.kind or a.kind == "*"
            return fnmatch.fnmatchcase(b.kind, a.kind)
        return True
    if b.test is not None and not _GLOB_CHARS.search(b.test):
        # b names one test id literally: any id-based entry either matches it or not.
        if a.test is not None:
            return fnmatch.fnmatchcase(b.test, a.test)
        if a.regex is not None:
            return re.search(a.regex, b.test) is not None
    return False


def _against_collected(entries: list[Entry], collected: list[TestInfo], today, torch_version) -> list[Problem]:
    out: list[Problem] = []
    matched_by: dict[str, list[Entry]] = {}
    for e in entries:
        hits = [t.test_id for t in collected if e.matches(t)]
        if not hits:
            out.append(Problem(e.path, e.line, "stale",
                               f"entry {e.id} ({e.describe_match()}) matches none of the {len(collected)} collected tests; "
                               "remove it (or fix its match) before a new test with that name inherits it"))
        for tid in hits:
            matched_by.setdefault(tid, []).append(e)
    pairs: dict[tuple[int, int], list[str]] = {}
    for tid, es in matched_by.items():
        if len(es) > 1:
            pairs.setdefault((id(es[0]), id(es[1])), []).append(tid)
    by_id = {id(e): e for e in entries}
    for (a, b), tids in pairs.items():
        first, second = by_id[a], by_id[b]
        out.append(Problem(second.path, second.line, "overlap",
                           f"entry {second.id} and {first.id} at {first.where} both match {len(tids)} test(s), e.g. {tids[0]}; "
                           f"{first.id} wins there", severity="warning"))
    return out


def format_problems(problems: list[Problem]) -> str:
    return "\n".join(str(p) for p in problems)
