"""Operator matrix: OpInfo operator x dtype x variant, one cell per combination, coloured by state.

The matrix is the largest thing on the site (thousands of rows per build), so
the page is a small shell and the cells travel as lazily loaded data
(``data/matrix/<slug>.js``) that static/matrix.js turns into the table; the full
table is also downloadable as JSON/CSV.
"""
from __future__ import annotations

import numpy as np

from torchconform.collectors.outcome import BACKEND_SKIP_KINDS, OUTCOMES
from torchconform.dashboard.model import BuildInfo
from torchconform.dashboard.styles import BY_KEY
from torchconform.dashboard.tables import Table

# A cell shows its most important state: anything failing first, then what
# blocks coverage, then passes.  Eligibility skips only when nothing else ran.
STATE_ORDER = ("failed", "missing_op", "unsupported_dtype", "skiplist", "not_executed",
               "pass_fallback", "pass", "xfail", "skip_eligibility")
# Forward, gradient, out=, other eager checks, compiled: the runner's names
# (suites/ops/selection.py VARIANTS) and the generic ones; others follow by name.
VARIANT_ORDER = ("forward", "compare_cpu", "gradient", "grad", "compare_cpu_grad", "out",
                 "noncontiguous_samples", "compiled", "compile_compare_cpu")
COUNT_NAMES = (*OUTCOMES, *BACKEND_SKIP_KINDS)


def cell_counts(row: dict) -> tuple[dict, dict]:
    """(outcome counts, backend-skip-kind counts) of one op_matrix row, whatever its nesting."""
    counts = row.get("outcomes") or row.get("counts") or {o: row[o] for o in OUTCOMES if o in row}
    kinds = row.get("backend_skip_kinds") or row.get("kinds") or {k: row[k] for k in BACKEND_SKIP_KINDS if k in row}
    return ({o: int(counts.get(o, 0) or 0) for o in OUTCOMES},
            {k: int(kinds.get(k, 0) or 0) for k in BACKEND_SKIP_KINDS})


def cell_state(counts: dict, kinds: dict) -> str:
    present = {
        "failed": counts["fail"] + counts["error"] + counts["crash"] + counts["timeout"],
        "pass_fallback": counts["pass_fallback"], "pass": counts["pass"],
        "xfail": counts["xfail"] + counts["xpass"], "skip_eligibility": counts["skip_eligibility"],
        **kinds,
    }
    # skip_backend rows without a kind breakdown still must not look clean
    unexplained = counts["skip_backend"] - sum(kinds.values())
    if unexplained > 0:
        present["not_executed"] = present.get("not_executed", 0) + unexplained
    for state in STATE_ORDER:
        if present.get(state, 0) > 0:
            return state
    return "skip_eligibility"


def _variant_key(v: str):
    return (VARIANT_ORDER.index(v) if v in VARIANT_ORDER else len(VARIANT_ORDER), v)


def build_matrix(matrix: list[dict]) -> tuple[dict, Table]:
    """Pivot op_matrix rows into (op, variant) rows x dtype columns, plus the download table."""
    dtypes = sorted({r.get("dtype") or "" for r in matrix})
    variants = sorted({r.get("variant") or "" for r in matrix}, key=_variant_key)
    col = {d: i for i, d in enumerate(dtypes)}
    state_index = {s: i for i, s in enumerate(STATE_ORDER)}
    pivot: dict[tuple, list] = {}
    table = Table("", ["op", "variant", "dtype", "state", *COUNT_NAMES], title="Operator matrix")
    vkey = {v: _variant_key(v) for v in variants}
    for r in sorted(matrix, key=lambda r: (r.get("op") or "", vkey[r.get("variant") or ""], r.get("dtype") or "")):
        op, variant, dtype = r.get("op") or "", r.get("variant") or "", r.get("dtype") or ""
        if not op:
            continue
        numbers = _numbers(r)
        counts = dict(zip(OUTCOMES, numbers))
        state = cell_state(counts, dict(zip(BACKEND_SKIP_KINDS, numbers[_N_OUTCOMES:])))
        table.rows.append([op, variant, dtype, state, *numbers])
        entry = pivot.setdefault((op, variant), [op, variant, [0] * len(dtypes)])
        passed = counts["pass"] + counts["pass_fallback"]
        run = sum(numbers[:_N_OUTCOMES]) - counts["skip_eligibility"]
        entry[2][col[dtype]] = [state_index[state], passed, run, numbers]
    data = {
        "dtypes": dtypes, "variants": variants, "counts": list(COUNT_NAMES),
        "states": [{"key": s, "symbol": BY_KEY[s].symbol, "label": BY_KEY[s].label} for s in STATE_ORDER],
        "rows": list(pivot.values()),
    }
    return data, table


