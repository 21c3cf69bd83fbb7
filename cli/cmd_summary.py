"""``torchconform summary --build NAME [--json] [--by suite|file]``: a stored build's breakdown,
plus its measured traits and environment when the build ran the traits suite."""
import json

from torchconform.cli.options import add_build, add_db, add_json
from torchconform.core.breakdown import format_breakdown
from torchconform.db import counts, read_builds
from torchconform.db.opening import open_store
from torchconform.db.readback import format_traits, stored_traits


def _run(args) -> int:
    with open_store(args.db, create=False) as store:
        if args.by:
            result = counts.summary_by(store, args.build, args.by)
            if args.json:
                print(json.dumps(result, indent=2))
            else:
                for key, b in result.items():
                    print(f"[{args.by} {key or '(none)'}]")
                    print(format_breakdown(b, top=args.top))
            return 0
        b = read_builds.summary(store, args.build)
        traits, environment = stored_traits(store, args.build)
    if traits or environment:
        # Only builds with a traits run carry the keys: other summaries keep run --json's shape.
        b = dict(b, traits=traits, environment=environment)
    if args.json:
        print(json.dumps(b, indent=2))
    else:
        print(format_breakdown(b, top=args.top))
        if traits or environment:
            print(format_traits(traits, environment))
    return 0


def register(sub):
    p = sub.add_parser("summary", help="print the breakdown of a stored build")
    add_build(p)
    add_json(p, help="print the breakdown as JSON (same keys as `run --json`)")
    p.add_argument("--by", choices=("suite", "file"), help="one breakdown per suite or per test file")
    p.add_argument("--top", type=int, default=10, help="missing operators to list (default 10)")
    add_db(p)
    p.set_defaults(func=_run)
