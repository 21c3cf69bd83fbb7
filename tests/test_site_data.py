"""The site's array path (db/arrays.py) gives the store's own answers, and
the matrix / download fast paths write what the plain ones write."""
import json
from collections import Counter, defaultdict

import numpy as np
import pytest

from pg import db_url, pg_server, store  # noqa: F401  (fixtures)
from test_store_lean_reads import two_builds
from test_store_queries import O, store_build
from torchconform.db import arrays
from torchconform.core.outcome import BACKEND_SKIP_KINDS, OUTCOMES
from torchconform.db.arrays import BuildData, TestTable
from torchconform.dashboard.pages import matrix
from torchconform.dashboard.styles import BY_KEY
from torchconform.dashboard.tables import Table, write_downloads
from torchconform.census import impact
from torchconform.core.breakdown import breakdown_of_counts
from torchconform.db import counts, read_builds, read_ops, read_rows
from torchconform.dashboard.reads import READS
from torchconform.db.columns import TEST_COLUMNS


def _read(store, name, tests=None):
    tests = tests or TestTable.read(store, READS)
    return BuildData.read(store, READS, name, tests)[0]


def test_array_aggregates_equal_the_one_off_counts_and_the_raw_rows(store):
    two_builds(store)   # b2 has a rerun that supersedes, a model-zoo row, a new and a missing test
    first = read_ops.first_missing_builds(store)
    tests = TestTable.read(store, READS)
    data = {}
    for build in ("b1", "b2"):
        d = data[build] = _read(store, build, tests)
        for by in ("suite", "file"):
            # the site's whole test table and a one-off call's build-only read (db/counts.py)
            assert d.summary_by(READS, by) == counts.summary_by(store, build, by)
        # the leaderboard: the site's whole build and a one-off call's missing-operator rows only
        # (db/counts.py), both against a count here from the raw rows
        board = d.leaderboard(READS, first)
        assert board and board == impact.leaderboard(store, build)
        blocked, zoo = Counter(), defaultdict(set)
        outcomes = list(read_rows.iter_outcomes(store, build))
        for o in outcomes:
            if (o.outcome, o.kind) == ("skip_backend", "missing_op") and o.missing_op:
                if o.suite == "models":
                    zoo[o.missing_op].add(o.op)
                else:
                    blocked[o.missing_op] += 1
        expected = sorted(((op, blocked[op], sorted(zoo[op])) for op in blocked.keys() | zoo.keys()),
                          key=lambda e: (-e[1], -len(e[2]), e[0]))
        assert [(e["op"], e["tests"], e["model_names"]) for e in board] == expected
        assert [e["first_build"] for e in board] == [first[e["op"]][0] for e in board]
        # the whole-build breakdown: the site's and the store's summary, against the raw rows' count
        whole = breakdown_of_counts(build, ((o.outcome, o.kind, o.missing_op, 1) for o in outcomes))
        assert d.breakdown() == whole and counts.breakdown(store, build) == whole
        summary = read_builds.summary(store, build)
        assert {k: summary[k] for k in whole if k not in ("complete", "unfinished_runs")} == \
            {k: v for k, v in whole.items() if k not in ("complete", "unfinished_runs")}
        cells, numbers = d.matrix_numbers()
        # the matrix has no SQL road (issue 32): counted here one outcome at a time instead
        counted = defaultdict(Counter)
        for o in read_rows.iter_outcomes(store, build):
            if o.op and o.suite not in ("models", "distributed"):
                counted[(o.op, o.variant, o.dtype)][o.outcome] += 1
                if o.outcome == "skip_backend":
                    counted[(o.op, o.variant, o.dtype)][o.kind] += 1
        assert cells == sorted(counted)
        assert numbers.tolist() == [[counted[c][name] for name in matrix.COUNT_NAMES] for c in cells]
    got = arrays.diff(READS, data["b1"], data["b2"])
    assert got["regressions"] and got["new_tests"] and got["missing_tests"] and got["new_missing_ops"]
    # and backwards: tests only in the old build become new ones
    back = arrays.diff(READS, data["b2"], data["b1"])
    assert [e["test_id"] for e in back["new_tests"]] == [e["test_id"] for e in got["missing_tests"]]
    assert [e["test_id"] for e in back["missing_tests"]] == [e["test_id"] for e in got["new_tests"]]


