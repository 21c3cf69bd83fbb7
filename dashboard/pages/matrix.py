"""Operator matrix: OpInfo operator x dtype x variant, one cell per combination, coloured by state.

The matrix is the largest thing on the site (thousands of rows per build), so
the page is a small shell and the cells travel as lazily loaded data
(``data/matrix/<slug>.js``) that static/matrix.js turns into the table.  The
full table's JSON/CSV downloads are made from the same data in the browser when
asked for (``records`` is what they hold): written out per build they were seven
times the size of the data.

In the data file a cell is ``[state, i, n, j, m, ...]``: its state (an index into
``states``) and its non-zero counts as (index into ``counts``, count) pairs, 0 for no
cell; passed (pass + pass_fallback) and run (every outcome, the first ``outcomes``
counts, but eligibility skips) follow from the counts (``compact``).
"""
from __future__ import annotations

import numpy as np

from torchconform.core.outcome import OUTCOMES
from torchconform.dashboard.model import BuildInfo
from torchconform.dashboard.styles import BY_KEY
from torchconform.dashboard.tables import Table
from torchconform.db.arrays import COUNT_NAMES   # the numbers per cell, counted in that order

# A cell shows its most important state: anything failing first, then what
# blocks coverage, then passes.  Eligibility skips only when nothing else ran.
# An unexpected pass (a stale expectation the gate warns about) shows before a plain pass.
STATE_ORDER = ("failed", "missing_op", "unsupported_dtype", "skiplist", "not_executed",
               "pass_fallback", "xpass", "pass", "xfail", "skip_eligibility")
# Forward, gradient, out=, other eager checks, compiled: the runner's names
# (suites/ops/selection.py VARIANTS) and the generic ones; others follow by name.
VARIANT_ORDER = ("forward", "compare_cpu", "gradient", "grad", "compare_cpu_grad", "out",
                 "noncontiguous_samples", "compiled", "compile_compare_cpu")


def _variant_key(v: str):
    return (VARIANT_ORDER.index(v) if v in VARIANT_ORDER else len(VARIANT_ORDER), v)


_N_OUTCOMES = len(OUTCOMES)


def _states(numbers: np.ndarray) -> np.ndarray:
    """The state of every row of a (cells x COUNT_NAMES) array, as indices into STATE_ORDER:
    the first state present in STATE_ORDER, backend skips without a kind counting as not
    executed (they still must not look clean)."""
    o = {name: numbers[:, i] for i, name in enumerate(COUNT_NAMES)}
    kinds = numbers[:, _N_OUTCOMES:]
    unexplained = np.maximum(o["skip_backend"] - kinds.sum(axis=1), 0)
    present = {
        "failed": o["fail"] + o["error"] + o["crash"] + o["timeout"],
        "missing_op": o["missing_op"], "unsupported_dtype": o["unsupported_dtype"], "skiplist": o["skiplist"],
        "not_executed": o["not_executed"] + unexplained,
        "pass_fallback": o["pass_fallback"], "xpass": o["xpass"], "pass": o["pass"], "xfail": o["xfail"],
        "skip_eligibility": o["skip_eligibility"],
    }
    shown = np.stack([present[s] > 0 for s in STATE_ORDER], axis=1)
    # none present reads as an eligibility skip
    return np.where(shown.any(axis=1), shown.argmax(axis=1), STATE_ORDER.index("skip_eligibility"))


