"""The child pytest process of ``torchconform run``: its command line (``build_command``: the
suite's test paths, the plugin's ``--tc-*`` options, workers, skiplists, shards), starting it
and following its output to the end (``run_child``), and what of that output a quiet run
shows (``_Shown``; the rest goes to the log beside the outcome records, ``log_path_for``).

pytest runs in a child because a PrivateUse1 backend can be registered only once per
process and a crashing run must not take the CLI down with it.  How its end is judged
(finished, interrupted, crashed) is cli/run_finish.py.
"""
from __future__ import annotations

import collections
import importlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass

from torchconform import settings as tc_settings
from torchconform import suites as suites_package
from torchconform.db.runstate import shard_label
from torchconform.errors import UserError
from torchconform.leftovers import become_subreaper, end_leftovers
from torchconform.procs import describe_exit, die_with_parent, forward_signals
from torchconform.skiplists.backend_setup import resolve_backend
from torchconform.suites import known_suites

LOG_TAIL_LINES = 15
# Seconds a serial pytest has, after a forwarded SIGTERM or SIGINT, to begin ending its run
# before it is killed: its handler turns the signal into an interrupt within milliseconds,
# unless a test ignores the signal, swallows the interrupt or sits in a long C call; waiting
# the whole grace (procs.GRACE_SECONDS) for those broke the ~2 s stop docs/reliability.md
# promises.  Once pytest has begun ending (collectors/inflight.py says so) the grace holds.
ESCALATE_SECONDS = 2.0


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
    return os.path.dirname(os.path.dirname(os.path.abspath(suites_package.__file__)))


def build_command(args, build: str, jsonl: str, db: str | None) -> list[str]:
    # The skiplist schema brings yaml: imported here, when a run starts, for the CLI's start-up time.
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
        if not args.skiplist and not tc_settings.given("TORCHCONFORM_SKIPLIST"):
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


@dataclass
class Child:
    """How the child pytest ended: its pid and exit status, what its output said (``pumped``,
    cli/run_finish.py), the signal forwarded to it if any, its log and in-flight file."""
    pid: int
    rc: int
    pumped: object
    forwarded: object
    log: object
    inflight: str


def run_child(cmd: list[str], env: dict, jsonl: str, log_path: str, verbose: bool, progress=None) -> Child:
    """Start pytest (``cmd``) and follow it to its end: its output to ``log_path`` (and here:
    all of it with ``verbose``, else what ``_Shown`` keeps), ``progress`` (cli/run_progress.py)
    read from ``jsonl`` meanwhile, leftover processes ended and named once it has ended."""
    # run_finish brings pytest (collectors/recording.py): imported when a run starts, for start-up time.
    from torchconform.cli import run_finish
    from torchconform.collectors.inflight import ending

    # Orphans of the tests become our children: ended and named once pytest has ended (torchconform/leftovers.py).
    become_subreaper()
    inflight = run_finish.inflight_path(jsonl)   # the test a serial run is in (collectors/inflight.py)
    env = dict(env, **{run_finish.INFLIGHT_ENV: inflight})
    proc = subprocess.Popen(cmd + run_finish.RUN_PLUGINS, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1, errors="replace", preexec_fn=die_with_parent)
    # SIGTERM (a CI cancel) and Ctrl-C reach pytest, which ends its run in order; this
    # process keeps reading its output until it has, then reports the run as interrupted.
    # A serial pytest that has not begun ending ESCALATE_SECONDS later is killed (its test
    # in flight is then recorded here as interrupted: cli/cmd_run.py).
    try:
        with run_finish.SafeLog(log_path) as log, forward_signals(
                proc, escalate=ESCALATE_SECONDS, ending=lambda: ending(inflight)) as forwarded:
            if progress is not None:
                progress.start()
            pumped = run_finish.pump(proc, log, echo=(lambda line: True) if verbose else _Shown(), on_exit=end_leftovers)
            rc = proc.wait()
            run_finish.name_leftovers(pumped.leftovers, log)
    except BaseException:
        if progress is not None:
            progress.abandon()   # a terminal gets its cursor back
        raise
    finally:
        if progress is not None:
            progress.stop()
    return Child(proc.pid, rc, pumped, forwarded, log, inflight)


def print_log_tail(log_path: str, rc: int) -> None:
    """pytest ended without finishing its run: the end of its output, which a quiet run kept in the log."""
    with open(log_path, encoding="utf-8", errors="replace") as fh:
        tail = collections.deque(fh, maxlen=LOG_TAIL_LINES)
    print(f"torchconform: pytest ended early ({describe_exit(rc)}); the end of its output ({log_path}):",
          file=sys.stderr)
    sys.stderr.writelines("  " + line for line in tail)
