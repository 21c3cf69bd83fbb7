"""``torchconform run``: run a suite on a device through pytest and the plugin,
then print the breakdown (or ``--json``).

pytest runs in a child process (a PrivateUse1 backend can be registered only
once per process, and a crashing run must not take the CLI down with it).  Its
output goes to a log file beside the outcome records, and stderr gets a progress
display read from those records as they are written (``-v``: pytest's output
as well, streamed); stdout is left to the breakdown or the ``--json``.
"""
from __future__ import annotations

import collections
import contextlib
import importlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading

from torchconform.db.runstate import PLAN_ENV, plan_steps, shard_label
from torchconform.errors import UserError
from torchconform.procs import die_with_parent, forward_signals
from torchconform.suites import known_suites

SUITES = ("ops",)  # built in here; other suites plug in as torchconform.suites.<name>


def register(subparsers):
    p = subparsers.add_parser("run", help="run a suite on a device and classify every outcome",
                              description="Run a torchconform suite under pytest with the torchconform plugin.")
    p.add_argument("--suite", default="ops",
                   help="suite to run (default: ops), or all: the suite set 'all' of suites/sets.yaml (traits, ops full, modules "
                        "full, upstream when --pytorch-src is given, models full, distributed full) as runs of one build")
    p.add_argument("--suite-set", default=None, metavar="NAME|PATH",
                   help="run a suite set (a name of suites/sets.yaml, or a YAML file of that shape) into one build")
    p.add_argument("--shards", type=int, default=1,
                   help="split the selection into N shards (balanced by earlier builds' durations on this device)")
    p.add_argument("--shard", type=int, default=0, help="the shard this machine runs (0-based; with --shards)")
    p.add_argument("--resume", action="store_true",
                   help="finish a build an interrupted run left unfinished: run only the tests it lacks "
                        "(with a suite set, only the steps not finished); same --build, --db and selection")
    p.add_argument("--selection", default="quick", choices=("quick", "full"), help="selection of the suite (default: quick)")
    p.add_argument("--device", default="refdev",
                   help="device under test (default: refdev); any PrivateUse1 name with --backend-module, even "
                        "without a profile (defaults probed at start-up; `torchconform backend init` writes one)")
    p.add_argument("--profile", default=None,
                   help="backend profile name or profile.yaml path (default: the device's; docs/profiles.md)")
    p.add_argument("--refdev-profile", default=None,
                   help="refdev operator profile (young-backend, full or a YAML path; default $TORCHCONFORM_REFDEV_PROFILE or young-backend)")
    p.add_argument("--backend-module", default=None, help="module whose import registers the backend")
    p.add_argument("--build", default=None, help="build name (default <device>-<profile>-<UTC time>)")
    p.add_argument("-n", "--workers", type=int, default=None,
                   help="pytest-xdist workers (default: CPU count); 0 runs serially without crash isolation")
    p.add_argument("--junit", default=None, help="also write JUnit XML here")
    p.add_argument("--jsonl", default=None, help="outcome records as JSON lines (default .torchconform/runs/<build as a safe file name>.jsonl)")
    p.add_argument("--db", default=None, help="results store (path or URL; default $TORCHCONFORM_DB or ./torchconform.db)")
    p.add_argument("--no-db", action="store_true", help="do not store the run in the results store")
    p.add_argument("--timeout", type=float, default=600.0, help="per-test timeout in seconds (default 600; 0: none)")
    p.add_argument("--memory-limit-mb", type=int, default=0, metavar="N",
                   help="a test may grow its worker's memory (address space) by at most N MiB; past it the test is "
                        "a crash 'ran out of memory (limit N MiB)' and the worker is replaced (default 0: no limit; needs -n 1 or more)")
    p.add_argument("--ops", default=None, help="comma-separated OpInfo names to restrict the suite to")
    p.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    p.add_argument("--pytorch-src", default=None, help="upstream suite: PyTorch source checkout ($TORCHCONFORM_PYTORCH_SRC)")
    p.add_argument("--files", default=None, help="upstream suite: comma-separated test files (e.g. test_ops,test_nn)")
    p.add_argument("--spec", default=None, metavar="PATH",
                   help="upstream suite: a torch-neuronx spec (JSON, or its `skiplist import` YAML) selects the tests "
                        "and brings its xfail/skip entries (docs/neuron.md)")
    p.add_argument("--world-size", type=int, default=None, metavar="N",
                   help="distributed suite: ranks per test (default 2, $TORCHCONFORM_WORLD_SIZE)")
    p.add_argument("--skiplist", action="append", default=[], metavar="PATH",
                   help="apply this skiplist YAML (repeatable; none by default), e.g. skiplists/refdev/young-backend.yaml")
    p.add_argument("--skiplist-audit", action="store_true",
                   help="run the skiplists' skip entries as xfail to find stale ones (crashes_device entries stay skipped)")
    p.add_argument("--branch", default=None,
                   help="source branch recorded with the build (default $TORCHCONFORM_BRANCH, GitHub's, or git's)")
    p.add_argument("--commit", default=None,
                   help="source commit recorded with the build (default $TORCHCONFORM_COMMIT, GitHub's, or git's)")
    p.add_argument("--trait-reruns", type=int, default=None, metavar="N",
                   help="rerun at most N failures a declared trait may explain with the trait off, to attribute "
                        "them (default 200; 0: none; docs/classification.md)")
    p.add_argument("--no-fallback", action="store_true",
                   help="strict mode: a test that ran an operator through the CPU fallback is a fail of kind "
                        "fallback_forbidden naming them; sets the profile's no_fallback_env (docs/classification.md)")
    p.add_argument("--json", action="store_true", help="print the breakdown as JSON")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="stream pytest's own output here as it runs (default: a progress bar here, pytest's "
                        "output in a log file beside the outcome records, its path printed)")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    p.set_defaults(func=run_command)


