"""One-off counts of one stored build through the arrays (db/arrays.py), the one
implementation the site uses too: what the CLI (``summary --by``) and the sweep's build
breakdown call (``summary_by``), the whole-build breakdown of db/read_builds.py's
``summary`` (``breakdown``: the CLI's ``summary``, a suite set's total) and the missing-operator
leaderboard of db/read_ops.py's ``missing_op_leaderboard`` (``missing_rows``: the census's
plan, rehearse).

A one-off call reads only what its count needs, in one query: the build's latest result
per test with the grouping column of its test joined (not every stored test's every
attribute, as the site does once for many builds); the whole-build breakdown no test
column; the leaderboard only the results that say skip_backend/missing_op, with their
tests' suite and op.  On a 154k-test build that is no slower than the SQL GROUP BYs it
replaced (docs/store.md).
"""
from __future__ import annotations

from types import SimpleNamespace

from torchconform.core.outcome import MISSING_OP, SKIP_BACKEND
from torchconform.db import read_rows, shapes
from torchconform.db.arrays import BuildData
from torchconform.errors import UserError

# The ``queries`` db/arrays.py reads and shapes with, for callers below the site
# (the site passes its own, dashboard/reads.py READS, to time each call).
DB_READS = SimpleNamespace(
    stored_tests=read_rows.stored_tests,
    latest_rows=read_rows.latest_rows,
    values_by_id=read_rows.values_by_id,
    repro_templates=read_rows.repro_templates,
    breakdowns_by=shapes.breakdowns_by,
    leaderboard=shapes.leaderboard,
    diff_maps=shapes.diff_maps,
)
# The result columns a breakdown counts (BuildData.read: test_pk first, outcome and kind held).
_BREAKDOWN_COLUMNS = ("test_pk", "outcome", "kind", "missing_op")


def summary_by(store, build: str, by: str) -> dict:
    """Breakdown per suite or per test file of ``build``: {suite_or_file: breakdown}
    (BuildData.summary_by over a test table of the build's tests and that one column)."""
    if by not in ("suite", "file"):
        raise UserError(f"cannot summarise by {by!r}; use 'suite' or 'file'")
    data, _ = BuildData.read(store, DB_READS, build, None, _BREAKDOWN_COLUMNS, test_columns=(by,))
    return data.summary_by(DB_READS, by)


def breakdown(store, build: str) -> dict:
    """The whole build's breakdown from its result columns alone (BuildData.breakdown): the
    counts of db/read_builds.py's ``summary``, which adds completeness, not_run and tiers."""
    data, _ = BuildData.read(store, DB_READS, build, None, _BREAKDOWN_COLUMNS)
    return data.breakdown()


# What the leaderboard counts: the missing-operator results, and of their tests the suite
# (the model zoo's rows count models) and the op (the model's name there).
_MISSING = {"outcome": SKIP_BACKEND, "kind": MISSING_OP}
_LEADERBOARD_TESTS = ("suite", "op")


def missing_rows(store, build: str) -> BuildData:
    """The build's skip_backend/missing_op results only, with their tests' suite and op: what
    BuildData.leaderboard counts, without reading the build's other results."""
    data, _ = BuildData.read(store, DB_READS, build, None, _BREAKDOWN_COLUMNS, _LEADERBOARD_TESTS, _MISSING)
    return data
