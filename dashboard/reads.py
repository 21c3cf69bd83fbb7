"""What the site asks the store, in one place: ``READS`` is the ``queries`` object that
``build_site`` passes down to every page (``build_site(queries=...)`` takes another one
with the same names: bench/site.py times each call, tests count them).

The functions live in their own modules (the db readers and shapers, the census);
this only names the ones the site uses.
"""
from __future__ import annotations

from types import SimpleNamespace

from torchconform.census import impact, records
from torchconform.db import read_builds, read_changes, read_ops, read_rows, shapes

READS = SimpleNamespace(
    # the store's reads
    list_builds=read_builds.list_builds,
    stored_tests=read_rows.stored_tests,
    latest_rows=read_rows.latest_rows,
    values_by_id=read_rows.values_by_id,
    repro_templates=read_rows.repro_templates,
    flaky_tests=read_changes.flaky_tests,
    first_missing_builds=read_ops.first_missing_builds,
    census_rows=records.load,
    census_impact=impact.census_impact,
    # the shapers the site's arrays feed (the same answers as the readers')
    breakdowns_by=shapes.breakdowns_by,
    leaderboard=shapes.leaderboard,
    diff_maps=shapes.diff_maps,
)
