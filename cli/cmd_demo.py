"""``torchconform demo``: the README's main job on the embedded defaults.

Reference device (refdev, young-backend profile) -> self-check -> the quick
OpInfo selection through the plugin -> the SQLite store (./torchconform.db) ->
the static site (./site).  Each step is the same library/CLI path a user runs
by hand; this command only chains them, so the first thing a newcomer sees is a
dashboard of a real run.  Running it twice keeps both builds.
"""
from __future__ import annotations

import argparse
import sys

from torchconform.cli.options import add_db
from torchconform.errors import UserError


def self_check() -> str:
    """Load refdev and prove it computes, views and reports a missing operator."""
    import torch

    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform import refdev

    name = refdev.load()
    info = refdev.describe()
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    d = a.to(name)
    if not torch.equal((d + d).cpu(), a + a):
        raise UserError(f"refdev self-check failed: {name} computed a wrong sum; rebuild with TORCHCONFORM_REFDEV_VERBOSE=1")
    view = d[1]
    view.fill_(7)
    if d.cpu()[1].tolist() != [7.0] * 4:
        raise UserError(f"refdev self-check failed: views on {name} do not alias storage")
    return (f"refdev self-check: device '{name}' ({refdev_device_count(name)} devices), "
            f"profile {info['profile']}: {len(info['implemented'])} implemented, "
            f"{len(info['fallback'])} CPU-fallback, {len(info['missing'])} missing operator overloads")


def refdev_device_count(name: str) -> int:
    import torch

    return getattr(torch, name).device_count()


def _run(args) -> int:
    # (loaded when the command runs)
    from torchconform.cli.main import build_parser

    print(self_check(), file=sys.stderr)
    parser = build_parser()
    run_argv = ["run", "--suite", "ops", "--selection", args.selection, "--device", "refdev",
                "--refdev-profile", args.refdev_profile]
    if args.workers is not None:
        run_argv += ["-n", str(args.workers)]
    if args.verbose:
        run_argv += ["-v"]
    if args.db:
        run_argv += ["--db", args.db]
    run_args = parser.parse_args(run_argv)
    rc = run_args.func(run_args)
    if rc not in (0, None):
        return rc
    site_argv = ["site", "--out", args.out] + (["--db", args.db] if args.db else [])
    site_args = parser.parse_args(site_argv)
    return site_args.func(site_args)


def register(sub):
    p = sub.add_parser("demo", help="the main job: refdev self-check, quick ops run stored in SQLite, site",
                       description=__doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--selection", default="quick", choices=("quick", "full"), help="ops selection (default quick)")
    p.add_argument("--refdev-profile", default="young-backend", help="refdev operator profile (default young-backend)")
    p.add_argument("-n", "--workers", type=int, default=None, help="pytest-xdist workers (default: CPU count)")
    add_db(p)
    p.add_argument("--out", default="site", help="site folder (default ./site)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="stream pytest's own output as the run goes (default: a progress bar, the output in a log file)")
    p.set_defaults(func=_run)