def suite_paths(suite: str) -> list[str]:
    """pytest arguments naming a suite's tests: ``suite_args()`` of
    ``torchconform.suites.<suite>`` if it has one, else its ``TEST_PATHS``, else its folder."""
    if not suite.isidentifier():
        raise UserError(f"unknown suite {suite!r}; use one of {', '.join(known_suites())}")
    try:
        module = importlib.import_module(f"torchconform.suites.{suite}")
    except ImportError:
        raise UserError(f"unknown suite {suite!r}; use one of {', '.join(known_suites())}")
    if callable(getattr(module, "suite_args", None)):
        return [str(a) for a in module.suite_args()]
    paths = getattr(module, "TEST_PATHS", None)
    if paths:
        return [str(p) for p in paths]
    return [os.path.dirname(os.path.abspath(module.__file__))]


def _default_workers(suite: str) -> int:
    """-n when not given: the suite's ``DEFAULT_WORKERS`` (the perf suite times alone), else the CPU count."""
    module = importlib.import_module(f"torchconform.suites.{suite}")
    return getattr(module, "DEFAULT_WORKERS", None) or (os.cpu_count() or 1)


def package_root() -> str:
    """The folder holding ``suites/``: pytest's rootdir, so test ids read
    ``suites/ops/test_ops.py::...`` whatever the working directory or install mode."""
    import torchconform.suites as pkg
    return os.path.dirname(os.path.dirname(os.path.abspath(pkg.__file__)))


def _profile_label(args) -> str:
    from torchconform.skiplists.backend_setup import profile_label

    return profile_label(args)


def _what_runs(args) -> str:
    """The run header's account of what runs: a suite's selection, or for upstream
    (whose --selection means nothing) the files and the checkout."""
    if args.suite == "upstream":
        from torchconform.suites.upstream import FILES_ENV, SELECTION_ENV, SRC_ENV

        files = os.environ.get(FILES_ENV) or f"selection {os.environ.get(SELECTION_ENV) or 'default'}"
        if os.environ.get("TORCHCONFORM_UPSTREAM_SPEC"):
            files = f"spec {os.environ['TORCHCONFORM_UPSTREAM_SPEC']}"
        return f"upstream {files} from {os.environ.get(SRC_ENV) or '(no checkout)'}"
    return f"{args.suite}/{args.selection}"


