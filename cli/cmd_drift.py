"""``torchconform drift``: numerical error per operator x dtype, its growth, its history.

    torchconform drift --build B                      the build's largest errors per op x dtype
    torchconform drift --build B --baseline A|latest  their growth against a baseline
    torchconform drift --op sin --dtype float32       one op x dtype build by build

Over passing tests only, from the errors each comparison recorded (db/drift.py); the
growth is what the gate's ``numeric_drift`` rule judges.
"""
from __future__ import annotations

import json

from torchconform.cli.options import add_build, add_db, add_device, add_json
from torchconform.errors import UserError


def _print_table(columns, rows) -> None:
    """Aligned plain columns (rich, no box: it stays readable when piped)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for title, right in columns:
        table.add_column(title, justify="right" if right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*("" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v) for v in row))
    Console(width=400, soft_wrap=True).print(table)


def _run(args) -> int:
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.ci.pipeline import resolve_baseline
    from torchconform.db import drift
    from torchconform.db.opening import open_store

    if bool(args.op) != bool(args.dtype):
        raise UserError("--op and --dtype name one operator x dtype together; pass both")
    if not args.op and not args.build:
        raise UserError("say what to show: --build B (with --baseline A for the growth) or --op OP --dtype DT")
    with open_store(args.db, create=False) as store:
        if args.op:
            rows = drift.error_history(store, args.op, args.dtype, device=args.device or None)
            columns = [("build", False), ("created", False), ("device", False), ("max abs error", True),
                       ("max rel error", True), ("tests", True)]
            table = [[r["build"], r["created"], r["device"], r["max_abs_err"], r["max_rel_err"], r["tests"]]
                     for r in rows]
            empty = f"no build has a passing {args.op} {args.dtype} test that recorded an error"
        elif args.baseline:
            store.build_id(args.build)  # an unknown build is an error before the baseline is looked for
            base = resolve_baseline(store, args.build, args.baseline)
            if base is None:
                raise UserError(f"build {args.build!r} has no baseline to compare with ({args.baseline}); "
                                "pass --baseline NAME")
            rows = [r for r in drift.drift(store, args.build, base) if args.all or
                    max(r["abs_growth"], r["rel_growth"]) > 1.0][: args.top]
            columns = [("op", False), ("dtype", False), ("tests", True), ("baseline abs", True), ("abs", True),
                       ("abs growth", True), ("baseline rel", True), ("rel", True), ("rel growth", True),
                       ("test", False)]
            table = [[r["op"], r["dtype"], r["tests"], r["old_abs"], r["new_abs"], r["abs_growth"], r["old_rel"],
                      r["new_rel"], r["rel_growth"], r["test_id"]] for r in rows]
            empty = f"no operator's error grew between {base} and {args.build} (--all lists them all)"
        else:
            rows = sorted(drift.op_errors(store, args.build), key=lambda r: (-(r["max_rel_err"] or 0.0),
                                                                           r["op"], r["dtype"]))[: args.top]
            columns = [("op", False), ("dtype", False), ("tests", True), ("max abs error", True),
                       ("max rel error", True), ("test with the largest rel error", False)]
            table = [[r["op"], r["dtype"], r["tests"], r["max_abs_err"], r["max_rel_err"], r["rel_test"]]
                     for r in rows]
            empty = f"build {args.build!r} has no passing test that recorded an error"
    if args.json:
        print(json.dumps(rows, indent=2))
    elif table:
        _print_table(columns, table)
    else:
        print(empty)
    return 0


def register(sub):
    p = sub.add_parser("drift", help="numerical error per operator x dtype: a build's, its growth, its history")
    add_build(p, required=False, default="")
    p.add_argument("--baseline", default="", help="compare with this build, or 'latest' (the gate's baseline)")
    p.add_argument("--op", default="", help="one operator's history (with --dtype)")
    p.add_argument("--dtype", default="", help="one dtype's history (with --op)")
    add_device(p, default="", help="history: only this device's builds")
    p.add_argument("--top", type=int, default=50, help="rows to print (default 50)")
    p.add_argument("--all", action="store_true", help="with --baseline: also the operators whose error did not grow")
    add_json(p)
    add_db(p)
    p.set_defaults(func=_run)
