"""``torchconform census --device D --build B [--baseline OLD] [--json] [--csv PATH]``.

Every ATen operator overload of the installed torch with its status on the device
(native / autograd / composite / fallback / missing / unavailable), stored per
build; with ``--baseline`` the operators gained and lost since that build's census.
Without ``--device`` it reads the stored census of ``--build`` (diff, JSON, CSV).
``--models``: each model the build ran with every operator blocking it on that census
(from the operator sets the models suite traced; census/models.py).
"""
from __future__ import annotations

import csv
import json
import os
import sys

from torchconform.cli.options import add_build, add_db, add_device, add_json
from torchconform.errors import UserError

CSV_COLUMNS = ("op", "status", "via", "covered", "reached", "blocked_by")


def _check_csv(path: str | None) -> None:
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"--csv {path}: folder {folder} does not exist; create it or pass another path")


def _covered_text(value) -> str:
    return "" if value is None else ("yes" if value else "no")


def write_csv(path: str, rows) -> None:
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.safe import csv_cell

    try:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh)
            out.writerow(CSV_COLUMNS)
            for r in rows:
                reached = "" if r.reached is None else " ".join(r.reached)
                out.writerow([csv_cell(v) for v in (r.op, r.status, r.via, _covered_text(r.covered), reached,
                                                    " ".join(r.blocked_by))])
    except OSError as exc:
        raise UserError(f"cannot write --csv {path}: {exc.strerror}; pass a writable path") from None


def _row_line(r) -> str:
    parts = [r.op, r.status]
    if r.via:
        parts.append(r.via)
    if r.status == "composite":
        if r.reached is None:
            parts.append("reaches ? (not traced)")
        else:
            parts.append(f"reaches {' '.join(r.reached) or '-'} (covered {_covered_text(r.covered) or '?'})")
            if r.blocked_by:
                parts.append(f"blocked by {' '.join(r.blocked_by)}")
    return "\t".join(parts)


def _counts(rows) -> dict:
    # (loaded when the command runs)
    from torchconform.core.dispatch import STATUSES

    out = {s: 0 for s in STATUSES}
    for r in rows:
        out[r.status] += 1
    return out


def _composite_coverage(rows) -> dict:
    """Composite rows by what tracing found: every reached operator runs (covered), one does
    not (blocked), or not known (not traced, or reaching something unknown): a composite
    is never counted as working on no evidence."""
    out = {"covered": 0, "blocked": 0, "unknown": 0}
    for r in rows:
        if r.status == "composite":
            out["covered" if r.covered is True else "blocked" if r.covered is False else "unknown"] += 1
    return out


def _model_line(block) -> str:
    if not block.traced:
        return f"{block.model_id}\tno stored operator trace"
    if not block.ops:
        return f"{block.model_id}\tnothing blocks it"
    # (loaded when the command runs)
    from torchconform.census.models import DIRECT

    parts = [op if how == DIRECT else f"{op} (through {how})" for op, how in sorted(block.ops.items())]
    return f"{block.model_id}\t{len(parts)} blocking: " + ", ".join(parts)


def print_models(store, build: str, rows, as_json: bool) -> None:
    """``--models``: one line (or JSON entry) per model of ``build`` with its blocking operators."""
    # (loaded when the command runs)
    from torchconform.census.models import blocking_for_build

    blocks = blocking_for_build(store, build, rows)
    if as_json:
        print(json.dumps({"build": build, "models": [b.to_dict() for b in blocks.values()]}, indent=2))
        return
    for block in blocks.values():
        print(_model_line(block))
    traced = [b for b in blocks.values() if b.traced]
    print(f"models of build {build}: {len(blocks)}, {len(traced)} traced, "
          f"{sum(1 for b in traced if b.ops)} blocked on its census"
          + ("" if blocks else " (the build has no models-suite results: `torchconform sweep --suite models`)"))
    if len(traced) < len(blocks):
        print("models without a stored trace: run them with `torchconform sweep --suite models` "
              "at the build's torch version")


