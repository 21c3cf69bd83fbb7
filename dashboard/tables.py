"""Tables: what a page shows and what it offers for download, from one object.

Every table on the site is a ``Table``; the page renders it and the same rows are
written next to the page as ``<stem>.json`` (a list of records) and
``<stem>.csv``, so "download this table" always matches what is on screen.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from operator import itemgetter, methodcaller
from pathlib import Path

from torchconform.dashboard.staging import write_text
from torchconform.safe import FORMULA_START, csv_cell


@dataclass
class Table:
    stem: str                  # path of the downloads relative to the site root, without extension
    columns: list[str]
    rows: list[list] = field(default_factory=list)
    title: str = ""
    # Presentation only (not in the downloads): column -> {row index: href / category key}.
    links: dict = field(default_factory=dict)
    classes: dict = field(default_factory=dict)
    # A promise by the page that made the rows: every row is a list of len(columns) whose
    # cells from this column on are plain ints and before it plain strings (the operator
    # matrix).  The downloads of such a table are formatted row by row from a template.
    int_from: int | None = None

    @property
    def json_path(self) -> str:
        return self.stem + ".json"

    @property
    def csv_path(self) -> str:
        return self.stem + ".csv"

    def records(self) -> list[dict]:
        return [dict(zip(self.columns, row)) for row in self.rows]


def _csv_cell(value):
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return csv_cell(value)  # test names come from anywhere: a formula start is written as text


_PLAIN_TYPES = frozenset({int, float, bool, type(None)})


def _csv_rows(rows: list[list], int_from: int | None = None) -> list:
    """Rows with ``_csv_cell`` applied, column by column: a column of numbers, or of
    strings none of which starts like a formula, is passed through untouched (the
    checks run as C-level maps; big tables are mostly such columns).  ``int_from``:
    the table's promise (``Table.int_from``), so only the distinct strings of the
    columns before it need a look (the operator matrix: a tenth of the time)."""
    if not rows:
        return rows
    if int_from is not None:
        strings = set().union(*(map(itemgetter(j), rows) for j in range(int_from)))
        if not any(map(methodcaller("startswith", FORMULA_START), strings)):
            return rows
    width = max(map(len, rows))
    if min(map(len, rows)) != width:
        return [[_csv_cell(v) for v in row] for row in rows]
    columns = list(zip(*rows))
    changed = False
    for j, col in enumerate(columns):
        types = set(map(type, col))
        if types <= _PLAIN_TYPES:
            continue
        if types <= _PLAIN_TYPES | {str}:
            strings = [v for v in col if type(v) is str] if types - {str} else col
            if not any(map(methodcaller("startswith", FORMULA_START), strings)):
                continue
        columns[j] = list(map(_csv_cell, col))
        changed = True
    return list(zip(*columns)) if changed else rows


class _Encoded(dict):
    """str -> its JSON text, encoded on first sight."""
    def __missing__(self, value):
        text = self[value] = json.dumps(value)
        return text


def _records_json(table: Table) -> str:
    """``json.dumps(table.records(), separators=(",", ":"))`` for an ``int_from`` table:
    one %-template per row, each distinct string encoded once (a third of the time)."""
    k = table.int_from
    keys = [json.dumps(c) for c in table.columns]
    template = "{" + ",".join([f"{key}:%s" for key in keys[:k]] + [f"{key}:%d" for key in keys[k:]]) + "}"
    encoded = _Encoded()
    text = "[" + ",".join([template % (*map(encoded.__getitem__, row[:k]), *row[k:]) for row in table.rows]) + "]"
    return text


def write_downloads(root: Path, table: Table) -> None:
    json_file = root / table.json_path
    json_file.parent.mkdir(parents=True, exist_ok=True)
    if table.int_from is not None:
        text = _records_json(table)
    else:
        text = json.dumps(table.records(), separators=(",", ":"))
    write_text(json_file, text)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows(_csv_rows(table.rows, table.int_from))
    write_text(root / table.csv_path, buf.getvalue())
