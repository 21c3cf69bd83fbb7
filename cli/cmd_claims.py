"""``torchconform claims``: a build judged against what its backend claims (the support manifest).

    torchconform claims --build B [--db URL] [--json]      the claims recorded with the build
    torchconform claims --build B --profile P               a build that recorded none, against P's claims now

Per claim: verified, broken promise (claimed but failing or missing) or unverified (nothing in
the build shows it); what passed without a claim (undeclared); coverage as verified ATen
overloads over every overload the build's census sees for the device.  Broken promises do not
change the exit status (the gate's ``broken_claim`` rule does that); a user error does (2).
docs/profiles.md ("Claims").
"""
from __future__ import annotations

import json

from torchconform.cli.options import add_build, add_db, add_json
from torchconform.core.claims import format_report


def register(sub):
    p = sub.add_parser("claims", help="a build against what its backend claims: verified, broken promises, "
                                      "undeclared support, coverage over the census",
                       description="Judge a build against the claims its backend profile declared (recorded "
                                   "with the build when it ran): verified / broken promise / unverified per "
                                   "claim, undeclared support, coverage over the census's operators.")
    add_build(p)
    p.add_argument("--profile", default=None,
                   help="backend profile (name or path) whose claims judge a build that recorded none")
    p.add_argument("--limit", type=int, default=20, help="lines per list in the text report (default 20)")
    add_json(p)
    add_db(p)
    p.set_defaults(func=_run)


def _given(profile: str | None) -> dict | None:
    if not profile:
        return None
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.core.profile import load_profile

    return load_profile(profile).declared_claims() or None


def _run(args) -> int:
    # (loaded when the command runs)
    from torchconform.db.claims import require_claims
    from torchconform.db.opening import open_store
    from torchconform.errors import UserError

    if args.limit < 1:
        raise UserError(f"--limit {args.limit} shows nothing; pass a number of lines of 1 or more")
    with open_store(args.db, create=False) as store:
        store.build_row(args.build)   # an unknown build: one line naming `torchconform builds`
        report, source = require_claims(store, args.build, _given(args.profile))
    if args.json:
        print(json.dumps({"build": args.build, "source": source, **report.to_dict()}, indent=2))
    else:
        print(format_report(report, args.build, limit=args.limit))
        print(f"  (claims {source})")
    return 0
