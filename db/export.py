"""Export one build's outcomes (latest per test) as JUnit XML, JSON or CSV.

JUnit export uses the runner's own testcase writer, so an exported build
re-ingests to the same outcomes.  JSON and CSV carry every outcome field.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import xml.etree.ElementTree as ET

from torchconform.collectors.outcome import Outcome
from torchconform.db import queries
from torchconform.errors import UserError

FORMATS = ("junit", "json", "csv")
FIELDS = [f.name for f in dataclasses.fields(Outcome)]


def export(store, build: str, fmt: str, out) -> int:
    """Write ``build`` to the text stream ``out``; returns the number of outcomes."""
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    info = queries.build_info(store, build)  # UserError for an unknown build, before writing anything
    return {"junit": _junit, "json": _json, "csv": _csv}[fmt](store, build, info, out)


def _json(store, build, info, out) -> int:
    # Streamed record by record: a 150k-outcome build never sits in memory as one string.
    out.write('{"build": ' + json.dumps(info) + ', "outcomes": [')
    n = 0
    for o in queries.iter_outcomes(store, build):
        out.write((",\n" if n else "\n") + json.dumps(o.to_dict()))
        n += 1
    out.write("\n]}\n")
    return n


def _csv(store, build, info, out) -> int:
    writer = csv.writer(out)
    writer.writerow(FIELDS)
    n = 0
    for o in queries.iter_outcomes(store, build):
        row = o.to_dict()
        row["fallback_ops"] = " ".join(row["fallback_ops"])
        writer.writerow([row[f] for f in FIELDS])
        n += 1
    return n


def _junit(store, build, info, out) -> int:
    from torchconform.collectors.sink_junit import junit_counts, testcase_element

    outcomes = list(queries.iter_outcomes(store, build))
    counts = junit_counts(outcomes)
    out.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n')
    attrs = {"name": f"torchconform.{build}", "time": f"{sum(o.duration for o in outcomes):.3f}",
             **{k: str(v) for k, v in counts.items()}}
    out.write("<testsuite " + " ".join(f'{k}="{_attr(v)}"' for k, v in attrs.items()) + ">\n")
    out.write("<properties>")
    for key in ("torch_version", "backend", "device", "profile", "branch", "commit"):
        if info.get(key):
            out.write(f'<property name="tc.run.{key}" value="{_attr(info[key])}" />')
    out.write(f'<property name="tc.run.build" value="{_attr(build)}" /></properties>\n')
    for o in outcomes:
        out.write(ET.tostring(testcase_element(o), encoding="unicode") + "\n")
    out.write("</testsuite>\n</testsuites>\n")
    return len(outcomes)


def _attr(value) -> str:
    return (str(value).replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;"))
