"""``torchconform rehearse neuron``: the whole chain for a backend that is not installed,
with refdev standing in for it under that backend's own profile.

run (``--device neuron --profile neuron --backend-module torchconform.refdev.standin``,
refdev named ``neuron``) -> store -> gate (against the newest earlier build of the same
device; the first one passes with a note) -> site.  The backend profile's patterns,
compile backend name, dtype policy and worker pinning are exercised as they will be on
the hardware; the operators are refdev's, so every missing operator and every fallback
operator the build reports must be what ``refdev describe`` says is missing / on the CPU
fallback (printed at the end as "N reported, 0 contradicted").  The stand-in offers the
profile's tracking API (torch_neuronx.get_fallback_ops, ...) over refdev's counters, so the
fallback evidence comes through the profile's tracking path, as on a Trainium host.
``--spec PATH --pytorch-src SRC`` runs a torch-neuronx spec's upstream tests instead of
the ops selection (run --suite upstream --spec).
"""
from __future__ import annotations

import argparse
import os
import sys

from torchconform import settings as tc_settings
from torchconform.cli.options import add_build, add_db
from torchconform.errors import UserError

STANDIN = "torchconform.refdev.standin"


def _check_backend(name: str):
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.core.device import IN_TREE
    from torchconform.core.profile import load_profile

    profile = load_profile(name)
    if profile.device in IN_TREE:
        raise UserError(f"{name!r} is an in-tree device ({profile.device}); rehearse a PrivateUse1 backend "
                        "such as neuron")
    return profile


def ground_truth(db: str | None, build: str, profile: str) -> dict:
    """{"missing": (reported, contradicted), "fallback": (reported, contradicted)}: the
    operators the build's records name as missing / run through the CPU fallback, and
    those refdev's profile does not list as such (``refdev describe``)."""
    # (loaded when the command runs)
    from torchconform import refdev
    from torchconform.config import db_url
    from torchconform.db.read_ops import missing_op_leaderboard
    from torchconform.db.read_rows import iter_outcomes
    from torchconform.db.opening import open_store

    with open_store(db_url(db)) as store:
        missing = {e["op"] for e in missing_op_leaderboard(store, build)}
        fallback = {op for o in iter_outcomes(store, build) for op in (o.fallback_ops or ())}
    truth = refdev.describe(profile)
    return {"missing": (missing, missing - set(truth["missing"])),
            "fallback": (fallback, fallback - set(truth["fallback"]))}


def truth_line(backend: str, build: str, device: str, profile: str, truth: dict) -> str:
    """The rehearsal's last line: "N reported, M contradicted" for missing and fallback operators."""
    parts = []
    for what in ("missing", "fallback"):
        reported, wrong = truth[what]
        parts.append(f"{len(reported)} {what} operators reported, {len(wrong)} contradicted"
                     + (f" ({', '.join(sorted(wrong)[:5])})" if wrong else ""))
    return (f"rehearse {backend}: build {build} on device {device}, checked against refdev's {profile} "
            f"profile: " + "; ".join(parts))


def _run(args) -> int:
    # (loaded when the command runs)
    from torchconform.cli.main import build_parser

    profile = _check_backend(args.backend)
    os.environ["TORCHCONFORM_REFDEV_NAME"] = profile.device
    os.environ["TORCHCONFORM_REFDEV_PROFILE"] = args.refdev_profile
    parser = build_parser()
    build = args.build or None
    what = _spec_args(parser, args) if args.spec else ["--suite", "ops", "--selection", args.selection]
    run_argv = ["run", *what, "--device", profile.device,
                "--profile", args.backend, "--backend-module", STANDIN, "--refdev-profile", args.refdev_profile]
    run_argv += ["--build", build] if build else []
    run_argv += ["--ops", args.ops] if args.ops else []
    run_argv += ["-n", str(args.workers)] if args.workers is not None else []
    run_argv += ["--db", args.db] if args.db else []
    run_args = parser.parse_args(run_argv)
    if run_args.build is None:
        # (loaded when the command runs)
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
    truth = ground_truth(args.db, run_args.build, args.refdev_profile)
    print(truth_line(args.backend, run_args.build, profile.device, args.refdev_profile, truth), file=sys.stderr)
    if any(wrong for _, wrong in truth.values()):
        return 1
    return gate_rc or site_rc or 0


def _spec_args(parser, args) -> list[str]:
    """The run of a torch-neuronx spec's upstream tests in place of the ops selection."""
    run_parser = parser._subparsers._group_actions[0].choices["run"]
    if not any("--spec" in a.option_strings for a in run_parser._actions):
        raise UserError("this torchconform's run has no --spec option yet; rehearse without --spec")
    if not os.path.isfile(args.spec):
        raise UserError(f"--spec {args.spec!r} is not a file; give a torch-neuronx spec JSON file")
    src = args.pytorch_src or tc_settings.given("TORCHCONFORM_PYTORCH_SRC")
    if not src:
        raise UserError("--spec runs PyTorch's own test files: give --pytorch-src SRC (a PyTorch source checkout) "
                        "or set TORCHCONFORM_PYTORCH_SRC")
    return ["--suite", "upstream", "--spec", os.path.abspath(args.spec), "--pytorch-src", src]


def register(sub):
    p = sub.add_parser("rehearse", help="run, gate and publish a backend's profile with refdev standing in for it",
                       description=__doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("backend", help="backend profile to rehearse (skiplists/<backend>/profile.yaml), e.g. neuron")
    p.add_argument("--selection", default="quick", choices=("quick", "full"), help="ops selection (default quick)")
    p.add_argument("--ops", default=None, help="comma-separated OpInfo names to restrict the run to")
    p.add_argument("--spec", default=None, metavar="PATH",
                   help="a torch-neuronx spec JSON: run its upstream tests (run --suite upstream --spec) instead "
                        "of the ops selection; needs --pytorch-src")
    p.add_argument("--pytorch-src", default=None, metavar="SRC",
                   help="PyTorch source checkout for --spec (default $TORCHCONFORM_PYTORCH_SRC)")
    p.add_argument("--refdev-profile", default="young-backend",
                   help="refdev operator profile standing in for the backend (default young-backend)")
    add_build(p, required=False, help="build name (default <device>-<refdev profile>-rehearsal-<UTC time>)")
    p.add_argument("-n", "--workers", type=int, default=None, help="pytest-xdist workers (default: CPU count)")
    add_db(p)
    p.add_argument("--out", default="site", help="site folder (default ./site)")
    p.set_defaults(func=_run)
