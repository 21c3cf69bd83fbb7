"""``torchconform skiplist propose``: turn a build's failures into candidate entries,
and (``--prune``) propose removing entries that the build shows to be stale.

Candidates are grouped so that one entry covers one problem: failures of the same
OpInfo/ModuleInfo name, variant and test kind become one ``op`` entry listing the
failing dtypes; tests without an op become one ``test`` entry each (their exact id).
Categories follow the outcome: ``crash`` -> crashes_device (skip), ``timeout`` ->
too_slow (skip), ``fail``/``error`` -> known_bug (xfail, so a fix shows up as xpass).

An entry is proposed for removal when, in the build,
* every test it matches passed (pass, pass_fallback) or xpassed, or
* it matches no test of the build at all.
Tests of ``skip`` entries are not run, so nothing can be said about them from a normal
build; run the build with ``--tc-skiplist-audit`` (skip entries run as xfail) first.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from collections import OrderedDict
from dataclasses import dataclass, field

import yaml

from torchconform.core.outcome import CRASH, ERROR, FAIL, PASSING, SKIP_BACKEND, SKIPLIST, TIMEOUT, XPASS
from torchconform.skiplists.entries import Entry, first_match, info_from_outcome
from torchconform.core.yamlpos import load_yaml
from torchconform.errors import UserError

PLACEHOLDER_ISSUE = "https://issue.invalid/file-an-issue-and-paste-its-url"
_CATEGORY = {CRASH: ("crashes_device", "skip"), TIMEOUT: ("too_slow", "skip"),
             FAIL: ("known_bug", "xfail"), ERROR: ("known_bug", "xfail")}
FAILING = frozenset(_CATEGORY)


@dataclass
class Candidate:
    entry: dict                 # the YAML mapping to write
    tests: list[str] = field(default_factory=list)


@dataclass
class Removal:
    entry: Entry
    why: str


def _device_base(device: str) -> str:
    return (device or "").split(":", 1)[0]


def _kind_of(o) -> str:
    info = info_from_outcome(o)
    return info.kind if info.kind != (o.name or "") else ""


def covered(outcomes, existing: list[Entry], today: _dt.date | None = None) -> list[tuple[str, Entry]]:
    """(test id, entry) for the failures propose_entries leaves out because an entry of
    ``existing`` already covers them (whether or not the run applied that skiplist)."""
    today = today or _dt.date.today()
    out = []
    for o in outcomes:
        if o.outcome in _CATEGORY and not o.skiplist_entry:
            entry = first_match(existing, info_from_outcome(o), today)
            if entry is not None:
                out.append((o.test_id, entry))
    return out


def propose_entries(outcomes, existing: list[Entry], build: str, issue: str | None = None,
                    today: _dt.date | None = None) -> list[Candidate]:
    """Candidate entries for the build's failures not already covered by ``existing``."""
    today = today or _dt.date.today()
    groups: "OrderedDict[tuple, Candidate]" = OrderedDict()
    for o in outcomes:
        if o.outcome not in _CATEGORY or o.skiplist_entry:
            continue
        if first_match(existing, info_from_outcome(o), today) is not None:
            continue
        category, mode = _CATEGORY[o.outcome]
        kind = _kind_of(o)
        reason = f"{o.outcome} on {_device_base(o.device) or 'the device'} in build {build}: {o.message or 'no message'}"
        if o.op and kind:
            key = ("op", o.op, kind, category)
            cand = groups.get(key)
            if cand is None:
                # ``op`` as stored is the full OpInfo name, which matches only that variant.
                match = {"op": o.op, "dtype": [], "kind": kind}
                cand = groups[key] = Candidate(_entry_dict(_slug(f"{o.op}-{kind}"), match, mode, category, reason, issue, today))
            if o.dtype and o.dtype not in cand.entry["match"]["dtype"]:
                cand.entry["match"]["dtype"].append(o.dtype)
            cand.tests.append(o.test_id)
        else:
            key = ("test", o.test_id)
            groups[key] = Candidate(_entry_dict(_slug(o.name or o.test_id), {"test": o.test_id}, mode, category, reason, issue, today),
                                    [o.test_id])
    out = list(groups.values())
    used: set[str] = {e.id for e in existing}
    for c in out:
        match = c.entry["match"]
        if "dtype" in match:
            if match["dtype"]:
                match["dtype"] = sorted(match["dtype"])
            else:
                del match["dtype"]
        c.entry["id"] = _unique(c.entry["id"], used)
    return out


def _entry_dict(entry_id, match, mode, category, reason, issue, today) -> dict:
    return {"id": entry_id, "match": match, "mode": mode, "category": category,
            "reason": reason[:300], "issue": issue or PLACEHOLDER_ISSUE, "added": today}


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.\-]+", "-", text).strip("-")[:80] or "entry"


def _unique(base: str, used: set[str]) -> str:
    name, n = base, 2
    while name in used:
        name, n = f"{base}-{n}", n + 1
    used.add(name)
    return name


