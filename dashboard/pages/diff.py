"""Diff page: a build against its baseline, one table per category of change."""
from __future__ import annotations

from torchconform.dashboard.model import BuildInfo
from torchconform.dashboard.styles import category_of
from torchconform.dashboard.tables import Table

# Known categories first, in the order a reviewer reads them (issue 6's words).
CATEGORIES = (
    ("regressions", "Regressions"),
    ("new_missing_ops", "New missing operators"),
    ("fallback_creep", "Fallback creep (passed natively, now only through CPU fallback)"),
    ("flaky", "Flaky"),
    ("missing_tests", "Tests missing from this build"),
    ("other_changes", "Other outcome changes"),
    ("fixes", "Fixes"),
    ("new_tests", "New tests"),
    ("transitions", "Every outcome transition (tests per old -> new pair)"),
)


def _title(key: str) -> str:
    return dict(CATEGORIES).get(key, key.replace("_", " ").capitalize())


def _state(outcome, kind, missing_op=""):
    if not outcome:
        return ""
    text = f"{outcome}/{kind}" if kind else outcome
    return f"{text} ({missing_op})" if missing_op else text


def test_change_table(stem: str, key: str, items: list[dict]) -> Table:
    """Per-test changes (old_* / new_* records from queries.diff) as before -> after columns."""
    t = Table(stem, ["test id", "operator", "before", "after", "fallback operators", "message"], title=_title(key))
    for i, e in enumerate(items):
        t.rows.append([e.get("test_id", ""), e.get("op", ""),
                       _state(e.get("old_outcome"), e.get("old_kind"), e.get("old_missing_op")),
                       _state(e.get("new_outcome"), e.get("new_kind"), e.get("new_missing_op")),
                       " ".join(e.get("fallback_ops") or []), e.get("message", "")])
        for col, prefix in (("before", "old"), ("after", "new")):
            if e.get(f"{prefix}_outcome"):
                t.classes.setdefault(col, {})[i] = category_of(e[f"{prefix}_outcome"], e.get(f"{prefix}_kind") or "")
    return t


def category_table(stem: str, key: str, items: list) -> Table:
    """A table from a list of records (dicts) or plain values, columns in first-seen order."""
    if items and all(isinstance(e, dict) and "test_id" in e and ("old_outcome" in e or "new_outcome" in e) for e in items):
        return test_change_table(stem, key, items)
    columns: list[str] = []
    for item in items:
        for col in (item if isinstance(item, dict) else {"value": item}):
            if col not in columns:
                columns.append(col)
    t = Table(stem, columns or ["value"], title=_title(key))
    for item in items:
        record = item if isinstance(item, dict) else {"value": item}
        t.rows.append([_plain(record.get(c)) for c in t.columns])
    return t


def _plain(value):
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return value


def flaky_rows(entries: list[dict]) -> list[dict]:
    """queries.flaky_tests entries as one row per test: its attempts in order."""
    return [{"test_id": e["test_id"], "attempts": " \u2192 ".join(a["outcome"] for a in e.get("attempts", []))}
            for e in entries]


def categories_of(diff: dict) -> list[tuple[str, list]]:
    known = [k for k, _ in CATEGORIES if isinstance(diff.get(k), list)]
    others = sorted(k for k, v in diff.items() if isinstance(v, list) and k not in known)
    return [(k, diff[k]) for k in known + others]


def render(site, build: BuildInfo, diff: dict, generated: str):
    base = f"builds/{build.slug}/"
    tables = [{"key": key, "table": category_table(f"{base}diff-{key}", key,
                                                   flaky_rows(items) if key == "flaky" else items)}
              for key, items in categories_of(diff)]
    return site.page(base + "diff.html", "diff.html", title=f"Diff · {build.name} against {build.baseline.name}",
                     build=build, baseline=build.baseline, tables=tables, generated=generated,
                     downloads=[t["table"] for t in tables])
