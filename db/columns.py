"""The store's flat rows: which columns a build, test and result row has, and how an
``Outcome`` becomes (and comes back from) the ``tests`` / ``results`` rows the store
writes.  Plain data shaping, no database access: db/store.py writes these rows,
db/once.py and db/junit/read.py build them, the readers name their columns.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone

from torchconform.core.outcome import Outcome

# Columns of ``builds`` that metadata keys fill; anything else goes to the JSON column.
BUILD_COLUMNS = ("torch_version", "torch_git", "backend", "backend_version", "device",
                 "profile", "branch", "commit")
_BUILD_ALIASES = {"torch": "torch_version", "git_version": "torch_git", "torch_git_version": "torch_git",
                  "git_commit": "commit", "sha": "commit"}

TEST_COLUMNS = ("test_id", "suite", "file", "cls", "name", "op", "variant", "dtype")
RESULT_COLUMNS = ("build_id", "run_id", "test_pk", "attempt", "outcome", "kind", "missing_op",
                  "fallback_ops", "skiplist_entry", "device", "duration", "message", "repro",
                  "max_abs_err", "max_rel_err", "tier")
# Where ``repro`` sits in a ``result_fields`` row (None there: the run's template rendered).
REPRO_AT = RESULT_COLUMNS.index("repro") - 3
# The columns of a stored ``results`` row (what it says is in result_values: db/values.py).
STORED_RESULT_COLUMNS = ("build_id", "run_id", "test_pk", "attempt", "value_id", "duration_us",
                         "max_abs_err", "max_rel_err")


def test_row(o: Outcome) -> tuple:
    """The ``tests`` row (TEST_COLUMNS) of an outcome."""
    return (o.test_id, o.suite or "", o.file or "", o.cls or "", o.name or "", o.op or "", o.variant or "",
            o.dtype or "")


def result_fields(o: Outcome) -> tuple:
    """An outcome's ``results`` row after build_id, run_id and test_pk (RESULT_COLUMNS[3:])."""
    return (int(o.attempt or 1), o.outcome, o.kind or "", o.missing_op or "", " ".join(o.fallback_ops or ()),
            o.skiplist_entry or "", o.device or "", float(o.duration or 0.0), o.message or "", o.repro or "",
            o.max_abs_err, o.max_rel_err, o.tier or "")


def outcome_from_rows(test: tuple, result: tuple) -> Outcome:
    """The Outcome a ``test_row``/``result_fields`` pair stands for."""
    return Outcome(test_id=test[0], suite=test[1], file=test[2], cls=test[3], name=test[4], op=test[5],
                   variant=test[6], dtype=test[7], attempt=result[0], outcome=result[1], kind=result[2],
                   missing_op=result[3], fallback_ops=result[4].split(), skiplist_entry=result[5], device=result[6],
                   duration=result[7], message=result[8], repro=result[9], max_abs_err=result[10],
                   max_rel_err=result[11], tier=result[12] if len(result) > 12 else "")


def utcnow() -> datetime:
    """Now in UTC, naive: how the store's DateTime columns hold times."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def text(value) -> str:
    """A run's selection or command as stored: a list joined by spaces, None as ""."""
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return "" if value is None else str(value)


def split_metadata(metadata: dict) -> tuple[dict, dict]:
    """Build metadata -> ({BUILD_COLUMNS column: text}, {other key: JSON-ready value})."""
    columns, extra = {}, {}
    for key, value in metadata.items():
        if value is None:
            continue
        key = _BUILD_ALIASES.get(key, key)
        if key in BUILD_COLUMNS:
            columns[key] = str(value)
        else:
            # The JSON column only takes JSON; anything odd is stored as its text.
            try:
                json.dumps(value)
                extra[key] = value
            except (TypeError, ValueError):
                extra[key] = str(value)
    return columns, extra
