"""Export one build's outcomes (latest per test) as JUnit XML, JSON or CSV.

JUnit export uses the runner's own testcase writer, so an exported build
re-ingests to the same outcomes (numerical errors and trait kinds included) and
declared traits.  JSON and CSV carry every outcome field.
"""
from __future__ import annotations

import csv
import dataclasses
import json

from torchconform.core.outcome import Outcome
from torchconform.db import read_builds, read_rows
from torchconform.errors import UserError
from torchconform.safe import csv_cell
from torchconform.db.junit.write import write_junit_stream

FORMATS = ("junit", "json", "csv")
FIELDS = [f.name for f in dataclasses.fields(Outcome)]


def export(store, build: str, fmt: str, out) -> int:
    """Write ``build`` to the text stream ``out``; returns the number of outcomes."""
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    info = read_builds.build_info(store, build)  # UserError for an unknown build, before writing anything
    return {"junit": _junit, "json": _json, "csv": _csv}[fmt](store, build, info, out)


def _json(store, build, info, out) -> int:
    # Streamed record by record: a 150k-outcome build never sits in memory as one string.
    out.write('{"build": ' + json.dumps(info) + ', "outcomes": [')
    n = 0
    for o in read_rows.iter_outcomes(store, build):
        out.write((",\n" if n else "\n") + json.dumps(o.to_dict()))
        n += 1
    out.write("\n]}\n")
    return n


def _csv(store, build, info, out) -> int:
    writer = csv.writer(out)
    writer.writerow(FIELDS)
    n = 0
    for o in read_rows.iter_outcomes(store, build):
        row = o.to_dict()
        row["fallback_ops"] = " ".join(row["fallback_ops"])
        writer.writerow([csv_cell(row[f]) for f in FIELDS])
        n += 1
    return n


def _junit(store, build, info, out) -> int:
    outcomes = list(read_rows.iter_outcomes(store, build))
    run = {key: info.get(key) for key in ("torch_version", "backend", "device", "profile", "branch", "commit")}
    # what the gate needs besides the outcomes: the traits the build declared (ci/gate.py)
    run["declared_traits"] = info["metadata"].get("declared_traits")
    write_junit_stream(out, {**run, "build": build}, outcomes, suite_name=f"torchconform.{build}")
    return len(outcomes)