def _run(args) -> int:
    # (loaded when the command runs)
    from torchconform.census import diff as diff_mod
    from torchconform.census import records
    from torchconform.config import db_url
    from torchconform.db.opening import open_store

    _check_csv(args.csv)
    if args.models and args.baseline:
        raise UserError("--models lists the build's models, --baseline diffs censuses; pass one of them")
    if args.baseline and args.baseline == args.build:
        raise UserError(f"--baseline {args.baseline!r} is the build itself; pass an earlier build's name")
    census = None
    url = db_url(args.db)
    if args.device:
        # (loaded when the command runs)
        from torchconform.census.take import take_census

        profile, module = _backend(args)
        census = take_census(args.device, profile, module, do_trace=not args.no_trace,
                             observed_fallback=_observed_fallback(url, args.build))
    with open_store(url, create=census is not None) as store:
        if census is not None:
            records.save(store, args.build, census)
            rows = census.rows
        else:
            rows = records.require(store, args.build)
        found = None
        if args.baseline:
            records.require(store, args.baseline)
            found = diff_mod.builds_diff(store, args.build, args.baseline)
        if args.models:
            print_models(store, args.build, rows, args.json)
            return 0
        agreement = _agreement(store, args.build, rows)
    if args.csv:
        write_csv(args.csv, rows)
    counts = _counts(rows)
    if args.json:
        doc = {"build": args.build, "counts": counts, "composite_coverage": _composite_coverage(rows),
               "operators": len(rows), "rows": [r.to_dict() for r in rows]}
        if census is not None:
            doc.update(device=census.device, backend_key=census.backend_key, torch_version=census.torch_version,
                       profile=census.profile, refdev_profile=census.refdev_profile,
                       seconds=round(census.seconds, 3))
        if found is not None:
            doc["diff"] = found.to_dict()
        if agreement is not None:
            doc["agreement"] = agreement.to_dict()
        print(json.dumps(doc, indent=2))
        return 0
    if not args.diff_only:
        for r in rows:
            print(_row_line(r))
    where = f" on {census.device} ({census.backend_key}, {census.seconds:.1f}s)" if census is not None else ""
    print(f"census of build {args.build}{where}: {len(rows)} operators: "
          + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print("  composites: " + ", ".join(f"{k} {v}" for k, v in _composite_coverage(rows).items()))
    if agreement is not None:
        print(agreement.line())
    if found is not None:
        print(diff_mod.format_diff(found, limit=args.top))
    sys.stdout.flush()
    return 0


def _backend(args) -> tuple[str, str]:
    """(profile path, backend module) as ``run`` picks them (skiplists/backend_setup.py): the given
    or shipped profile (skiplists/torchvulkan/ for vulkan), else defaults probed in a child
    and written to .torchconform/profiles/<device>.yaml; what the probe found the backend
    needs (TORCH_DEVICE_BACKEND_AUTOLOAD=0 where torch's autoload gets in the way) is set
    before torch is imported here.  The device comes up in this process (census/take.py)."""
    # (loaded when the command runs)
    from torchconform.skiplists.backend_setup import resolve_backend

    backend = resolve_backend(args, check=False)
    for key, value in backend.env.items():
        os.environ[key] = value
    return backend.profile.path or backend.profile.name, backend.backend_module


def _observed_fallback(url: str, build: str) -> list[str]:
    """Operators the build's passing tests ran through the CPU fallback (none before any
    test of the build ran, or where the store does not exist yet)."""
    # (loaded when the command runs)
    from torchconform.census.agreement import findings
    from torchconform.db import read_rows
    from torchconform.db.opening import open_store

    try:
        with open_store(url, create=False) as store:
            found = findings(read_rows.iter_outcomes(store, build))
    except UserError:
        return []
    return sorted(op for op, f in found.items() if f.fallback)


def _agreement(store, build: str, rows):
    """The census against the build's own tests (census/agreement.py); None when the build
    holds no test results (a census taken alone)."""
    # (loaded when the command runs)
    from torchconform.census.agreement import compare
    from torchconform.db import read_rows

    outcomes = list(read_rows.iter_outcomes(store, build))
    return compare(rows, outcomes) if outcomes else None


def register(sub):
    p = sub.add_parser("census", help="every ATen operator's status on a device, stored per build")
    add_build(p, help="build to store the census as (or to read it from)")
    add_device(p, help="device under test (refdev, cuda, cpu, a PrivateUse1 name); "
                       "without it the stored census of --build is read")
    p.add_argument("--profile", help="backend profile (skiplists/<name>/profile.yaml or a path); default: the device's")
    p.add_argument("--backend-module", help="module that registers the backend (default: the profile's)")
    p.add_argument("--baseline", help="an earlier build with a census: list operators gained and lost since")
    p.add_argument("--no-trace", action="store_true", help="do not trace what composite operators reach")
    p.add_argument("--diff-only", action="store_true", help="print the summary and diff, not every operator")
    p.add_argument("--top", type=int, default=50, help="diff entries listed per kind (default 50)")
    p.add_argument("--models", action="store_true",
                   help="list each model of the build with every operator blocking it on the census "
                        "(marked when reached only through a composite's decomposition)")
    add_json(p, help="print JSON (rows, counts, diff; models with --models)")
    p.add_argument("--csv", help="also write the rows to this CSV file")
    add_db(p)
    p.set_defaults(func=_run)
