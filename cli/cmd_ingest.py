"""``torchconform ingest FILE... --build NAME [--suite S] [--append]``: load JUnit XML."""
import shlex
import socket
import sys

from torchconform.cli.options import add_build, add_db
from torchconform.db.ingest import ingest
from torchconform.db.opening import open_store


def _run(args) -> int:
    with open_store(args.db) as store:
        result = ingest(store, args.files, args.build, suite=args.suite, append=args.append, profile=args.profile,
                        command=shlex.join(["torchconform", *sys.argv[1:]]), host=socket.gethostname(),
                        allow_empty=args.allow_empty)
    print(f"ingested {result['outcomes']} outcomes from {result['files']} file(s) into build {result['build']}")
    return 0


def register(sub):
    p = sub.add_parser("ingest", help="load JUnit XML reports from any runner into the store")
    p.add_argument("files", nargs="+", metavar="FILE", help="JUnit XML files")
    add_build(p, help="build name to store them under")
    p.add_argument("--suite", help="suite name (default: from the file)")
    p.add_argument("--append", action="store_true", help="add to an existing build instead of refusing")
    p.add_argument("--allow-empty", action="store_true",
                   help="store a report with no test cases as an empty run (refused by default)")
    p.add_argument("--profile", help="backend profile whose messages classify untagged outcomes (default: generic)")
    add_db(p)
    p.set_defaults(func=_run)
