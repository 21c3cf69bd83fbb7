"""One build's latest results as arrays keyed by test, and every per-build count from them:
the one implementation of the per-suite / per-file breakdowns, the operator matrix and the
diff of two builds (issue 32; the site, the CLI and the sweep call it, db/counts.py for one-off calls).

A site renders many builds of the same ~150k tests.  Instead of joining each
build's results to the tests table in SQL (and hashing the same strings again
per build), the test attributes are read once per site run (``TestTable``, from
``queries.stored_tests``; forked workers inherit it; a one-off count has its build's
tests' grouping column joined to its rows instead) and each build reads only
its result columns (``queries.latest_rows`` without a tests column): per row its own
columns and the id of what it says, each distinct value read once (``values_by_id``);
a row's tuple is made only when it is looked at (``Rows``).  A result's
(outcome, kind) becomes a small integer code, so the per-suite / per-file
breakdowns, the operator matrix and the baseline diff's transitions are numpy
``bincount``s; only the few rows that need their strings (missing operators,
changed tests, model-zoo rows) are looked at one by one.  The answers are
shaped by db/shapes.py (``breakdowns_by``, ``leaderboard``, ``diff_maps``), passed in
as ``queries`` (the site's dashboard/reads.py READS, db/counts.py's DB_READS) so the
site can time each call.  A one-off count reads only what it needs into the same
arrays (db/counts.py): the whole-build breakdown (``summary``) the result columns alone,
the leaderboard (the census's plan, rehearse) only the build's missing-operator rows.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import itemgetter

import numpy as np

from torchconform.core.breakdown import breakdown_of_counts
from torchconform.core.outcome import BACKEND_SKIP_KINDS, MISSING_OP, OUTCOMES, SKIP_BACKEND
from torchconform.db.shapes import DISTRIBUTED_SUITE, MODELS_SUITE
from torchconform.db.values import VALUE_COLUMNS

# What a build reads of its results (queries.latest_rows); ``test_pk`` joins them to TestTable.
RESULT_COLUMNS = ("test_pk", "outcome", "kind", "missing_op", "fallback_ops", "message", "max_abs_err", "max_rel_err")
# ... and, for a build whose pages are rendered, its repro commands (failures.py; the store
# renders most from their run's template)
FAILURE_COLUMNS = (*RESULT_COLUMNS, "stored_repro", "run_id")
STORED_REPRO_AT, RUN_AT = FAILURE_COLUMNS.index("stored_repro"), FAILURE_COLUMNS.index("run_id")
TEST_COLUMNS = ("test_id", "suite", "file", "op", "variant", "dtype", "name")
# The operator matrix's numbers per cell, in this order (dashboard/pages/matrix.py draws them).
COUNT_NAMES = (*OUTCOMES, *BACKEND_SKIP_KINDS)
# The test columns the operator matrix (and the model-zoo / distributed split) needs.
_MATRIX_COLUMNS = ("suite", "op", "variant", "dtype")
_PK = itemgetter(0)
_VALUE = itemgetter(1, 2, 3, 4, 5)    # (outcome, kind, missing_op, fallback_ops, message): queries.diff_maps' values


class Codes(dict):
    """(outcome, kind) -> small integer, numbered on first sight (one numbering per process)."""

    def __init__(self):
        super().__init__()
        self.pairs: list[tuple[str, str]] = []

    def __missing__(self, pair):
        code = self[pair] = len(self.pairs)
        self.pairs.append(pair)
        return code

    def projection(self) -> np.ndarray:
        """(codes x COUNT_NAMES) 0/1 matrix: which matrix numbers a result of each code adds to
        (its outcome; its kind too when skip_backend, per backend-skip kind)."""
        p = np.zeros((len(self.pairs), len(COUNT_NAMES)), dtype=np.int64)
        for code, (outcome, kind) in enumerate(self.pairs):
            if outcome in OUTCOMES:
                p[code, OUTCOMES.index(outcome)] = 1
            if outcome == SKIP_BACKEND and kind in BACKEND_SKIP_KINDS:
                p[code, len(OUTCOMES) + BACKEND_SKIP_KINDS.index(kind)] = 1
        return p


CODES = Codes()
MISSING = CODES[(SKIP_BACKEND, MISSING_OP)]


class TestTable:
    """Every stored test's attributes, by tests.id (``pk``).

    ``values[col]``: a list indexed by pk (None where no test has that pk).  For
    the grouping columns, ``index[col]`` numbers each pk's value among
    ``levels[col]`` (sorted), so counting by suite or file is a bincount.
    ``cell`` numbers each test's (op, variant, dtype) among ``cells`` (sorted),
    -1 for tests that are not in the operator matrix (no op, or the model zoo)."""

    __test__ = False   # not a pytest class

    def __init__(self, rows, columns=TEST_COLUMNS):
        """``rows``: (pk, *columns) tuples.  ``columns``: TEST_COLUMNS, or those a count reads
        (a one-off ``summary --by suite`` reads the suite only); a table without the matrix's
        columns has no cells."""
        rows = list(rows)
        pks = list(map(_PK, rows))
        size = 1 + max(pks, default=0)
        self.size = size
        self.columns = tuple(columns)
        self.values: dict[str, list] = {}
        # tests.id is usually 1..n in the order read: then a column is its values after a hole at 0
        in_order = pks == list(range(1, size))
        read: dict[str, list] = {}
        for j, col in enumerate(self.columns, start=1):
            values = read[col] = list(map(itemgetter(j), rows))
            if in_order:
                column = [None, *values]
            else:
                column = [None] * size
                for pk, v in zip(pks, values):
                    column[pk] = v
            self.values[col] = column
        self.known = np.zeros(size, dtype=bool)
        self.known[pks] = True
        self.levels: dict[str, list] = {}
        self.index: dict[str, np.ndarray] = {}
        for col in ("suite", "file", "op", "variant", "dtype"):
            if col in self.values:
                if in_order:
                    self.levels[col], self.index[col] = _number(self.values[col])
                else:   # a few tests among many pks (a build's missing-operator rows): number those only
                    self.levels[col], at = _number(read[col])
                    self.index[col] = np.full(size, -1, dtype=np.int64)
                    self.index[col][pks] = at
        self.models = np.zeros(size, dtype=bool)
        if "suite" in self.index and MODELS_SUITE in self.levels["suite"]:
            self.models = self.index["suite"] == self.levels["suite"].index(MODELS_SUITE)
        self.cell, self.cells = np.full(size, -1, dtype=np.int64), []
        if all(c in self.index for c in _MATRIX_COLUMNS):
            self._number_cells()

    def _number_cells(self):
        """The matrix cell of each test: (op, variant, dtype) numbered in mixed radix over sorted
        levels, so numeric order is the tuples' order; -1 outside the matrix."""
        op, variant, dtype = (self.index[c] for c in ("op", "variant", "dtype"))
        n_v, n_d = len(self.levels["variant"]), len(self.levels["dtype"])
        flat = (op * n_v + variant) * n_d + dtype
        no_op = self.levels["op"].index("") if "" in self.levels["op"] else -2
        # the distributed suite's op is an API (ddp, all_reduce): its own table, not the matrix
        apis = self.levels["suite"].index(DISTRIBUTED_SUITE) if DISTRIBUTED_SUITE in self.levels["suite"] else -2
        flat[(op < 0) | (op == no_op) | self.models | (self.index["suite"] == apis)] = -1
        used, inverse = np.unique(flat, return_inverse=True)
        start = 1 if len(used) and used[0] < 0 else 0
        self.cell = inverse.reshape(-1) - start
        levels = [self.levels[c] for c in ("op", "variant", "dtype")]
        self.cells = [(levels[0][f // (n_v * n_d)], levels[1][f // n_d % n_v], levels[2][f % n_d])
                      for f in used[start:].tolist()]

    @classmethod
    def read(cls, store, queries, columns=TEST_COLUMNS) -> "TestTable":
        return cls(queries.stored_tests(store, columns), columns)

    @cached_property
    def id_rank(self) -> np.ndarray:
        """Each pk's rank in test id order (what sorts a build's rows by test id; -1 without a test)."""
        ids = self.values["test_id"]
        order = sorted((pk for pk in range(self.size) if ids[pk] is not None), key=ids.__getitem__)
        rank = np.full(self.size, -1, dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank

    def knows(self, pk: np.ndarray) -> bool:
        """Whether every pk is a test this table read (a test stored later is not)."""
        if not len(pk):
            return True
        if int(pk.min()) < 0 or int(pk.max()) >= self.size:
            return False
        return bool(self.known[pk].all())


class _FirstSeen(dict):
    def __missing__(self, value):
        code = self[value] = len(self)
        return code


def _number(column: list) -> tuple[list, np.ndarray]:
    """(sorted distinct values, each element's index among them; -1 for None)."""
    seen = _FirstSeen()
    raw = np.fromiter(map(seen.__getitem__, column), dtype=np.int64, count=len(column))
    levels = sorted(v for v in seen if v is not None)
    at = {v: i for i, v in enumerate(levels)}
    at[None] = -1
    rank = np.array([at[v] for v in seen], dtype=np.int64)
    return levels, rank[raw]


# The columns a result row holds itself; every other column of a row is what it says
# (result_values), read once per distinct value.
OWN_COLUMNS = ("test_pk", "max_abs_err", "max_rel_err", "run_id")


class Rows(Sequence):
    """A build's rows in ``columns`` order, each made when it is asked for from the result's own
    columns and its value (shared by many rows).  Most rows of a build are only counted
    (by code, by test), never looked at: making all 154k tuples up front cost more than
    reading them (bench/site.py)."""

    def __init__(self, raw: list, values: dict, columns, skip: int = 0):
        self._raw = raw          # per row: its OWN_COLUMNS in ``columns``, ``skip`` others, then its value id
        self._values = values    # value id -> the value's fields in ``columns`` (``said``)
        own = [c for c in columns if c in OWN_COLUMNS]
        said = [c for c in columns if c not in OWN_COLUMNS]
        width = len(own) + skip + 1
        at = [own.index(c) if c in own else width + said.index(c) for c in columns]
        self._pick = itemgetter(*at) if len(at) > 1 else (lambda row, i=at[0]: (row[i],))
        self._own, self._said = own, said

    def __len__(self) -> int:
        return len(self._raw)

    def __getitem__(self, i: int) -> tuple:
        r = self._raw[i]
        return self._pick(r + self._values[r[-1]])

    def take(self, at) -> list[tuple]:
        """The rows at indices ``at`` (a list, or an array), in that order."""
        raw, values, pick = self._raw, self._values, self._pick
        return [pick(r + values[r[-1]]) for r in map(raw.__getitem__, _indices(at))]

    def value_ids(self) -> list[int]:
        """Each row's value id (result_values: what the result says), in row order."""
        return list(map(itemgetter(-1), self._raw))

    def column(self, name: str, at=None) -> list:
        """Column ``name`` of the rows at indices ``at`` (None: every row), without making the rows."""
        raw = self._raw if at is None else map(self._raw.__getitem__, _indices(at))
        if name in self._own:
            return list(map(itemgetter(self._own.index(name)), raw))
        k, values = self._said.index(name), self._values
        return [values[r[-1]][k] for r in raw]


def _indices(at) -> list:
    return at.tolist() if isinstance(at, np.ndarray) else at


@dataclass
class BuildData:
    """One build's latest results (RESULT_COLUMNS rows) with their tests' pks and codes as arrays."""
    name: str
    rows: Rows
    tests: TestTable | None    # None: a one-off count that needs no test attribute (db/counts.py)
    pk: np.ndarray      # tests.id per row
    code: np.ndarray    # CODES of (outcome, kind) per row
    templates: dict = field(default_factory=dict)   # FAILURE_COLUMNS reads: run id -> repro_template

    @classmethod
    def read(cls, store, queries, name: str, tests: TestTable | None,
             columns=RESULT_COLUMNS, test_columns=(), saying: dict | None = None) -> "tuple[BuildData, TestTable]":
        """Read a build; returns it and the test table (read again if the build has tests it lacks).
        ``columns``: RESULT_COLUMNS, or FAILURE_COLUMNS (rows two longer, and the runs'
        repro templates) for failures.py.  ``columns`` starts with test_pk and holds
        outcome and kind.  ``test_columns`` (``tests`` None): a one-off count's read, these
        test attributes joined to the rows in the same query, the test table made of the
        build's own tests (db/counts.py); none (and ``tests`` None): no test table.
        ``saying``: only the results whose value has these fields (queries.latest_rows)."""
        own = [c for c in columns if c in OWN_COLUMNS]
        only = {"saying": saying} if saying else {}
        raw = list(queries.latest_rows(store, name, (*own, *test_columns, "value_id"), plain=True, **only))
        if test_columns:
            tests = TestTable(map(itemgetter(0, *range(len(own), len(own) + len(test_columns))), raw), test_columns)
        n = len(raw)
        vid = list(map(itemgetter(-1), raw))
        at = [VALUE_COLUMNS.index("repro" if c == "stored_repro" else c) for c in columns if c not in OWN_COLUMNS]
        outcome_at, kind_at = VALUE_COLUMNS.index("outcome"), VALUE_COLUMNS.index("kind")
        values, code_of = {}, {}
        for v, fields in queries.values_by_id(store, set(vid)).items():
            values[v] = tuple(fields[i] for i in at)
            code_of[v] = CODES[(fields[outcome_at], fields[kind_at])]
        pk = np.fromiter(map(_PK, raw), dtype=np.int64, count=n)
        if tests is not None and not tests.knows(pk):
            tests = TestTable.read(store, queries, tests.columns)
        code = np.fromiter(map(code_of.__getitem__, vid), dtype=np.int64, count=n)
        templates = queries.repro_templates(store, name) if "run_id" in columns else {}
        return cls(name, Rows(raw, values, columns, len(test_columns)), tests, pk, code, templates), tests

    # -- helpers -------------------------------------------------------------------------
    @cached_property
    def error_at(self) -> np.ndarray:
        """Row indices of results that recorded a numerical error."""
        errors = self.rows.column("max_abs_err")
        return np.array([i for i, e in enumerate(errors) if e is not None], dtype=np.int64)

    @cached_property
    def missing_at(self) -> np.ndarray:
        """Row indices of skip_backend/missing_op results."""
        return np.flatnonzero(self.code == MISSING)

    @cached_property
    def missing_ops(self) -> list:
        """The missing operator of each ``missing_at`` row ('' when none was recorded)."""
        return self.rows.column("missing_op", self.missing_at)

    @cached_property
    def missing_numbered(self) -> tuple[list, np.ndarray]:
        """(the distinct missing operators, each ``missing_at`` row's index among them)."""
        seen = _FirstSeen()
        codes = np.fromiter(map(seen.__getitem__, self.missing_ops), dtype=np.int64, count=len(self.missing_ops))
        return list(seen), codes

    def missing_counts(self) -> dict[str, int]:
        """Tests per missing operator ('' included when a result named none)."""
        ops, codes = self.missing_numbered
        return dict(zip(ops, np.bincount(codes, minlength=len(ops)).tolist()))

    # -- aggregates ----------------------------------------------------------------------
    def counted(self, levels: list, index: np.ndarray) -> list[tuple]:
        """(key, outcome, kind, missing_op, n) rows: the results counted per key (``index``: each
        row's key among ``levels``), the missing operator only where a breakdown reads it.
        The one count behind every breakdown of a stored build (``summary_by``, ``breakdown``)."""
        k = len(CODES.pairs)
        counts = np.bincount(index * k + self.code, minlength=len(levels) * k)
        out = []
        for flat in np.flatnonzero(counts).tolist():
            key, code = divmod(flat, k)
            if code != MISSING:
                out.append((levels[key], *CODES.pairs[code], "", int(counts[flat])))
        ops, codes = self.missing_numbered
        pairs = np.bincount(index[self.missing_at] * len(ops) + codes, minlength=len(levels) * len(ops))
        for flat in np.flatnonzero(pairs).tolist():
            key, op = divmod(flat, len(ops))
            out.append((levels[key], SKIP_BACKEND, MISSING_OP, ops[op], int(pairs[flat])))
        return out

    def summary_by(self, queries, by: str) -> dict:
        """The breakdown per suite or per test file, {key: breakdown} (``by``: a column of
        the test table): ``counted`` per key, shaped by queries.breakdowns_by."""
        return queries.breakdowns_by(self.name, self.counted(self.tests.levels[by], self.tests.index[by][self.pk]))

    def breakdown(self) -> dict:
        """The whole build's breakdown (core.breakdown shape, complete as far as it knows):
        ``counted`` under one key (the store's ``summary`` and the site's)."""
        rows = self.counted([None], np.zeros(len(self.code), dtype=np.int64))
        return breakdown_of_counts(self.name, (row[1:] for row in rows))

    def matrix_numbers(self) -> tuple[list, np.ndarray]:
        """The operator matrix's cells present in this build, sorted by (op, variant, dtype),
        and their COUNT_NAMES numbers (one row each): what pages/matrix.py draws."""
        cell = self.tests.cell[self.pk]
        keep = cell >= 0
        k = len(CODES.pairs)
        n_cells = len(self.tests.cells)
        counts = np.bincount(cell[keep] * k + self.code[keep], minlength=n_cells * k).reshape(n_cells, k)
        present = np.flatnonzero(counts.sum(axis=1))
        numbers = counts[present] @ CODES.projection()
        cells = self.tests.cells
        return [cells[i] for i in present.tolist()], numbers

    def leaderboard(self, queries, first: dict, census: dict | None = None) -> list[dict]:
        """queries.leaderboard's answer (``census``: its full per-model counts, queries.census_models).
        It counts tests per operator outside the model zoo
        whatever their own op, so those rows go in summed per (operator, suite), with no op;
        model-zoo rows go in one by one (their op, the model, is what it counts)."""
        ops, codes = self.missing_numbered
        levels = self.tests.levels["suite"]
        pks = self.pk[self.missing_at]
        models = self.tests.models[pks]
        suite = self.tests.index["suite"][pks]
        rows = []
        plain = ~models
        pairs = np.bincount(codes[plain] * len(levels) + suite[plain], minlength=len(ops) * len(levels))
        for flat in np.flatnonzero(pairs).tolist():
            op, key = divmod(flat, len(levels))
            if ops[op]:
                rows.append((ops[op], levels[key], "", int(pairs[flat])))
        if models.any():
            op_of = self.tests.values["op"]
            zoo = Counter((ops[c], levels[k], op_of[p]) for c, k, p in
                          zip(codes[models].tolist(), suite[models].tolist(), pks[models].tolist()) if ops[c])
            rows.extend((*key, n) for key, n in zoo.items())
        return queries.leaderboard(self.name, rows, first, census)

    def models_rows(self) -> list[int]:
        """Row indices of model-zoo results."""
        return np.flatnonzero(self.tests.models[self.pk]).tolist()


def _dense(b: BuildData, size: int) -> np.ndarray:
    """Row index of each pk in ``b`` (-1: the build has no result for that test)."""
    at = np.full(size, -1, dtype=np.int64)
    at[b.pk] = np.arange(len(b.pk))
    return at


def diff(queries, old: BuildData, new: BuildData) -> dict:
    """The test-by-test diff of ``old`` and ``new`` (the one implementation: the site's diff
    pages, tests and bench/gate.py's reference call it): the transitions and missing
    operators are counted here over every test; diff_maps shapes only the changed tests."""
    size = max(old.tests.size, new.tests.size)
    o_at, n_at = _dense(old, size), _dense(new, size)
    both = np.flatnonzero((o_at >= 0) & (n_at >= 0))
    o_code, n_code = old.code[o_at[both]], new.code[n_at[both]]
    k = len(CODES.pairs)
    pairs = np.bincount(o_code * k + n_code, minlength=k * k)
    transitions = Counter()
    for flat in np.flatnonzero(pairs).tolist():
        a, b = divmod(flat, k)
        transitions[(*CODES.pairs[a], *CODES.pairs[b])] = int(pairs[flat])
    changed = both[o_code != n_code]
    only_old = np.flatnonzero((o_at >= 0) & (n_at < 0))
    only_new = np.flatnonzero((n_at >= 0) & (o_at < 0))
    o_rows, n_rows = old.rows, new.rows
    old_sub = {pk: _VALUE(o_rows[i]) for pk, i in _pairs(np.concatenate([changed, only_old]), o_at)}
    new_sub = {pk: _VALUE(n_rows[i]) for pk, i in _pairs(np.concatenate([changed, only_new]), n_at)}
    old_missing = set(old.missing_counts()) - {""}
    new_missing = Counter(new.missing_counts())
    new_missing.pop("", None)
    # a table read again later knows every test an earlier one did
    tests = new.tests if new.tests.size >= old.tests.size else old.tests
    test_id, op = tests.values["test_id"], tests.values["op"]

    def names(pks):
        return {p: (test_id[p], op[p]) for p in pks}
    return queries.diff_maps(old.name, new.name, old_sub, new_sub, names, totals=(transitions, old_missing, new_missing))


def _pairs(pks: np.ndarray, at: np.ndarray):
    """(pk, row index) for ``pks``, as Python ints."""
    return zip(pks.tolist(), at[pks].tolist())
