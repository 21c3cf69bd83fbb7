"""``torchconform run --suite all`` / ``--suite-set NAME|PATH``: every step of a suite set as a
run of one build (suites/sets.py), each with its own progress, then the combined breakdown.

Each step is its own ``torchconform run`` (pytest suites) or ``torchconform sweep``
(models) child, so a step that crashes or is interrupted is isolated and reported like
a single run; the planned runs travel to every run in ``$TORCHCONFORM_PLAN``, and each run's
store sink records it on the build, so a build whose later steps never ran (or whose
other shards have not run yet) stays incomplete.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from torchconform import settings as tc_settings
from torchconform.cli.run_claim import resumable_build_id
from torchconform.collectors.settings import default_build_name
from torchconform.config import db_url, mask_password
from torchconform.core.breakdown import format_breakdown
from torchconform.db.runstate import PLAN_ENV, shard_label
from torchconform.errors import UserError
from torchconform.procs import die_with_parent, forward_signals
from torchconform.skiplists.backend_setup import GENERATED_DIR, profile_label, resolve_backend

# Options of `run` a pytest step passes on unchanged: (dest, flag).
PASSED_ON = (("profile", "--profile"), ("refdev_profile", "--refdev-profile"),
             ("backend_module", "--backend-module"), ("ops", "--ops"), ("keyword", "-k"),
             ("branch", "--branch"), ("commit", "--commit"), ("files", "--files"))


def step_command(args, step, build: str, db: str) -> list[str]:
    """The child command of one step."""
    tc = [sys.executable, "-m", "torchconform"]
    shards = ["--shards", str(args.shards), "--shard", str(args.shard)] if args.shards > 1 else []
    if step.suite == "models":
        cmd = tc + ["sweep", "--suite", "models", "--selection", step.selection, "--build", build, "--db", db,
                    "--timeout", f"{args.timeout:g}", *shards]
        if args.resume:
            cmd += ["--resume"]
        if args.device != "refdev" or args.profile:
            cmd += ["--device", args.device]
        if args.profile:
            cmd += ["--profile", args.profile]
        return cmd
    cmd = tc + ["run", "--suite", step.suite, "--selection", step.selection, "--build", build, "--db", db,
                "--device", args.device, "--timeout", f"{args.timeout:g}", *shards]
    if args.resume:
        cmd += ["--resume"]
    if args.workers is not None:
        cmd += ["-n", str(args.workers)]
    for dest, flag in PASSED_ON:
        value = getattr(args, dest, None)
        if value:
            cmd += [flag, value]
    if args.pytorch_src:
        cmd += ["--pytorch-src", os.path.abspath(args.pytorch_src)]
    for path in args.skiplist:
        cmd += ["--skiplist", os.path.abspath(path)]
    if args.skiplist_audit:
        cmd += ["--skiplist-audit"]
    return cmd + (["--", *args.pytest_args] if args.pytest_args else [])


def run_set(args) -> int:
    # The store brings SQLAlchemy, suite sets yaml: imported when a set runs, for the CLI's start-up time.
    from torchconform.db import counts, read_builds
    from torchconform.db.opening import open_store
    from torchconform.suites.sets import applicable, load_set
    from torchconform.suites.upstream import SRC_ENV

    if args.no_db:
        raise UserError("a suite set's runs meet in the results store; drop --no-db (or run one --suite at a time)")
    if args.jsonl or args.junit:
        raise UserError("--jsonl/--junit name one run's files; a suite set has a run per step: "
                        "use `torchconform export --build B` afterwards")
    if args.suite_set and args.suite not in ("ops", "all"):
        raise UserError(f"--suite-set and --suite {args.suite} both say what to run; pass one of them")
    name, steps = load_set(args.suite_set or "all")
    steps, notes = applicable(steps, args.pytorch_src or tc_settings.given(SRC_ENV))
    build = args.build or default_build_name(args.device, profile_label(args))
    backend = resolve_backend(args)   # the device comes up before any step stores anything
    if not args.profile and os.path.dirname(backend.profile.path).endswith(GENERATED_DIR):
        args.profile = backend.profile.path   # probed once, for every step
    args.backend_module = backend.backend_module or None
    db = db_url(args.db)
    env = dict(os.environ, **backend.env)
    env[PLAN_ENV] = json.dumps([{"suite": s.suite, "shards": args.shards} for s in steps])
    for note in notes:
        print(f"torchconform: suite set {name}: {note}", file=sys.stderr)
    done = finished_steps(db, build, args.shard, args.shards) if args.resume else set()
    codes: dict[str, int] = {}
    stopped = None
    for i, step in enumerate(steps, 1):
        if step.suite in done:
            print(f"torchconform: suite set {name}, step {i}/{len(steps)}: {step.suite}/{step.selection} already "
                  f"finished in build {build} (--resume)", file=sys.stderr)
            continue
        print(f"torchconform: suite set {name}, step {i}/{len(steps)}: {step.suite}/{step.selection} into build {build}",
              file=sys.stderr)
        # The step's own report (breakdown on stdout) is progress here: stdout stays for the total.
        proc = subprocess.Popen(step_command(args, step, build, db), env=env, stdout=sys.stderr.fileno(),
                                preexec_fn=die_with_parent)
        with forward_signals(proc) as forwarded:
            codes[step.suite] = proc.wait()
        if forwarded.signal is not None:
            stopped = forwarded.signal
            break
    with open_store(db, create=False) as store:
        total = read_builds.summary(store, build)
        by_suite = counts.summary_by(store, build, "suite")
    if args.json:
        print(json.dumps({**total, "suite_set": name, "steps": codes, "suites": by_suite}, indent=2))
    else:
        print(format_breakdown(total))
        print(f"{'suite':<12} {'outcomes':>9} {'passed':>8} {'failed':>8} {'skipped':>8}  exit")
        for suite, b in by_suite.items():
            o = b["outcomes"]
            print(f"{suite or '(none)':<12} {b['total']:>9} {o['pass'] + o['pass_fallback']:>8} "
                  f"{o['fail'] + o['error'] + o['crash'] + o['timeout']:>8} "
                  f"{o['skip_eligibility'] + o['skip_backend']:>8}  {codes.get(suite, '-')}")
        print(f"stored in {mask_password(db)}")
    if stopped is not None:
        return 128 + stopped
    return next((c for c in codes.values() if c), 0)


def finished_steps(db: str, build: str, shard: int, shards: int) -> set[str]:
    """Suites whose runs of this shard in ``build`` all finished (or were resumed): what a
    ``--resume`` of the suite set skips.  A build not in the store has nothing to resume."""
    # SQLAlchemy and the store: imported when a set resumes, for the CLI's start-up time.
    from sqlalchemy import select

    from torchconform.db.models import DONE_STATES, runs
    from torchconform.db.opening import open_store

    with open_store(db, create=False) as store:
        build_id = resumable_build_id(store, build)
        with store.read() as conn:
            rows = conn.execute(select(runs.c.suite, runs.c.status).where(
                runs.c.build_id == build_id, runs.c.shard == shard_label(shard, shards))).all()
    states: dict[str, set[str]] = {}
    for suite, status in rows:
        states.setdefault(suite, set()).add(status)
    return {suite for suite, seen in states.items() if seen <= set(DONE_STATES)}