def build_command(args, build: str, jsonl: str, db: str | None) -> list[str]:
    from torchconform.skiplists.backend_setup import resolve_backend
    from torchconform.skiplists.schema import load_skiplist

    # fail fast on a bad profile; a device without one gets probed defaults (skiplists/backend_setup.py)
    backend = resolve_backend(args, check=False)
    profile = backend.profile
    suite_args = suite_paths(args.suite)
    if "--rootdir" not in suite_args and not any(a.startswith("--rootdir=") for a in suite_args):
        suite_args += ["--rootdir", package_root()]
    cmd = [sys.executable, "-m", "pytest", *suite_args, "-p", "no:cacheprovider",
           "--tc-device", args.device, "--tc-profile", profile.path, "--tc-build", build,
           "--tc-suite", args.suite, "--tc-selection", args.selection, "--tc-jsonl", jsonl,
           "--tc-timeout", f"{args.timeout:g}", "-q", "--tb=line", "-rN", "-o", "console_output_style=count",
           "-W", "ignore::DeprecationWarning", "-o", "addopts=",
           # pytest (9) hangs its log capture on loggers that do not propagate, torch's structured
           # trace log among them: every compile would add empty DEBUG lines to each failure's report.
           "--log-disable", "torch.__trace"]
    workers = _default_workers(args.suite) if args.workers is None else args.workers
    if workers < 0:
        raise UserError(f"-n {workers} is not a worker count; use 0 (serial) or more")
    if workers:
        cmd += ["-n", str(workers), "--max-worker-restart", "1000"]
    limit = getattr(args, "memory_limit_mb", 0) or 0   # callers that build their own args may lack it
    if limit < 0 or (limit and not workers):
        raise UserError(f"--memory-limit-mb {limit} needs " + ("a size in MiB (0: no limit)" if limit < 0 else
                        "workers to replace: add -n 1 or more (a serial run is the only process)"))
    if limit:
        cmd += ["--tc-memory-limit-mb", str(limit)]
    if backend.backend_module:
        cmd += ["--tc-backend-module", backend.backend_module]
    if args.junit:
        cmd += ["--tc-junit", os.path.abspath(args.junit)]
    if db:
        cmd += ["--tc-db", db]
    if args.ops:
        cmd += ["--tc-ops", args.ops]
    if args.keyword:
        cmd += ["-k", args.keyword]
    for path in args.skiplist:
        if not os.path.isfile(path):
            raise UserError(f"--skiplist {path}: no such file; pass the path of a skiplist YAML "
                            "(e.g. skiplists/refdev/young-backend.yaml)")
        load_skiplist(path)  # a bad file is one line here, before pytest starts
        cmd += ["--tc-skiplist", os.path.abspath(path)]
    if args.skiplist_audit:
        if not args.skiplist and not os.environ.get("TORCHCONFORM_SKIPLIST"):
            raise UserError("--skiplist-audit needs a skiplist; add --skiplist PATH")
        cmd += ["--tc-skiplist-audit"]
    if args.shards > 1 or args.resume:
        # The sweep's shard plugin keeps this shard's tests, and with --resume only those
        # the build does not have yet (sweep/pytest_shard.py).
        cmd += ["-p", "torchconform.sweep.pytest_shard", "--tc-sweep-shards", str(args.shards),
                "--tc-sweep-shard", str(args.shard)]
        if args.shards > 1:
            cmd += ["--tc-shard", shard_label(args.shard, args.shards)]
        if args.resume:
            cmd += ["--tc-sweep-resume"]
    reruns = getattr(args, "trait_reruns", None)   # callers that build their own args may lack it
    if reruns is not None:
        if reruns < 0:
            raise UserError(f"--trait-reruns {reruns} is not a count; use 0 (rerun none) or more")
        cmd += ["--tc-trait-reruns", str(reruns)]
    if getattr(args, "no_fallback", False):   # callers that build their own args may lack it
        cmd += ["--tc-no-fallback", "1"]
    if args.branch:
        cmd += ["--tc-branch", args.branch]
    if args.commit:
        cmd += ["--tc-commit", args.commit]
    return cmd + list(args.pytest_args)


def _store_available() -> bool:
    try:
        return importlib.util.find_spec("torchconform.db.sink") is not None
    except ImportError:
        return False


def run_command(args) -> int:
    from torchconform.sweep.shards import check_shard

    check_shard(args.shards, args.shard)
    if args.resume and not args.build:
        raise UserError("--resume finishes an earlier build: pass its name with --build")
    if args.suite_set or args.suite == "all":
        from torchconform.cli.run_set import run_set

        return run_set(args)
    return run_suite(args)


def run_suite(args) -> int:
    from torchconform.collectors.settings import default_build_name
    from torchconform.config import db_url

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
        from torchconform.suites.distributed.launch import WORLD_SIZE_ENV

        if args.world_size < 2:
            raise UserError(f"--world-size {args.world_size} is not a world size; use 2 or more ranks")
        from torchconform.skiplists.backend_setup import resolve_backend

        ranks = resolve_backend(args, check=False).profile.distributed["ranks_per_host"]
        if ranks and args.world_size > ranks:
            raise UserError(f"--world-size {args.world_size} is more ranks than one {args.device} host runs "
                            f"({ranks}, the profile's distributed.ranks_per_host); use at most {ranks}")
        os.environ[WORLD_SIZE_ENV] = str(args.world_size)
    build = args.build or default_build_name(args.device, _profile_label(args))
    if args.jsonl:
        jsonl = os.path.abspath(args.jsonl)
        if os.path.exists(jsonl):
            raise UserError(f"{jsonl} already exists; pass another --jsonl (records of one run per file)")
    else:
        # One file per run; a second shard/run of the same build gets its own file.
        # The build name is any text (../x, /tmp/x): it only names a file in that folder.
        from torchconform.safe import safe_file_name

        from torchconform.cli.run_claim import claim_records

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
    from torchconform.skiplists.backend_setup import resolve_backend

    # The device comes up in a child before pytest starts: a backend that cannot load is one
    # line here, and no build is made in the store for it.
    backend = resolve_backend(args)
    env = dict(os.environ, **backend.env)
    if args.shards > 1:
        # Every shard tells the store the build has N of them (recorded when its run starts):
        # the build is complete only when all have finished.
        env[PLAN_ENV] = json.dumps(plan_steps(env.get(PLAN_ENV)) + [{"suite": args.suite, "shards": args.shards}])
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