def propose_removals(outcomes, existing: list[Entry], today: _dt.date | None = None) -> list[Removal]:
    """Entries the build shows to be stale (see the module docstring)."""
    outcomes = list(outcomes)
    out: list[Removal] = []
    for e in existing:
        hits = [o for o in outcomes if o.skiplist_entry == e.ref or e.matches(info_from_outcome(o))]
        if not hits:
            out.append(Removal(e, f"matches none of the build's {len(outcomes)} tests"))
            continue
        not_run = [o for o in hits if o.outcome == SKIP_BACKEND and o.kind == SKIPLIST]
        if not_run:
            continue
        if all(o.outcome in PASSING for o in hits):
            xpass = sum(o.outcome == XPASS for o in hits)
            out.append(Removal(e, f"all {len(hits)} matched test(s) passed ({xpass} xpass), e.g. {hits[0].test_id}"))
    return out


# -- rendering and writing -------------------------------------------------

class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):
        # Candidates share one date object; anchors (&id001) would make the file
        # depend on entry order, so every value is written out.
        return True


def _str_presenter(dumper, value):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str_presenter)


def render_entries(candidates: list[Candidate], indent: int = 2) -> str:
    """YAML list items (``- id: ...``) indented by ``indent`` spaces."""
    text = yaml.dump([c.entry for c in candidates], Dumper=_Dumper, sort_keys=False,
                     default_flow_style=None, width=200, allow_unicode=True)
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in text.splitlines(True))


def render_report(build: str, candidates: list[Candidate], removals: list[Removal], backend: str,
                  already: list[tuple[str, Entry]] = ()) -> str:
    lines = [f"# torchconform skiplist propose --build {build}",
             f"# {len(candidates)} candidate entries covering {sum(len(c.tests) for c in candidates)} failing test(s)"]
    if already:
        # said, not silently dropped: the run that made the build may not have applied these files
        files = sorted({e.ref.split("::")[0] for _, e in already})
        lines.append(f"# {len(already)} failing test(s) left out: already covered by entries of {', '.join(files)} "
                     f"({', '.join(sorted({e.id for _, e in already})[:5])}); a run applies a skiplist only "
                     "with --skiplist FILE")
    if any(c.entry["issue"] == PLACEHOLDER_ISSUE for c in candidates):
        lines.append("# file a tracking issue per entry and replace the placeholder URL (or pass --issue URL)")
    lines.append(f"backend: {backend}")
    if candidates:
        lines.append("entries:")
        lines.append(render_entries(candidates).rstrip("\n"))
    else:
        lines.append("entries: []")
    if removals:
        lines.append(f"# {len(removals)} entries proposed for removal:")
        lines.append("remove:")
        for r in removals:
            # JSON strings are valid YAML scalars: the report stays loadable as YAML.
            lines.append(f"  - {{id: {r.entry.id}, at: {json.dumps(r.entry.where)}, why: {json.dumps(r.why)}}}")
    return "\n".join(lines) + "\n"


def append_entries(path: str, candidates: list[Candidate], backend: str) -> None:
    """Add ``candidates`` at the end of the ``entries:`` list of ``path`` (created if missing)."""
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(f"backend: {backend}\nentries:\n" + render_entries(candidates))
        return
    data = load_yaml(path)
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines(True)
    entries = data.get("entries") if hasattr(data, "get") else None
    keys = list(data.keys()) if hasattr(data, "keys") else []
    if entries is None or keys[-1] != "entries":
        raise UserError(f"{path}: `entries:` must be the last top-level key to append to it; move it to the end of the file")
    indent = 2
    if entries and getattr(entries, "item_lines", None):
        first = lines[entries.item_lines[0] - 1]
        indent = len(first) - len(first.lstrip(" "))
    else:
        # "entries: []" -> "entries:"
        at = data.line_of("entries") - 1
        lines[at] = "entries:\n"
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("".join(lines) + render_entries(candidates, indent))


def remove_entries(removals: list[Removal]) -> None:
    """Delete each removed entry's lines (from its ``-`` line to the next item) from its file."""
    by_path: dict[str, list[Entry]] = {}
    for r in removals:
        by_path.setdefault(r.entry.path, []).append(r.entry)
    for path, entries in by_path.items():
        data = load_yaml(path)
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines(True)
        items = data["entries"].item_lines
        drop: set[int] = set()
        for e in entries:
            idx = items.index(e.line)
            end = items[idx + 1] - 1 if idx + 1 < len(items) else len(lines)
            # Leave trailing comments/blank lines that belong to the next entry.
            start = e.line - 1
            while end - 1 > start and not lines[end - 1].strip():
                end -= 1
            drop.update(range(start, end))
        kept = [ln for i, ln in enumerate(lines) if i not in drop]
        if len(items) == len(entries):
            kept = [("entries: []\n" if ln.startswith("entries:") else ln) for ln in kept]
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("".join(kept))
