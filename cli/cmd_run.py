"""``torchconform run``: run a suite on a device through pytest and the plugin,
then print the breakdown (or ``--json``).

pytest runs in a child process (a PrivateUse1 backend can be registered only
once per process, and a crashing run must not take the CLI down with it).  Its
output goes to a log file beside the outcome records, and stderr gets a progress
display read from those records as they are written (``-v``: pytest's output
as well, streamed); stdout is left to the breakdown or the ``--json``.

This module decides what runs and reports how it ended; the rest is split by concern:
its options (cli/run_options.py), the child pytest and its output (cli/run_child.py), the
progress reader (cli/run_progress.py), the build's claim (cli/run_claim.py), the verdict on
the run's end (cli/run_finish.py) and suite sets (cli/run_set.py).
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import sys

from torchconform import settings as tc_settings
from torchconform.cli.run_child import ESCALATE_SECONDS, build_command, log_path_for, print_log_tail, run_child
from torchconform.cli.run_claim import claim_records, resuming
from torchconform.cli.run_options import add_run_options
from torchconform.cli.run_progress import RunProgress
from torchconform.cli.run_set import run_set
from torchconform.collectors.settings import default_build_name
from torchconform.collectors.sink_jsonl import read_jsonl
from torchconform.config import db_url, mask_password
from torchconform.core import not_run
from torchconform.core.breakdown import breakdown, format_breakdown
from torchconform.db.junit.write import write_junit
from torchconform.db.runstate import PLAN_ENV, plan_steps
from torchconform.errors import UserError
from torchconform.safe import safe_file_name
from torchconform.skiplists.backend_setup import cli_wording, profile_label, resolve_backend
from torchconform.sweep.shards import check_shard

SUITES = ("ops",)  # built in here; other suites plug in as torchconform.suites.<name>


def register(subparsers):
    p = subparsers.add_parser("run", help="run a suite on a device and classify every outcome",
                              description="Run a torchconform suite under pytest with the torchconform plugin.")
    add_run_options(p)
    p.set_defaults(func=run_command)


def _what_runs(args) -> str:
    """The run header's account of what runs: a suite's selection, or for upstream
    (whose --selection means nothing) the files and the checkout."""
    if args.suite == "upstream":
        # The upstream suite brings yaml: imported only for an upstream run, for start-up time.
        from torchconform.suites.upstream import FILES_ENV, SELECTION_ENV, SRC_ENV

        files = tc_settings.given(FILES_ENV) or f"selection {tc_settings.given(SELECTION_ENV) or 'default'}"
        if tc_settings.given("TORCHCONFORM_UPSTREAM_SPEC"):
            files = f"spec {tc_settings.given('TORCHCONFORM_UPSTREAM_SPEC')}"
        return f"upstream {files} from {tc_settings.given(SRC_ENV) or '(no checkout)'}"
    return f"{args.suite}/{args.selection}"


def _store_available() -> bool:
    try:
        return importlib.util.find_spec("torchconform.db.sink") is not None
    except ImportError:
        return False


def run_command(args) -> int:
    check_shard(args.shards, args.shard)
    if args.resume and not args.build:
        raise UserError("--resume finishes an earlier build: pass its name with --build")
    if args.suite_set or args.suite == "all":
        return run_set(args)
    return run_suite(args)


def run_suite(args) -> int:
    # Suites read their own settings from the environment (the upstream suite: checkout and files).
    if args.pytorch_src:
        os.environ["TORCHCONFORM_PYTORCH_SRC"] = os.path.abspath(args.pytorch_src)
    if args.files:
        os.environ["TORCHCONFORM_UPSTREAM_FILES"] = args.files
    if getattr(args, "spec", None):   # callers that build their own args may lack it
        if args.suite != "upstream":
            raise UserError(f"--spec selects upstream PyTorch tests; use it with --suite upstream, not {args.suite}")
        if not os.path.isfile(args.spec):
            raise UserError(f"--spec {args.spec}: no such file; pass a torch-neuronx spec (.json) or its imported YAML")
        os.environ["TORCHCONFORM_UPSTREAM_SPEC"] = os.path.abspath(args.spec)
    if args.world_size is not None:
        # The distributed suite's launcher: imported only for a distributed run, for start-up time.
        from torchconform.suites.distributed.launch import WORLD_SIZE_ENV

        if args.world_size < 2:
            raise UserError(f"--world-size {args.world_size} is not a world size; use 2 or more ranks")
        ranks = resolve_backend(args, check=False).profile.distributed["ranks_per_host"]
        if ranks and args.world_size > ranks:
            raise UserError(f"--world-size {args.world_size} is more ranks than one {args.device} host runs "
                            f"({ranks}, the profile's distributed.ranks_per_host); use at most {ranks}")
        os.environ[WORLD_SIZE_ENV] = str(args.world_size)
    build = args.build or default_build_name(args.device, profile_label(args))
    if args.jsonl:
        jsonl = os.path.abspath(args.jsonl)
        if os.path.exists(jsonl):
            raise UserError(f"{jsonl} already exists; pass another --jsonl (records of one run per file)")
    else:
        # One file per run; a second shard/run of the same build gets its own file.
        # The build name is any text (../x, /tmp/x): it only names a file in that folder.
        base = os.path.abspath(os.path.join(".torchconform", "runs", safe_file_name(build)))
        os.makedirs(os.path.dirname(base), exist_ok=True)
        jsonl = claim_records(base)   # its log created here: two runs never share one (cli/run_claim.py)
    db = None
    if not args.no_db:
        if _store_available():
            db = db_url(args.db)
        else:
            print("torchconform: results store not available in this installation; outcomes are kept in "
                  f"{jsonl}", file=sys.stderr)
    if args.resume and not db:
        raise UserError("--resume finds what a build lacks in the results store; drop --no-db")
    cmd = build_command(args, build, jsonl, db)
    # The device comes up in a child before pytest starts: a backend that cannot load is one
    # line here, and no build is made in the store for it.
    backend = resolve_backend(args)
    env = dict(os.environ, **backend.env)
    if args.shards > 1:
        # Every shard tells the store the build has N of them (recorded when its run starts):
        # the build is complete only when all have finished.
        env[PLAN_ENV] = json.dumps(plan_steps(tc_settings.given(PLAN_ENV, env)) + [{"suite": args.suite, "shards": args.shards}])
    if args.refdev_profile:
        env["TORCHCONFORM_REFDEV_PROFILE"] = args.refdev_profile
    entered = False
    try:
        with resuming(args, build, db):
            entered = True
            print(f"torchconform: build {build}: {_what_runs(args)} on {args.device}", file=sys.stderr)
            return _run_pytest(args, cmd, env, build, jsonl, db)
    except UserError:
        if not entered and not args.jsonl:   # refused (build lock): the log claimed for it goes
            with contextlib.suppress(OSError):
                os.unlink(log_path_for(jsonl))
        raise


def _run_pytest(args, cmd, env, build, jsonl, db) -> int:
    # run_finish brings pytest (collectors/recording.py): imported when a run starts, for start-up time.
    from torchconform.cli import run_finish

    verbose = getattr(args, "verbose", False)   # callers that build their own args may lack it
    log_path = log_path_for(jsonl)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    print(f"torchconform: pytest's own output: {log_path}" + ("" if verbose else " (-v shows it here too)"),
          file=sys.stderr)
    progress = None if verbose else RunProgress(jsonl)
    child = run_child(cmd, env, jsonl, log_path, verbose, progress)
    rc, pumped, forwarded, log = child.rc, child.pumped, child.forwarded, child.log
    usage_error = pumped.usage_error
    run, outcomes = read_jsonl(jsonl) if os.path.exists(jsonl) else ({}, [])
    # Finished only when pytest says so, its run's end was recorded and no sink failed (cli/run_finish.py).
    early = not run_finish.finished(rc, run, pumped)
    crash = None
    if early and forwarded.signal is None:   # a serial run's test that ended the process is a crash
        crash = run_finish.crash_of_test_in_flight(child.inflight, rc, outcomes, run, args.device, args.suite)
    elif forwarded.killed:   # a serial pytest that did not begin ending after the signal: its test interrupted
        crash = run_finish.interrupted_test_in_flight(child.inflight, outcomes, run, args.device, args.suite)
    with contextlib.suppress(OSError):
        os.unlink(child.inflight)
    if crash is not None:
        outcomes.append(crash)
    if progress is not None:
        # The display ends on the very records the breakdown below counts.
        progress.finish(run, outcomes, final=bool(outcomes) and not usage_error)
    if usage_error:
        raise UserError(cli_wording(usage_error))
    if not verbose and early and forwarded.signal is None and crash is None and pumped.stop_reason is None:
        print_log_tail(log_path, rc)   # a cause we cannot name: the end of pytest's output tells it
    if rc not in (0, 1) and not os.path.exists(jsonl):
        if forwarded.signal is not None:
            raise UserError(f"run interrupted ({signal.Signals(forwarded.signal).name}) before any test finished; "
                            "nothing was recorded", exit_code=128 + forwarded.signal)
        raise UserError(f"pytest exited with status {rc} before recording anything (its output: {log_path}); "
                        f"rerun with the command: {mask_password(' '.join(cmd))}")
    ended = not early
    notes = []
    if not ended:
        if crash is not None:
            notes.append(run_finish.append_jsonl(jsonl, crash))
        if forwarded.killed:
            notes.append(f"pytest had not begun ending {ESCALATE_SECONDS:g} s after it and was killed"
                         + (f", its test in flight {crash.test_id} recorded as interrupted" if crash else ""))
        notes.append(_record_unfinished(db, build, child.pid, rc, args, run, outcomes, pumped.stop_reason))
    notes.append(log.error)
    result = breakdown(build, outcomes)
    if run.get("not_run"):   # what the selection left out, per reason (core/not_run.py)
        result["not_run"] = not_run.of_run(run["not_run"])
    result.update(complete=ended, unfinished_runs=[] if ended else [{
        "run": None, "suite": args.suite, "shard": "", "status": "interrupted", "exit_status": rc,
        "results": len(outcomes), "planned": run.get("planned")}])
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        if verbose:
            # pytest's own closing line counts a missing operator as a failure; say which numbers to read.
            print("torchconform's classification (pytest's own counts above treat backend skips as failures):",
                  file=sys.stderr)
        print(format_breakdown(result))
        if run.get("trait_reruns"):
            t = run["trait_reruns"]
            print(f"failures a declared trait may explain: {t['candidates']}; rerun with the trait off {t['rerun']}, "
                  f"attributed {t['attributed']}, by rule {t['by_rule']}, not rerun {t['not_rerun']}")
        print(f"outcome records: {jsonl}" + (f"; stored in {mask_password(db)}" if db else ""))
    if not ended:   # one line: why, how many tests did not run, the fix; never exit status 0
        raise UserError(run_finish.incomplete_line(rc, forwarded.signal, pumped, crash, run.get("planned"),
                                                   len(outcomes), build, db, notes),
                        exit_code=run_finish.exit_status(rc, forwarded.signal))
    if log.error:
        print(f"torchconform: {log.error}", file=sys.stderr)
    # Test failures are results, not errors of the run; anything else is reported as is.
    return 0 if rc in (0, 1) else (128 - rc if rc < 0 else rc)


def _record_unfinished(db, build, pid, rc, args, run, outcomes, stop_reason=None) -> str | None:
    """pytest ended without finishing its run (interrupted, killed, crashed): the stored
    run must say so even when pytest could not (SIGKILL, abort), with the test a serial
    run's process ended in (``crash``, or interrupted when the CLI killed it) among
    ``outcomes``, and a JUnit file asked for holds what was
    recorded.  Returns what could not be done, as a clause of the INCOMPLETE line."""
    said = None
    if db:
        # run_finish brings pytest, the store SQLAlchemy: imported only here, for start-up time.
        from torchconform.cli.run_finish import store_end

        # What pytest recorded, its test in flight among it, made whole in the store: all but after a
        # sink failure (the store then holds at least what the JSON lines do, and may refuse more).
        error = store_end(db, build, pid, rc, () if stop_reason else outcomes)
        if error:
            # After a store failure the cause is said already; the run reads as lost once pytest is gone.
            said = "the store could not mark the run interrupted" + ("" if stop_reason else f" ({error})") + \
                " and shows it lost"
    if args.junit and outcomes and run.get("exitstatus") is None:
        try:
            write_junit(os.path.abspath(args.junit), run, outcomes)
        except OSError as exc:
            said = (said + "; " if said else "") + f"cannot write {args.junit}: {exc.strerror or exc}"
    return said
