"""``torchconform perf``: a build's per-operator performance, the operators slowest relative to
CPU, and the changes against a baseline (docs/perf.md).

    torchconform perf --build B                          the table and the slowest operators
    torchconform perf --build B --baseline A|latest      plus the changes (what perf_regression judges)
    torchconform perf --build B --op add --json|--csv    one operator; machine-readable

Read from the rows ``run --suite perf`` stored (db/perf.py); the comparison is
torchconform/core/perf.py's: the device/CPU ratio of the warm minimums measured in the same run,
against the baseline's, with a threshold, a floor and a noise limit.
"""
from __future__ import annotations

import csv
import json
import sys

from torchconform.cli.options import add_build, add_db, add_json
from torchconform.core import perf
from torchconform.errors import UserError

TABLE_COLUMNS = ("op", "dtype", "direction", "variant", "sample", "calls", *perf.FIGURES, "ratio")
CHANGE_COLUMNS = ("baseline_ratio", "change", "verdict")


def register(sub):
    p = sub.add_parser("perf", help="per-operator performance of a build: device vs CPU, slowest ops, changes",
                       description="Per-operator performance of a build (run --suite perf): the table, the "
                                   "operators slowest relative to CPU and the changes against a baseline.")
    add_build(p)
    p.add_argument("--baseline", default="", help="compare with this build, or 'latest' (the gate's baseline)")
    p.add_argument("--op", default="", help="only this operator (its OpInfo name, e.g. add or div.no_rounding_mode)")
    p.add_argument("--threshold", type=float, default=perf.DEFAULT_THRESHOLD,
                   help=f"a ratio that grew by more than this factor is a regression (default {perf.DEFAULT_THRESHOLD})")
    p.add_argument("--floor", type=float, default=perf.DEFAULT_FLOOR_S, metavar="SECONDS",
                   help="operators faster than this on the device in both builds are not judged "
                        f"(default {perf.DEFAULT_FLOOR_S:g} s)")
    p.add_argument("--max-spread", type=float, default=perf.DEFAULT_MAX_SPREAD, metavar="FACTOR",
                   help="timings whose warm median exceeds their minimum by more than this factor (either side, "
                        f"either build) are too noisy to judge (default {perf.DEFAULT_MAX_SPREAD})")
    p.add_argument("--top", type=int, default=10, help="slowest operators to list (default 10)")
    fmt = p.add_mutually_exclusive_group()
    add_json(fmt)
    fmt.add_argument("--csv", action="store_true", help="print the table as CSV")
    add_db(p)
    p.set_defaults(func=_run)


def report(store, build: str, baseline_spec: str = "", op: str = "", threshold: float = perf.DEFAULT_THRESHOLD,
           floor_s: float = perf.DEFAULT_FLOOR_S, top: int = 10, max_spread: float = perf.DEFAULT_MAX_SPREAD) -> dict:
    """What the command prints, as one dict (its --json)."""
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.db import perf as perf_db

    if threshold <= 1.0:
        raise UserError(f"--threshold {threshold:g} is not a slowdown factor; use a number above 1 (default "
                        f"{perf.DEFAULT_THRESHOLD})")
    if max_spread <= 1.0:
        raise UserError(f"--max-spread {max_spread:g} is not a factor; use a number above 1 (default "
                        f"{perf.DEFAULT_MAX_SPREAD})")
    if floor_s < 0:
        raise UserError(f"--floor {floor_s:g} is not a time; use 0 or more seconds")
    if top < 0:
        raise UserError(f"--top {top} is not a count; use 0 or more")
    rows = perf_db.build_rows(store, build, op or None)
    if not rows:
        what = f"no perf results for operator {op!r}" if op and perf_db.has_rows(store, build) else "no perf results"
        raise UserError(f"build {build!r} has {what}; run `torchconform run --suite perf --build {build}` "
                        "(or pick a build listed by `torchconform builds` that ran the perf suite)")
    out = {"build": build, "baseline": None, "threshold": threshold, "floor_s": floor_s,
           "max_spread": max_spread, "rows": rows,
           "slowest": [dict(r) for r in perf.slowest(rows, top)], "changes": [], "regressions": []}
    if baseline_spec:
        # (loaded when the command runs)
        from torchconform.ci.pipeline import resolve_baseline

        base = resolve_baseline(store, build, baseline_spec)
        if base is None:
            raise UserError(f"build {build!r} has no baseline to compare with ({baseline_spec}); pass --baseline NAME")
        if not perf_db.has_rows(store, base):
            raise UserError(f"baseline {base!r} has no perf results to compare with; pass --baseline NAME of a "
                            "build that ran the perf suite")
        changes = perf_db.compare(store, build, base, threshold, floor_s, op or None, max_spread)
        out.update(baseline=base, changes=changes, regressions=[c for c in changes if c["verdict"] == "regression"])
    return out