def test_latest_rows_without_reruns_skips_the_latest_subquery_with_the_same_rows(store):
    store_build(store, "plain", [O(f"t::{i}", "pass", op="add") for i in range(5)])
    run = store_build(store, "rerun", [O(f"t::{i}", "fail", op="add") for i in range(5)])
    store.add_outcomes(run, [O("t::3", "pass", op="add", attempt=2)])
    cols = ("test_id", "outcome", "attempt")
    assert sorted(tuple(r) for r in read_rows.latest_rows(store, "plain", cols)) == \
        [(f"t::{i}", "pass", 1) for i in range(5)]
    assert sorted(tuple(r) for r in read_rows.latest_rows(store, "rerun", cols)) == \
        [(f"t::{i}", "pass" if i == 3 else "fail", 2 if i == 3 else 1) for i in range(5)]
    assert [tuple(r) for r in read_rows.latest_rows(store, "rerun", cols, order=True)] == \
        sorted(tuple(r) for r in read_rows.latest_rows(store, "rerun", cols))


def test_plain_rows_are_the_row_objects_values(store):
    two_builds(store)
    columns = tuple(read_rows.ROW_COLUMNS)   # every column, float duration included
    for build in ("b1", "b2"):
        rows = [tuple(r) for r in read_rows.latest_rows(store, build, columns, order=True)]
        plain = list(read_rows.latest_rows(store, build, columns, order=True, plain=True))
        assert plain == rows and all(type(r) is tuple for r in plain)
        assert [tuple(map(type, r)) for r in plain] == [tuple(map(type, r)) for r in rows]
    every = sorted(read_rows.stored_tests(store))
    assert every and all(type(r) is tuple and len(r) == 1 + len(TEST_COLUMNS) for r in every)
    assert {r[1] for r in every} >= {r[0] for r in read_rows.latest_rows(store, "b2", ("test_id",))}


def test_test_table_is_read_again_for_tests_stored_later(store):
    store_build(store, "b1", [O("t::a", "pass", op="add", variant="forward", dtype="float32")])
    tests = TestTable.read(store, READS)
    store_build(store, "b2", [O("t::a", "pass", op="add", variant="forward", dtype="float32"),
                              O("t::b", "fail", op="mul", variant="forward", dtype="float32")])
    data, newer = BuildData.read(store, READS, "b2", tests)
    assert newer is not tests and newer.knows(data.pk) and not tests.knows(data.pk)
    assert data.matrix_numbers()[0] == [("add", "forward", "float32"), ("mul", "forward", "float32")]


# -- the row-by-row reference of pages/matrix.build_matrix_arrays ------------------------------------

def cell_state(counts: dict, kinds: dict) -> str:
    """One cell's state: the first of matrix.STATE_ORDER it has."""
    present = {
        "failed": counts["fail"] + counts["error"] + counts["crash"] + counts["timeout"],
        "pass_fallback": counts["pass_fallback"], "xpass": counts["xpass"], "pass": counts["pass"],
        "xfail": counts["xfail"], "skip_eligibility": counts["skip_eligibility"],
        **kinds,
    }
    # skip_backend rows without a kind breakdown still must not look clean
    unexplained = counts["skip_backend"] - sum(kinds.values())
    if unexplained > 0:
        present["not_executed"] = present.get("not_executed", 0) + unexplained
    for state in matrix.STATE_ORDER:
        if present.get(state, 0) > 0:
            return state
    return "skip_eligibility"


def build_matrix(cells: list[dict]) -> tuple[dict, Table]:
    """Pivot {op, variant, dtype, numbers (COUNT_NAMES order)} cells into (op, variant) rows x
    dtype columns, plus the download table, one cell at a time."""
    n_outcomes = len(OUTCOMES)
    dtypes = sorted({r["dtype"] for r in cells})
    variants = sorted({r["variant"] for r in cells}, key=matrix._variant_key)
    col = {d: i for i, d in enumerate(dtypes)}
    state_index = {s: i for i, s in enumerate(matrix.STATE_ORDER)}
    pivot: dict[tuple, list] = {}
    table = Table("", ["op", "variant", "dtype", "state", *matrix.COUNT_NAMES], title="Operator matrix")
    vkey = {v: matrix._variant_key(v) for v in variants}
    for r in sorted(cells, key=lambda r: (r["op"], vkey[r["variant"]], r["dtype"])):
        op, variant, dtype, numbers = r["op"], r["variant"], r["dtype"], r["numbers"]
        if not op:
            continue
        counts = dict(zip(OUTCOMES, numbers))
        state = cell_state(counts, dict(zip(BACKEND_SKIP_KINDS, numbers[n_outcomes:])))
        table.rows.append([op, variant, dtype, state, *numbers])
        entry = pivot.setdefault((op, variant), [op, variant, [0] * len(dtypes)])
        passed = counts["pass"] + counts["pass_fallback"]
        run = sum(numbers[:n_outcomes]) - counts["skip_eligibility"]
        entry[2][col[dtype]] = [state_index[state], passed, run, numbers]
    data = {
        "dtypes": dtypes, "variants": variants, "counts": list(matrix.COUNT_NAMES),
        "states": [{"key": s, "symbol": BY_KEY[s].symbol, "label": BY_KEY[s].label} for s in matrix.STATE_ORDER],
        "rows": list(pivot.values()),
    }
    return data, table


