"""What the site asks the store, in one place: ``READS`` is the ``queries`` object that
``build_site`` passes down to every page (``build_site(queries=...)`` takes another one
with the same names: bench/site.py times each call, tests count them).

The functions live in their own modules (the db readers and shapers, the census);
this only names the ones the site uses.
"""
from __future__ import annotations

from types import SimpleNamespace

from torchconform.census import impact, records
from torchconform.db import read_builds, read_changes, read_ops
from torchconform.db.counts import DB_READS

# db/counts.py's DB_READS (what the arrays read and shape with), and what only the site asks
READS = SimpleNamespace(
    **vars(DB_READS),
    list_builds=read_builds.list_builds,
    flaky_tests=read_changes.flaky_tests,
    first_missing_builds=read_ops.first_missing_builds,
    census_rows=records.load,
    census_impact=impact.census_impact,
)
