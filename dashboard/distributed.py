"""The distributed suite's outcomes per API: what a build page shows as "Distributed APIs × outcome".

The suite's results are ordinary outcomes (suite ``distributed``); which API a
test exercises is read from its name (``test_collective_<collective>``,
``test_ddp``, ``test_fsdp``, ``test_dtensor_...``, ``test_tensor_parallel``,
``test_overlap``, each with a pytest parameter suffix) and, for a collective,
its ``op``.  One row per collective, then one per API group, with the counts
per outcome class, the names a backend skip says are missing (a collective,
a c10d backend's device type, a device-module attribute), and the overlap
probe's measured fraction from its trait note (torchconform/core/traitnotes.py).

``for_build`` works from the site's one read of a build (arrays.BuildData);
``from_store`` asks the store (queries.latest_rows) for the same answer.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from numbers import Real

import numpy as np

from torchconform.core.outcome import FAILED, PASSED, SKIP_BACKEND, SKIP_ELIGIBILITY, XFAIL, XPASS
from torchconform.core.traitnotes import parse_trait_note
from torchconform.dashboard.tables import Table
from torchconform.db import read_rows
from torchconform.db.shapes import DISTRIBUTED_SUITE

SUITE = DISTRIBUTED_SUITE
COLLECTIVE_PREFIX = "test_collective_"
COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all", "barrier", "send_recv")
COLLECTIVES_GROUP = "Collectives"
# (test name stem, group, api) after the collectives, in the table's order
GROUPS = (("test_ddp", "DDP", "ddp"), ("test_fsdp", "FSDP", "fsdp"), ("test_dtensor", "DTensor", "dtensor"),
          ("test_tensor_parallel", "Tensor parallelism", "tensor_parallel"),
          ("test_overlap", "Overlap", "overlap"))
OTHER_GROUP = "Other"   # a distributed test none of the above names (a newer suite): still counted
OVERLAP_TRAIT = "overlap"

COLUMNS = ["group", "API", "tests", "passed", "failed", "failure kinds", "skip_backend", "missing (kind)",
           "other skipped", "xfail / xpass", "overlap", "first failure"]
TITLE = "Distributed APIs \u00d7 outcome"


@dataclass
class ApiRow:
    group: str
    api: str
    tests: int = 0
    passed: int = 0                       # pass, pass_fallback
    failed: int = 0                       # fail, error, crash, timeout
    failure_kinds: Counter = field(default_factory=Counter)
    skip_backend: int = 0
    missing: set = field(default_factory=set)   # (name, kind) of its backend skips; name "" when none
    other_skipped: int = 0                # skip_eligibility
    expected: int = 0                     # xfail, xpass
    overlap: list = field(default_factory=list)   # the overlap trait notes' bodies, in test name order
    first_failure: str = ""

    def cells(self) -> list:
        kinds = ", ".join(f"{o} {n}" for o, n in sorted(self.failure_kinds.items()))
        missing = ", ".join(f"{name} ({kind})" if name else kind for name, kind in sorted(self.missing))
        overlap = "; ".join(dict.fromkeys(map(overlap_text, self.overlap)))
        return [self.group, self.api, self.tests, self.passed, self.failed, kinds, self.skip_backend, missing,
                self.other_skipped, self.expected, overlap, self.first_failure]


def api_of(name: str, op: str) -> tuple[str, str]:
    """(group, api) of a distributed test from its name (and op, for a collective)."""
    stem = (name or "").split("[", 1)[0]
    if stem.startswith(COLLECTIVE_PREFIX):
        return COLLECTIVES_GROUP, op if op in COLLECTIVES else stem[len(COLLECTIVE_PREFIX):]
    for prefix, group, api in GROUPS:
        if stem == prefix or stem.startswith(prefix + "_"):
            return group, api
    return OTHER_GROUP, op or stem


def overlap_text(body: dict) -> str:
    """``overlaps (0.62)`` / ``no overlap (0.00)`` / ``not measurable: <reason>`` from a trait note's body."""
    if body.get("measurable") is False:
        reason = body.get("reason")
        return f"not measurable: {reason}" if reason else "not measurable"
    flag = body.get("overlaps")
    words = "overlaps" if flag is True else "no overlap" if flag is False else "overlap unknown"
    fraction = body.get("fraction")
    if isinstance(fraction, Real) and not isinstance(fraction, bool):
        return f"{words} ({fraction:.2f})"
    return words


def _order(key: tuple[str, str]) -> tuple:
    group, api = key
    if group == COLLECTIVES_GROUP:
        return (0, COLLECTIVES.index(api) if api in COLLECTIVES else len(COLLECTIVES), api)
    names = [g for _, g, _ in GROUPS]
    return (1 + (names.index(group) if group in names else len(names)), 0, api)


def summarize(rows) -> list[ApiRow]:
    """The table's rows from ``(op, name, outcome, kind, missing_op, message)`` of the suite's
    results (one per test); [] when there are none."""
    out: dict[tuple[str, str], ApiRow] = {}
    for op, name, outcome, kind, missing_op, message in sorted(rows, key=lambda r: r[1] or ""):
        key = api_of(name, op)
        row = out.get(key)
        if row is None:
            row = out[key] = ApiRow(*key)
        row.tests += 1
        if outcome in PASSED:
            row.passed += 1
        elif outcome in FAILED:
            row.failed += 1
            row.failure_kinds[outcome] += 1
            if not row.first_failure:
                row.first_failure = f"{name} ({outcome}): {message}" if message else f"{name} ({outcome})"
        elif outcome == SKIP_BACKEND:
            row.skip_backend += 1
            row.missing.add((missing_op or "", kind or ""))
        elif outcome == SKIP_ELIGIBILITY:
            row.other_skipped += 1
        elif outcome in (XFAIL, XPASS):
            row.expected += 1
        note = parse_trait_note(message)
        if note is not None and note[0] == OVERLAP_TRAIT:
            row.overlap.append(note[1])
    return [out[k] for k in sorted(out, key=_order)]


def for_build(data) -> list[ApiRow]:
    """The table of a build from its one read (arrays.BuildData)."""
    tests = data.tests
    if SUITE not in tests.levels["suite"]:
        return []
    suite = tests.levels["suite"].index(SUITE)
    at = np.flatnonzero(tests.index["suite"][data.pk] == suite).tolist()
    op, name = tests.values["op"], tests.values["name"]
    # data.rows: (test_pk, outcome, kind, missing_op, fallback_ops, message[, repro])
    picked = (data.rows[i] for i in at)
    return summarize((op[r[0]], name[r[0]], r[1], r[2], r[3], r[5]) for r in picked)


def from_store(store, build: str, queries=None) -> list[ApiRow]:
    """The same table read from the store (for a caller without a BuildData)."""
    if queries is None:
        queries = read_rows
    rows = queries.latest_rows(store, build, ("suite", "op", "name", "outcome", "kind", "missing_op", "message"),
                               plain=True)
    return summarize(r[1:] for r in rows if r[0] == SUITE)


def table(stem: str, rows: list[ApiRow]) -> Table:
    t = Table(stem, list(COLUMNS), title=TITLE)
    t.rows = [r.cells() for r in rows]
    return t
