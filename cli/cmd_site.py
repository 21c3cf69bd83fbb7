"""``torchconform site``: generate the static coverage site from the store."""
from __future__ import annotations

import os

from sqlalchemy.engine import make_url

from torchconform.cli.options import add_db
from torchconform.config import db_url
from torchconform.errors import UserError


def _run(args) -> int:
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.dashboard import build_site, retention
    from torchconform.dashboard.publish import github_pages, local
    from torchconform.db.opening import open_store

    # checked before anything is opened or written
    full_builds = retention.checked(args.full_builds)
    url = db_url(args.db)
    path = make_url(url).database if url.startswith("sqlite") else None
    if path and path != ":memory:" and not os.path.exists(path):
        # Opening would create an empty file; there is nothing to show anyway.
        raise UserError(f"no database at {path}; run `torchconform run` or `torchconform ingest` first, "
                        "or pass --db pointing at an existing store")
    with open_store(url, create=False) as store:
        home = build_site(store, args.out, base_url=args.base_url, categories=args.categories,
                          full_builds=full_builds)
    if args.github_pages:
        github_pages.publish(args.out, cname=args.cname)
    if args.publish_to:
        home = local.publish(args.out, args.publish_to) / "index.html"
    print(home.resolve())
    return 0


def register(sub):
    # (loaded when the command runs)
    from torchconform.dashboard.retention import DEFAULT

    p = sub.add_parser("site", help="generate the static HTML coverage site from the store",
                       description="Generate a static site (works from file:// and any static host) "
                                   "and print the path of its home page.")
    add_db(p)
    p.add_argument("--out", default="site", help="output folder (default ./site)")
    p.add_argument("--base-url", help="public URL of the site, for absolute permalinks (e.g. https://org.github.io/repo/)")
    p.add_argument("--github-pages", action="store_true", help="also write .nojekyll for GitHub Pages")
    p.add_argument("--cname", help="custom domain for GitHub Pages (writes CNAME; with --github-pages)")
    p.add_argument("--categories", metavar="PATH",
                   help="YAML file of named failure categories (name + message regex, like Allure's "
                        "categories.json) for the failure clusters pages")
    # a string here, checked by _run: a bad value is one line naming the fix, not argparse's usage
    p.add_argument("--full-builds", metavar="N", default=str(DEFAULT),
                   help=f"the N most recent builds (and the latest of each series) keep every page: matrix, diff, "
                        f"failures, search data, evaluation; older ones keep their home-page row, trend point, "
                        f"breakdown and leaderboard history, and their detail files are removed from --out "
                        f"(default {DEFAULT})")
    p.add_argument("--publish-to", metavar="DIR", help="then copy the site into DIR (a web server's folder), atomically")
    p.set_defaults(func=_run)