def build_matrix_arrays(cells: list[tuple], numbers: np.ndarray) -> tuple[dict, Table]:
    """Pivot the cells into (op, variant) rows x dtype columns, plus the download table.

    ``cells``: (op, variant, dtype) keys sorted as tuples, ``numbers``: their COUNT_NAMES
    numbers (arrays.BuildData.matrix_numbers); cells without an operator are left out.
    Array arithmetic throughout (tests/test_site_data.py holds the row-by-row reference)."""
    keep = [i for i, c in enumerate(cells) if c[0]]
    if len(keep) != len(cells):
        cells, numbers = [cells[i] for i in keep], numbers[keep]
    ops, variants_of, dtypes_of = (list(c) for c in zip(*cells)) if cells else ([], [], [])
    dtypes = sorted(set(dtypes_of))
    variants = sorted(set(variants_of), key=_variant_key)
    col = {d: i for i, d in enumerate(dtypes)}
    vrank = {v: i for i, v in enumerate(variants)}
    n = len(cells)
    # cells are sorted by op already; within an op, by the variant order then dtype
    op_rank = np.cumsum([0] + [a != b for a, b in zip(ops, ops[1:])]) if n else np.zeros(0, np.int64)
    order = np.lexsort((np.fromiter(map(col.__getitem__, dtypes_of), np.int64, n),
                        np.fromiter(map(vrank.__getitem__, variants_of), np.int64, n), op_rank)).tolist()
    numbers = np.asarray(numbers, dtype=np.int64).reshape(n, len(COUNT_NAMES))
    states = _states(numbers)
    passed = numbers[:, COUNT_NAMES.index("pass")] + numbers[:, COUNT_NAMES.index("pass_fallback")]
    run = numbers[:, :_N_OUTCOMES].sum(axis=1) - numbers[:, COUNT_NAMES.index("skip_eligibility")]
    table = Table("", ["op", "variant", "dtype", "state", *COUNT_NAMES], title="Operator matrix")
    table.int_from = 4
    rows = table.rows
    pivot_rows: list[list] = []
    last = None
    for i, s, p, r, nums in zip(order, states[order].tolist(), passed[order].tolist(), run[order].tolist(),
                                numbers[order].tolist()):
        op, variant, dtype = cells[i]
        rows.append([op, variant, dtype, STATE_ORDER[s], *nums])
        if (op, variant) != last:
            last = (op, variant)
            entry = [op, variant, [0] * len(dtypes)]
            pivot_rows.append(entry)
        entry[2][col[dtype]] = [s, p, r, nums]
    data = {
        "dtypes": dtypes, "variants": variants, "counts": list(COUNT_NAMES),
        "states": [{"key": s, "symbol": BY_KEY[s].symbol, "label": BY_KEY[s].label} for s in STATE_ORDER],
        "rows": pivot_rows,
    }
    return data, table


def compact(data: dict) -> dict:
    """``build_matrix_arrays``' data as the data file holds it: each cell ``[state, passed, run,
    numbers]`` as ``[state, i, n, ...]`` over its non-zero numbers."""
    rows = [[op, variant, list(map(_compact_cell, cells))] for op, variant, cells in data["rows"]]
    return {**data, "outcomes": _N_OUTCOMES, "rows": rows}


def _compact_cell(c):
    # a plain loop: a generator per cell cost twice as much (30 builds x 20k cells)
    if not c:
        return 0
    out = [c[0]]
    for k, n in enumerate(c[3]):
        if n:
            out += (k, n)
    return out


def records(data: dict) -> list[dict]:
    """The download's records (one per cell: op, variant, dtype, state, every count) from a
    ``compact`` data file: what static/matrix.js builds, in the table's order."""
    out = []
    for op, variant, cells in data["rows"]:
        for dtype, c in zip(data["dtypes"], cells):
            if not c:
                continue
            numbers = [0] * len(data["counts"])
            for k in range(1, len(c), 2):
                numbers[c[k]] = c[k + 1]
            out.append({"op": op, "variant": variant, "dtype": dtype, "state": data["states"][c[0]]["key"],
                        **dict(zip(data["counts"], numbers))})
    return out


def render(site, build: BuildInfo, cells: list[tuple], numbers, generated: str):
    """The matrix page and its data file from arrays.BuildData.matrix_numbers: (op, variant,
    dtype) keys sorted as tuples and a numbers row (COUNT_NAMES order) per cell."""
    base = f"builds/{build.slug}/"
    data, table = build_matrix_arrays(cells, numbers)
    site.write_data(f"data/matrix/{build.slug}.js", f"matrix:{build.slug}", compact(data))
    return site.page(base + "matrix.html", "matrix.html", title=f"Operator matrix · {build.name}", build=build,
                     n_rows=len(data["rows"]), variants=data["variants"], columns=table.columns,
                     data_src=f"data/matrix/{build.slug}.js", data_key=f"matrix:{build.slug}", generated=generated)