def test_matrix_from_arrays_equals_the_dict_path():
    rng = np.random.default_rng(0)
    cells = sorted({(f"op{rng.integers(5)}", str(rng.choice(["forward", "gradient", "zeta", "out", "compiled"])),
                     str(rng.choice(["float32", "bool", "int64"]))) for _ in range(60)})
    cells = [("", "forward", "float32")] + cells     # a cell with no operator is left out by both
    numbers = rng.integers(0, 3, size=(len(cells), len(matrix.COUNT_NAMES)))
    numbers[::7] = 0
    numbers[3, :] = 0
    numbers[3, matrix.COUNT_NAMES.index("skip_backend")] = 2          # backend skips without a kind
    dicts = [{"op": op, "variant": v, "dtype": d, "numbers": n} for (op, v, d), n in zip(cells, numbers.tolist())]
    slow_data, slow_table = build_matrix(dicts)
    fast_data, fast_table = matrix.build_matrix_arrays(cells, numbers)
    assert fast_data == slow_data
    assert fast_table.rows == slow_table.rows and fast_table.columns == slow_table.columns
    assert {r[3] for r in fast_table.rows} >= {"not_executed", "skip_eligibility"}


@pytest.mark.parametrize("first", ["plain", "=SUM(A1)", 'quo"te</script>\u00e9'])
def test_template_downloads_equal_the_generic_writer(tmp_path, first):
    rows = [[first, "b", 1, 0], ["x", "-y", 2, 30]]
    slow = Table("slow", ["name", "other", "n", "m"], rows=[list(r) for r in rows])
    fast = Table("fast", ["name", "other", "n", "m"], rows=[list(r) for r in rows], int_from=2)
    write_downloads(tmp_path, slow)
    write_downloads(tmp_path, fast)
    assert (tmp_path / "fast.json").read_bytes() == (tmp_path / "slow.json").read_bytes()
    assert (tmp_path / "fast.csv").read_bytes() == (tmp_path / "slow.csv").read_bytes()
    assert json.loads((tmp_path / "fast.json").read_text())[0]["name"] == first


def test_test_table_with_holes_and_any_order():
    # (pk, test_id, suite, file, op, variant, dtype, name): pks out of order, with gaps
    rows = [(7, "m::bert", "models", "m.py", "bert", "forward", "", "bert"),
            (2, "t::b", "ops", "b.py", "mul", "gradient", "float32", "b"),
            (4, "t::a", "ops", "a.py", "add", "forward", "float32", "a"),
            (5, "t::none", "ops", "a.py", "", "", "", "none")]
    t = TestTable(rows)
    assert t.size == 8 and t.values["test_id"][4] == "t::a" and t.values["test_id"][3] is None
    assert t.knows(np.array([2, 4, 7])) and not t.knows(np.array([3])) and not t.knows(np.array([8]))
    assert t.cells == [("add", "forward", "float32"), ("mul", "gradient", "float32")]
    # models and tests without an operator are outside the matrix
    assert t.cell[[2, 4, 5, 7]].tolist() == [1, 0, -1, -1]
    assert t.levels["file"] == ["a.py", "b.py", "m.py"] and t.index["file"][[2, 4, 7]].tolist() == [1, 0, 2]
    assert t.models[7] and not t.models[2]
    assert TestTable([]).cells == []


def test_flaky_query_only_for_builds_with_several_results_of_a_test(tmp_path):
    from torchconform.dashboard import build_site
    from torchconform.db.opening import open_store

    calls = []

    class Counting:
        def __getattr__(self, name):
            fn = getattr(READS, name)
            if name == "flaky_tests":
                return lambda store, build=None, **kw: calls.append(build) or fn(store, build, **kw)
            return fn

    with open_store(str(tmp_path / "s.db")) as s:
        for name in ("b1", "b2", "b3"):
            run = store_build(s, name, [O("t::a", "pass", op="add"), O("t::b", "pass", op="mul")],
                              finish=False, branch="main", device="refdev")
            if name == "b3":   # the gate's rerun: fails, then passes
                s.add_outcomes(run, [O("t::a", "fail", op="add", attempt=2), O("t::a", "pass", op="add", attempt=3)])
            s.finish_run(run, 0)
        build_site(s, tmp_path / "site", queries=Counting())
    assert calls == ["b3"]
    flaky = json.loads((tmp_path / "site/builds/b3/diff-flaky.json").read_text())
    assert flaky == [{"test_id": "t::a", "attempts": "pass \u2192 fail \u2192 pass"}]
    assert json.loads((tmp_path / "site/builds/b2/diff-flaky.json").read_text()) == []
