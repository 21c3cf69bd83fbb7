"""``torchconform builds [--json]``: the builds in the store, oldest first."""
import json

from torchconform.db import queries
from torchconform.db.store import open_store


def _run(args) -> int:
    with open_store(args.db, create=False) as store:
        rows = queries.list_builds(store)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no builds stored yet; `torchconform run` or `torchconform ingest` adds one")
        return 0
    print(f"{'build':<40} {'created':<21} {'branch':<16} {'device':<10} {'runs':>4} {'results':>8}  state")
    for r in rows:
        state = "complete" if r["complete"] else "incomplete"
        print(f"{r['name']:<40} {r['created']:<21} {r['branch']:<16} {r['device']:<10} {r['runs']:>4} "
              f"{r['results']:>8}  {state}")
    return 0


def register(sub):
    p = sub.add_parser("builds", help="list the stored builds")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--db", help="database path or URL (default $TORCHCONFORM_DB or ./torchconform.db)")
    p.set_defaults(func=_run)