def resumable_build_id(store, build: str) -> int:
    try:
        return store.build_id(build)
    except UserError:
        raise UserError(f"build {build!r} is not in the store, so there is nothing to resume; "
                        "drop --resume to start it (or check --build and --db)") from None


@contextlib.contextmanager
def resuming(args, build: str, db: str | None):
    """With --resume: the sweep's hold on this suite and shard of the build (lock, then the
    interrupted runs marked ``resumed`` once a run has covered the rest).  Without: the same
    lock, so a second run of the build's tests at once is refused (cli/run_claim.py)."""
    if not args.resume:
        from torchconform.cli.run_claim import holding_build

        with holding_build(db, build, args.suite, args.shard, args.shards):
            yield
        return
    from torchconform.db.store import open_store
    from torchconform.sweep.pytest_driver import holding_shard

    store = open_store(db, create=False)
    try:
        resumable_build_id(store, build)
        with holding_shard(store, build, args.suite, args.shard, args.shards):
            yield
    finally:
        store.close()


def log_path_for(jsonl: str) -> str:
    """Where a run's pytest output goes: beside its outcome records, named like them."""
    return (jsonl[:-len(".jsonl")] if jsonl.endswith(".jsonl") else jsonl) + ".log"


# pytest's report sections (``==== ERRORS ====``) and, under -q, its closing counts line.
_SECTION = re.compile(r"^[=_-]{3,} (.+?) [=_-]{3,}$")
_STATS = re.compile(r"^(no tests ran|\d+ [a-z]+\b.*) in \d+(\.\d+)?s\b")


class _Shown:
    """The lines of pytest's output a quiet run shows all the same: torchconform's own report
    sections (``torchconform skiplist: proposed removals``) and lines addressed to the user."""

    def __init__(self):
        self.ours = False

    def __call__(self, line: str) -> bool:
        section = _SECTION.match(line)
        if section or _STATS.match(line):
            self.ours = bool(section) and section.group(1).startswith("torchconform")
            return self.ours
        return self.ours or line.startswith("torchconform: ")


class _Follow(threading.Thread):
    """Reads the run's JSON lines as the plugin appends them (collectors/sink_jsonl.py) and
    tells ``progress`` the planned count and each outcome."""

    def __init__(self, path: str, progress):
        super().__init__(name="torchconform-progress", daemon=True)
        self.path, self.progress = path, progress
        self.stopped = threading.Event()

    def run(self):
        fh, rest = None, ""
        try:
            while not self.stopped.wait(0.5):
                if fh is None:
                    if not os.path.exists(self.path):
                        continue
                    fh = open(self.path, encoding="utf-8", errors="replace")
                *lines, rest = (rest + fh.read()).split("\n")
                names = []
                for line in lines:
                    with contextlib.suppress(ValueError, KeyError, TypeError):   # a line cut short
                        rec = json.loads(line)
                        if rec.get("type", "outcome") == "outcome":
                            names.append(rec["outcome"])
                        elif rec.get("type") == "run_planned":
                            self.progress.set_total(int(rec["run"]["planned"]))
                if names:
                    self.progress.add(names)
        finally:
            if fh is not None:
                fh.close()

    def stop(self):
        self.stopped.set()
        self.join()


