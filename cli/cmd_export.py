"""``torchconform export --build NAME --format junit|json|csv [--out PATH]``."""
import os
import sys

from torchconform.cli.options import add_build, add_db
from torchconform.db.export import FORMATS, export
from torchconform.db.opening import open_store
from torchconform.errors import UserError


def _run(args) -> int:
    with open_store(args.db, create=False) as store:
        if not args.out or args.out == "-":
            export(store, args.build, args.format, sys.stdout)
            return 0
        folder = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(folder):
            raise UserError(f"cannot write {args.out}: folder {folder} does not exist; create it or pick another --out")
        # Write beside the target and rename, so a failed export leaves no half file.
        tmp = f"{args.out}.tmp{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8", newline="") as out:
                n = export(store, args.build, args.format, out)
            os.replace(tmp, args.out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    print(f"exported {n} outcomes of build {args.build} to {args.out}", file=sys.stderr)
    return 0


def register(sub):
    p = sub.add_parser("export", help="export a stored build as JUnit XML, JSON or CSV")
    add_build(p)
    p.add_argument("--format", required=True, choices=FORMATS, help="output format")
    p.add_argument("--out", help="output file (default: stdout)")
    add_db(p)
    p.set_defaults(func=_run)
