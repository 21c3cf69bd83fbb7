"""``torchconform rehearse neuron``: the whole chain for a backend that is not installed,
with refdev standing in for it under that backend's own profile.

run (``--device neuron --profile neuron --backend-module torchconform.refdev.standin``,
refdev named ``neuron``) -> store -> gate (against the newest earlier build of the same
device; the first one passes with a note) -> site.  The backend profile's patterns,
compile backend name, dtype policy and worker pinning are exercised as they will be on
the hardware; the operators are refdev's, so the build's missing operators must equal
what ``refdev describe`` says is missing (printed at the end).
"""
from __future__ import annotations

import argparse
import os
import sys

from torchconform.errors import UserError

STANDIN = "torchconform.refdev.standin"


def _check_backend(name: str):
    from torchconform.collectors.device import IN_TREE
    from torchconform.skiplists.profile import load_profile

    profile = load_profile(name)
    if profile.device in IN_TREE:
        raise UserError(f"{name!r} is an in-tree device ({profile.device}); rehearse a PrivateUse1 backend "
                        "such as neuron")
    return profile


def ground_truth_check(db: str | None, build: str, profile: str) -> tuple[set, set]:
    """(missing operators the build reported, those refdev's profile does not list as missing)."""
    from torchconform import refdev
    from torchconform.config import db_url
    from torchconform.db import queries
    from torchconform.db.store import open_store

    with open_store(db_url(db)) as store:
        reported = {e["op"] for e in queries.missing_op_leaderboard(store, build, census=False)}
    truth = set(refdev.describe(profile)["missing"])
    return reported, reported - truth


def _run(args) -> int:
    from torchconform.cli.main import build_parser

    profile = _check_backend(args.backend)
    os.environ["TORCHCONFORM_REFDEV_NAME"] = profile.device
    os.environ["TORCHCONFORM_REFDEV_PROFILE"] = args.refdev_profile
    parser = build_parser()
    build = args.build or None
    run_argv = ["run", "--suite", "ops", "--selection", args.selection, "--device", profile.device,
                "--profile", args.backend, "--backend-module", STANDIN, "--refdev-profile", args.refdev_profile]
    run_argv += ["--build", build] if build else []
    run_argv += ["--ops", args.ops] if args.ops else []
    run_argv += ["-n", str(args.workers)] if args.workers is not None else []
    run_argv += ["--db", args.db] if args.db else []
    run_args = parser.parse_args(run_argv)
    if run_args.build is None:
        from torchconform.collectors.settings import default_build_name

        run_args.build = default_build_name(profile.device, f"{args.refdev_profile}-rehearsal")
    rc = run_args.func(run_args)
    if rc not in (0, 1, None):
        return rc
    common = ["--db", args.db] if args.db else []
    gate_args = parser.parse_args(["gate", "--build", run_args.build, "--baseline", "latest", "--allow-no-baseline",
                                   "--reruns", "0", *common])
    gate_rc = gate_args.func(gate_args)
    site_args = parser.parse_args(["site", "--out", args.out, *common])
    site_rc = site_args.func(site_args)
    reported, unexpected = ground_truth_check(args.db, run_args.build, args.refdev_profile)
    print(f"rehearse {args.backend}: build {run_args.build} on device {profile.device}: {len(reported)} missing "
          f"operators reported, {len(unexpected)} of them not missing in refdev's {args.refdev_profile} profile"
          + (f" ({', '.join(sorted(unexpected)[:5])})" if unexpected else ""), file=sys.stderr)
    if unexpected:
        return 1
    return gate_rc or site_rc or 0


def register(sub):
    p = sub.add_parser("rehearse", help="run, gate and publish a backend's profile with refdev standing in for it",
                       description=__doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("backend", help="backend profile to rehearse (skiplists/<backend>/profile.yaml), e.g. neuron")
    p.add_argument("--selection", default="quick", choices=("quick", "full"), help="ops selection (default quick)")
    p.add_argument("--ops", default=None, help="comma-separated OpInfo names to restrict the run to")
    p.add_argument("--refdev-profile", default="young-backend",
                   help="refdev operator profile standing in for the backend (default young-backend)")
    p.add_argument("--build", default=None, help="build name (default <device>-<refdev profile>-rehearsal-<UTC time>)")
    p.add_argument("-n", "--workers", type=int, default=None, help="pytest-xdist workers (default: CPU count)")
    p.add_argument("--db", default=None, help="results store (default $TORCHCONFORM_DB or ./torchconform.db)")
    p.add_argument("--out", default="site", help="site folder (default ./site)")
    p.set_defaults(func=_run)
