"""The operator matrix and the diff of stored builds, for tests, through their one
implementation: the site's arrays (db/arrays.py).  The store has no SQL road
for either (issue 32); these read the builds as the site does and give the answers in the
shape the tests assert (tests/ is on sys.path: no package)."""
from __future__ import annotations

from torchconform.db import arrays
from torchconform.db.arrays import BuildData, TestTable
from torchconform.core.outcome import BACKEND_SKIP_KINDS, OUTCOMES
from torchconform.dashboard.reads import READS


def store_diff(store, old: str, new: str) -> dict:
    """The test-by-test diff of two stored builds (arrays.diff)."""
    tests = TestTable.read(store, READS)
    old_data, tests = BuildData.read(store, READS, old, tests)
    new_data, _ = BuildData.read(store, READS, new, tests)
    return arrays.diff(READS, old_data, new_data)


def store_matrix(store, build: str) -> list[dict]:
    """The operator matrix of a stored build (BuildData.matrix_numbers) as one dict per
    (op, variant, dtype) cell, sorted: ``total``, and the non-zero ``outcomes`` and
    ``backend_skip_kinds``."""
    data, _ = BuildData.read(store, READS, build, TestTable.read(store, READS))
    cells, numbers = data.matrix_numbers()
    out = []
    for (op, variant, dtype), row in zip(cells, numbers.tolist()):
        outcomes = {o: n for o, n in zip(OUTCOMES, row) if n}
        kinds = {k: n for k, n in zip(BACKEND_SKIP_KINDS, row[len(OUTCOMES):]) if n}
        out.append({"op": op, "variant": variant, "dtype": dtype, "total": sum(outcomes.values()),
                    "outcomes": outcomes, "backend_skip_kinds": kinds})
    return out