def _run(args) -> int:
    # (loaded when the command runs)
    from torchconform.db.opening import open_store

    with open_store(args.db, create=False) as store:
        result = report(store, args.build, args.baseline, args.op, args.threshold, args.floor, args.top,
                        args.max_spread)
    if args.json:
        print(json.dumps(result, indent=2))
    elif args.csv:
        _print_csv(result)
    else:
        _print_text(result)
    return 0


def _print_csv(result: dict) -> None:
    changes = {(c["op"], c["dtype"], c["direction"], c["variant"]): c for c in result["changes"]}
    writer = csv.writer(sys.stdout, lineterminator="\n")
    extra = CHANGE_COLUMNS if result["baseline"] else ()
    writer.writerow(TABLE_COLUMNS + extra)
    for r in result["rows"]:
        row = [r.get(c) for c in TABLE_COLUMNS]
        if extra:
            c = changes.get(perf.key(r)) or {}
            row += [c.get("old_ratio"), c.get("change"), c.get("verdict")]
        writer.writerow(["" if v is None else v for v in row])


def _us(seconds) -> str | None:
    return None if seconds is None else f"{seconds * 1e6:.1f}"


def _ratio(value) -> str | None:
    return None if value is None else f"{value:.3g}x"


def _print_table(title: str, columns, rows) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", title=title, title_justify="left")
    for name, right in columns:
        table.add_column(name, justify="right" if right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    Console(width=400, soft_wrap=True, highlight=False, markup=False).print(table)


def _print_text(result: dict) -> None:
    columns = [("op", False), ("dtype", False), ("direction", False), ("variant", False), ("device first us", True),
               ("device min us", True), ("median", True), ("max", True), ("CPU first us", True),
               ("CPU min us", True), ("median", True), ("max", True), ("device/CPU", True)]
    _print_table(f"build {result['build']}: {len(result['rows'])} operator x dtype x direction x variant timings "
                 f"(warm: {result['rows'][0]['calls']} calls per side; times in microseconds)", columns,
                 [[r["op"], r["dtype"], r["direction"], r["variant"], *(_us(r[f]) for f in perf.FIGURES),
                   _ratio(r["ratio"])]
                  for r in result["rows"]])
    print()
    _print_table("slowest relative to CPU (device/CPU of the warm minimums)",
                 [("op", False), ("dtype", False), ("direction", False), ("variant", False), ("device/CPU", True),
                  ("device min us", True), ("CPU min us", True)],
                 [[r["op"], r["dtype"], r["direction"], r["variant"], _ratio(r["ratio"]), _us(r["dev_min"]), _us(r["cpu_min"])]
                  for r in result["slowest"]])
    if not result["baseline"]:
        return
    changes = result["changes"]
    judged = [c for c in changes if c["verdict"] not in ("below floor", "noisy")]
    below = sum(c["verdict"] == "below floor" for c in changes)
    print()
    print(f"against baseline {result['baseline']}: {len(changes)} timings in both, {len(judged)} judged "
          f"({below} below the {result['floor_s'] * 1e6:g} us floor, {len(changes) - len(judged) - below} noisy: "
          f"median over {result['max_spread']:g}x the minimum), threshold "
          f"{result['threshold']:g}x on the device/CPU ratio: {len(result['regressions'])} regressions, "
          f"{sum(c['verdict'] == 'improvement' for c in changes)} improvements")
    moved = [c for c in changes if c["verdict"] in ("regression", "improvement", "noisy")]
    if moved:
        _print_table("changes against the baseline",
                     [("op", False), ("dtype", False), ("direction", False), ("variant", False), ("verdict", False),
                      ("baseline ratio", True), ("ratio", True), ("change", True), ("spread", True),
                      ("device min us", True)],
                     [[c["op"], c["dtype"], c["direction"], c["variant"], c["verdict"], _ratio(c["old_ratio"]), _ratio(c["new_ratio"]),
                       _ratio(c["change"]), _ratio(c["spread"]), _us(c["new_dev_min"])] for c in moved])