_COUNT_AT = {o: i for i, o in enumerate(OUTCOMES)}
_KIND_AT = {k: len(OUTCOMES) + i for i, k in enumerate(BACKEND_SKIP_KINDS)}
_N_OUTCOMES = len(OUTCOMES)


def _numbers(row: dict) -> list:
    numbers = row.get("numbers")
    if numbers is not None:
        return numbers
    counts, kinds = cell_counts(row)
    return [*(counts[o] for o in OUTCOMES), *(kinds[k] for k in BACKEND_SKIP_KINDS)]


def render(site, build: BuildInfo, matrix: list[dict] | None, generated: str, built=None):
    """``matrix``: op_matrix rows; or ``built``: build_matrix's answer already made."""
    base = f"builds/{build.slug}/"
    data, table = built if built is not None else build_matrix(matrix)
    table.stem = base + "matrix"
    site.write_data(f"data/matrix/{build.slug}.js", f"matrix:{build.slug}", data)
    return site.page(base + "matrix.html", "matrix.html", title=f"Operator matrix · {build.name}", build=build,
                     n_rows=len(data["rows"]), variants=data["variants"], table=table, downloads=[table],
                     data_src=f"data/matrix/{build.slug}.js", data_key=f"matrix:{build.slug}", generated=generated)


def _states(numbers: np.ndarray) -> np.ndarray:
    """``cell_state`` of every row of a (cells x COUNT_NAMES) array, as indices into STATE_ORDER."""
    o = {name: numbers[:, i] for i, name in enumerate(COUNT_NAMES)}
    kinds = numbers[:, _N_OUTCOMES:]
    unexplained = np.maximum(o["skip_backend"] - kinds.sum(axis=1), 0)
    present = {
        "failed": o["fail"] + o["error"] + o["crash"] + o["timeout"],
        "missing_op": o["missing_op"], "unsupported_dtype": o["unsupported_dtype"], "skiplist": o["skiplist"],
        "not_executed": o["not_executed"] + unexplained,
        "pass_fallback": o["pass_fallback"], "pass": o["pass"], "xfail": o["xfail"] + o["xpass"],
        "skip_eligibility": o["skip_eligibility"],
    }
    shown = np.stack([present[s] > 0 for s in STATE_ORDER], axis=1)
    # the first state present; none present reads as an eligibility skip, as in cell_state
    return np.where(shown.any(axis=1), shown.argmax(axis=1), STATE_ORDER.index("skip_eligibility"))


def build_matrix_arrays(cells: list[tuple], numbers: np.ndarray) -> tuple[dict, Table]:
    """``build_matrix``'s answer from (op, variant, dtype) keys sorted as tuples and their
    COUNT_NAMES numbers (build_data.BuildData.matrix_numbers), with array arithmetic:
    the same data and table, in the same order."""
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


def render_cells(site, build: BuildInfo, cells: list[tuple], numbers, generated: str):
    """``render`` from build_data.BuildData.matrix_numbers: (op, variant, dtype) keys sorted
    as tuples and a numbers row (COUNT_NAMES order) per cell."""
    return render(site, build, None, generated, built=build_matrix_arrays(cells, numbers))
