"""``torchconform gate``: judge a build against its baseline for CI.

Exit 0: the gate passed; 1: the gate failed; 2: usage or input error (unknown
build, bad config, unwritable output).  The logic lives in torchconform.ci.
"""
from __future__ import annotations

import json
import os
import sys

from torchconform.cli.options import add_build, add_db, add_json
from torchconform.errors import UserError


def _check_output(path: str | None, flag: str) -> None:
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"{flag} {path}: folder {folder} does not exist; create it or pass another path")


def _run(args) -> int:
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.ci.config import load_config
    from torchconform.ci.pipeline import gate_build
    from torchconform.ci.report import write_outputs
    from torchconform.core.clusters import load_categories
    from torchconform.config import db_url
    from torchconform.db.opening import open_store

    if args.reruns is not None and args.reruns < 0:
        raise UserError(f"--reruns {args.reruns} is negative; pass 0 to skip flaky confirmation or a count like 3")
    _check_output(args.summary, "--summary")
    _check_output(args.junit, "--junit")
    config = load_config(args.config)
    categories = load_categories(args.categories) if args.categories else []
    url = db_url(args.db)
    if url.startswith("sqlite:///") and not os.path.exists(url[len("sqlite:///"):]):
        raise UserError(f"database {url[len('sqlite:///'):]} does not exist; pass --db with the results "
                        "database your runs stored into (or set $TORCHCONFORM_DB)")
    with open_store(url, create=False) as store:
        run = gate_build(store, args.build, baseline=args.baseline, config=config, reruns=args.reruns,
                         rerun_cwd=args.rerun_cwd, allow_no_baseline=args.allow_no_baseline,
                         branch=args.branch, categories=categories)
    try:
        write_outputs(run.markdown, run.junit, args.summary, args.junit)
    except OSError as exc:
        raise UserError(f"cannot write the gate report: {exc}; check --summary/--junit and $GITHUB_STEP_SUMMARY") from None

    if args.json:
        print(json.dumps({**run.result.to_dict(), "baseline": run.baseline, "notes": run.notes,
                          "not_rerun": run.not_rerun, "exit_code": run.exit_code}, indent=2, default=str))
    else:
        r = run.result
        print(f"gate {'PASSED' if r.passed else 'FAILED'}: build {r.new} vs baseline {r.old}")
        for rule in r.rules:
            print(f"  {rule.status:<4}  {rule.rule:<19} {rule.detail}")
        if r.flaky:
            print(f"  flaky (not failing): {', '.join(f['test_id'] for f in r.flaky)}")
        for note in run.notes:
            print(f"  note: {note}")
        sys.stdout.flush()
    return run.exit_code


def register(sub):
    p = sub.add_parser(
        "gate", help="gate a build against a baseline (exit 0 pass, 1 fail, 2 usage/input error)",
        description="Compare build NEW with a baseline by the rules in the gate config, rerun failing tests "
                    "to confirm flakiness, write a Markdown summary (also to $GITHUB_STEP_SUMMARY) and a JUnit "
                    "file of the verdicts.  Exit 0: passed, 1: failed, 2: usage or input error.")
    add_build(p, metavar="NEW", help="the build to judge")
    p.add_argument("--baseline", default="latest", metavar="OLD|latest[:BRANCH]",
                   help="baseline build name, or latest (newest earlier complete build on the same device), "
                        "or latest:BRANCH (default: latest)")
    add_db(p)
    p.add_argument("--config", default=None, help="gate config YAML (default: the shipped ci/gate.yaml)")
    p.add_argument("--summary", default=None, metavar="PATH", help="write the Markdown summary here")
    p.add_argument("--junit", default=None, metavar="PATH", help="write a JUnit XML file of the gate's verdicts here")
    p.add_argument("--reruns", type=int, default=None, metavar="N",
                   help="flaky confirmation: reruns per failing test (default from the config: 3; 0 disables)")
    p.add_argument("--rerun-cwd", default=None, metavar="DIR",
                   help="folder to rerun tests from when their repro command gives no absolute path (default: here)")
    p.add_argument("--branch", default="", metavar="BRANCH",
                   help="branch NEW was built from; recorded on the build when it has none, so that "
                        "later builds find it with --baseline latest:BRANCH")
    p.add_argument("--allow-no-baseline", action="store_true",
                   help="pass (with a note) when no baseline build exists yet, instead of exit 2")
    p.add_argument("--categories", default=None, metavar="PATH",
                   help="YAML file of named failure categories (name + message regex) for the summary's "
                        "failure clusters")
    add_json(p, help="print the verdicts as JSON")
    p.set_defaults(func=_run)