def _run_pytest(args, cmd, env, build, jsonl, db) -> int:
    from torchconform.core.breakdown import breakdown, format_breakdown
    from torchconform.collectors.sink_jsonl import read_jsonl
    from torchconform.config import mask_password
    from torchconform.sweep.progress import Progress, class_counts

    verbose = getattr(args, "verbose", False)   # callers that build their own args may lack it
    log_path = log_path_for(jsonl)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    print(f"torchconform: pytest's own output: {log_path}" + ("" if verbose else " (-v shows it here too)"),
          file=sys.stderr)
    progress = None if verbose else Progress(None, stream=sys.stderr, interval=60.0, unit="tests",
                                             describe=class_counts)
    follow = None if progress is None else _Follow(jsonl, progress)
    from torchconform.cli import run_finish
    from torchconform.leftovers import become_subreaper, end_leftovers

    # Orphans of the tests become our children: ended and named once pytest has ended (torchconform/leftovers.py).
    become_subreaper()
    inflight = run_finish.inflight_path(jsonl)   # the test a serial run is in (collectors/inflight.py)
    env = dict(env, **{run_finish.INFLIGHT_ENV: inflight})
    proc = subprocess.Popen(cmd + run_finish.RUN_PLUGINS, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1, errors="replace", preexec_fn=die_with_parent)
    # SIGTERM (a CI cancel) and Ctrl-C reach pytest, which ends its run in order; this
    # process keeps reading its output until it has, then reports the run as interrupted.
    try:
        with run_finish.SafeLog(log_path) as log, forward_signals(proc) as forwarded:
            if follow is not None:
                follow.start()
            pumped = run_finish.pump(proc, log, echo=(lambda line: True) if verbose else _Shown(), on_exit=end_leftovers)
            usage_error = pumped.usage_error
            rc = proc.wait()
            run_finish.name_leftovers(pumped.leftovers, log)
    except BaseException:
        if progress is not None:
            progress.close(final=False)   # a terminal gets its cursor back
        raise
    finally:
        if follow is not None:
            follow.stop()
    run, outcomes = read_jsonl(jsonl) if os.path.exists(jsonl) else ({}, [])
    # Finished only when pytest says so, its run's end was recorded and no sink failed (cli/run_finish.py).
    early = not run_finish.finished(rc, run, pumped)
    crash = None
    if early and forwarded.signal is None:   # a serial run's test that ended the process is a crash
        crash = run_finish.crash_of_test_in_flight(inflight, rc, outcomes, run, args.device, args.suite)
    with contextlib.suppress(OSError):
        os.unlink(inflight)
    if crash is not None:
        outcomes.append(crash)
    if progress is not None:
        # The display ends on the very records the breakdown below counts.
        if run.get("planned") is not None:
            progress.set_total(int(run["planned"]))
        progress.sync(o.outcome for o in outcomes)
        progress.close(final=bool(outcomes) and not usage_error)
    if usage_error:
        from torchconform.skiplists.backend_setup import cli_wording

        raise UserError(cli_wording(usage_error))
    if not verbose and early and forwarded.signal is None and crash is None and pumped.stop_reason is None:
        _print_log_tail(log_path, rc)   # a cause we cannot name: the end of pytest's output tells it
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
        notes.append(_record_unfinished(db, build, proc.pid, rc, args, run, outcomes, crash, pumped.stop_reason))
    notes.append(log.error)
    result = breakdown(build, outcomes)
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


LOG_TAIL_LINES = 15


def _print_log_tail(log_path: str, rc: int) -> None:
    """pytest ended without finishing its run: the end of its output, which a quiet run kept in the log."""
    from torchconform.procs import describe_exit

    with open(log_path, encoding="utf-8", errors="replace") as fh:
        tail = collections.deque(fh, maxlen=LOG_TAIL_LINES)
    print(f"torchconform: pytest ended early ({describe_exit(rc)}); the end of its output ({log_path}):",
          file=sys.stderr)
    sys.stderr.writelines("  " + line for line in tail)


def _record_unfinished(db, build, pid, rc, args, run, outcomes, crash=None, stop_reason=None) -> str | None:
    """pytest ended without finishing its run (interrupted, killed, crashed): the stored
    run must say so even when pytest could not (SIGKILL, abort), with the test that ended
    a serial run's process as ``crash``, and a JUnit file asked for holds what was
    recorded.  Returns what could not be done, as a clause of the INCOMPLETE line."""
    said = None
    if db:
        from torchconform.cli.run_finish import store_end

        error = store_end(db, build, pid, rc, crash)
        if error:
            # After a store failure the cause is said already; the run reads as lost once pytest is gone.
            said = "the store could not mark the run interrupted" + ("" if stop_reason else f" ({error})") + \
                " and shows it lost"
    if args.junit and outcomes and run.get("exitstatus") is None:
        from torchconform.db.junit.write import write_junit

        try:
            write_junit(os.path.abspath(args.junit), run, outcomes)
        except OSError as exc:
            said = (said + "; " if said else "") + f"cannot write {args.junit}: {exc.strerror or exc}"
    return said
