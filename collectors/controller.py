"""The controller side: assemble one Outcome per test from its phase reports,
batch them to the sinks, announce run start and end.

Under xdist this runs in the controller process (reports arrive from workers
with ``report.tc`` attached); without xdist it runs in the same process.
"""
from __future__ import annotations

import datetime as _dt
import os
import shlex
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings

import pytest

from torchconform.core.classify import classify_text
from torchconform.core.device import torch_versions
from torchconform.core.numeric import FIELDS as NUMERIC_FIELDS, outcome_tier
from torchconform.collectors.session import PENDING_SETUP_KEY, device_ready, is_xdist_controller
from torchconform.collectors.recording import STOP_PREFIX, say
from torchconform.collectors.stopping import INTERRUPTED, _raise_interrupt, early_stop, stop_workers
from torchconform.core.outcome import (
    CRASH, ERROR, FAIL, INTERRUPTED_MESSAGE, PASS, PASS_FALLBACK, TIMEOUT, Outcome, bound_message,
)
from torchconform.collectors import strict
from torchconform.collectors.settings import default_build_name, source_revision
from torchconform.collectors.testinfo import parse_test_id
from torchconform.collectors.traitfail import declared_traits
from torchconform.collectors.traitrerun import TraitAttribution
from torchconform.collectors.watchdog import STATE_ENV, read_timeout_marker
from torchconform.collectors.forkserver import OOM_EXIT
from torchconform.procs import describe_exit
from torchconform.config import mask_password
from torchconform import settings as tc_settings
from torchconform.collectors import environment
from torchconform.collectors.repro import repro_for
from torchconform.collectors.session import option

BATCH_SIZE = 200
FLUSH_SECONDS = 2.0


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _suite_from_args(args) -> str:
    for a in args:
        norm = str(a).replace(os.sep, "/")
        if "suites/" in norm:
            return norm.split("suites/", 1)[1].split("/", 1)[0]
    return "pytest"


def combine(phases: dict, fallback_ops: list[str]) -> dict:
    """One verdict from the setup/call/teardown verdicts (each a dict or None)."""
    setup, call, teardown = phases.get("setup"), phases.get("call"), phases.get("teardown")
    for v in (setup, call, teardown):
        if v and v["outcome"] in (CRASH, TIMEOUT):
            return v
    if setup and setup["outcome"] != PASS:
        return setup
    if call:
        if call["outcome"] == PASS and teardown and teardown["outcome"] not in (PASS,):
            v = dict(teardown)
            if v["outcome"] == FAIL:
                v["outcome"] = ERROR
            return v
        if call["outcome"] == PASS and fallback_ops:
            return dict(call, outcome=PASS_FALLBACK)
        return call
    if teardown and teardown["outcome"] != PASS:
        return dict(teardown, outcome=ERROR if teardown["outcome"] == FAIL else teardown["outcome"])
    return {"outcome": ERROR, "message": "test produced no result (interrupted?)"}


class ControllerPlugin:
    def __init__(self, config, settings):
        self.config = config
        self.settings = settings
        self.profile = settings.profile
        self.device = settings.device
        self.build = settings.build or default_build_name(self.device, self._profile_label())
        self.pending: dict[str, dict] = {}
        self.buffer: list[Outcome] = []
        self.counts: dict[str, int] = {}
        self.total = 0
        self._lock = threading.RLock()
        self._last_flush = time.monotonic()
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._seen_collect_errors: set[str] = set()
        self._collected_nodes: set[str] = set()   # xdist workers that finished collecting
        self._startup_failures = 0
        self.run: dict = {}
        self.started = False   # run_start told to the sinks
        self._old_signals: dict = {}
        # xdist workers run the tests (this plugin is never registered on a worker).
        self.distributed = is_xdist_controller(config)
        # Watchdogs in workers leave timeout markers here (workers inherit the env).
        if not tc_settings.given(STATE_ENV):
            os.environ[STATE_ENV] = tempfile.mkdtemp(prefix="torchconform-")
        self.state_dir = tc_settings.get(STATE_ENV)
        self._register_sinks()
        # Failures a declared trait may explain wait here for one rerun with the trait off at
        # the end (collectors/traitrerun.py), out of the per-test path.
        self.traits = TraitAttribution(self.profile, settings.trait_reruns)

    def _profile_label(self) -> str:
        if self.device == "refdev" or self.profile.name == "refdev":
            return tc_settings.get("TORCHCONFORM_REFDEV_PROFILE")
        return self.profile.name

    def _register_sinks(self):
        pm = self.config.pluginmanager
        s = self.settings
        if s.jsonl:
            # each sink's module loads only when the run writes that sink (the store's brings sqlalchemy, JUnit's junitparser)
            from torchconform.collectors.sink_jsonl import JsonlSink
            pm.register(JsonlSink(s.jsonl), "torchconform-jsonl")
        if s.junit:
            # (loaded only for that sink, as above)
            from torchconform.db.junit.write import JunitSink
            pm.register(JunitSink(s.junit), "torchconform-junit")
        if s.db:
            try:
                # (loaded only for that sink, as above)
                from torchconform.db.sink import StoreSink
            except ImportError as exc:
                warnings.warn(f"torchconform: results store not available ({exc}); "
                              "outcomes are not stored in the database (use --tc-jsonl/--tc-junit)")
            else:
                # (loaded only for that sink, as above)
                from torchconform.config import db_url
                pm.register(StoreSink(db_url(s.db), self.config), "torchconform-store")

    # -- run start / end -----------------------------------------------------
    def _run_info(self) -> dict:
        torch_version, torch_git = torch_versions()
        args = [str(a) for a in self.config.invocation_params.args]
        branch, commit = source_revision(self.settings.branch, self.settings.commit,
                                         cwd=str(self.config.invocation_params.dir))
        return {
            "build": self.build,
            "suite": self.settings.suite or _suite_from_args(self.config.args),
            "selection": self.settings.selection or tc_settings.given("TORCHCONFORM_SELECTION") or "",
            "device": self.device,
            "profile": self._profile_label(),
            "backend_profile": self.profile.name,
            # a narrowed or strict run is a series of its own (db/series.py): empty for a whole selection
            "scope": self._scope(),
            "command_line": mask_password(" ".join(shlex.quote(a) for a in [sys.executable, "-m", "pytest", *args])),
            "host": socket.gethostname(),
            "start_time": _now(),
            "shard": self.settings.shard,
            "torch_version": torch_version,
            "torch_git": torch_git,
            "branch": branch,
            "commit": commit,
            # what the gate compares: a trait-explained failure is a regression only when the
            # trait itself changed between baseline and build (ci/gate.py)
            "declared_traits": declared_traits(self.profile.dtype_policy or {}),
            # what the backend claims (the support manifest): stored with the build, so its claims
            # report and gate never depend on a profile file that changed since (docs/profiles.md)
            "claims": self.profile.declared_claims(),
            # the environment is part of every result (the seed): stored on the build
            "environment": self._environment(),
        }

    def _scope(self) -> str:
        """What narrowed this run's selection or changed its verdicts: ``--tc-ops``, ``-k``,
        an upstream spec, strict mode."""
        parts = []
        if self.settings.ops:
            parts.append(f"ops={self.settings.ops}")
        keyword = getattr(self.config.option, "keyword", "") or ""
        if keyword:
            parts.append(f"-k {keyword}")
        spec = tc_settings.given("TORCHCONFORM_UPSTREAM_SPEC")
        if spec:
            parts.append(f"spec={os.path.basename(spec)}")
        if self.settings.no_fallback:
            parts.append("strict")
        return " ".join(parts)

    def _environment(self) -> dict:
        values, evidence = environment.measure(self.device, self.settings.backend_module or self.profile.backend_module)
        return dict(values, **evidence)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session):
        # An xdist controller's device check is still running (plugin.BackgroundSetup): the
        # run starts once it passed, or the store would get an empty build for a device that
        # never came up, counted in the site's series (pytest_collection below).
        if self.config.stash.get(PENDING_SETUP_KEY, None) is None:
            self._start_run()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session):
        if not self.started:
            device_ready(self.config)   # a UsageError when the device did not come up
            self._start_run()

    def _start_run(self):
        self.run = self._run_info()
        self.config.hook.pytest_torchconform_run_start(config=self.config, run=self.run)
        self.started = True
        # SIGTERM (a CI runner's cancel) and SIGINT become one KeyboardInterrupt, so pytest
        # ends the session in order and the sinks get every finished outcome and the run's
        # end; later signals are ignored until then (they would cut that flush short).
        self._old_signals = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._old_signals[signum] = signal.signal(signum, _raise_interrupt)
        self._flusher = threading.Thread(target=self._flush_loop, name="torchconform-flush", daemon=True)
        self._flusher.start()

    def pytest_keyboard_interrupt(self, excinfo):
        # Told to stop (called before the session finishes): xdist would give each worker
        # 10 s to finish its test; what is in flight will not be a result anyway.
        INTERRUPTED.set()
        if self.distributed:
            stop_workers(self.config)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        self._stop.set()
        if not self.started:   # the device never came up (or the run stopped before it did): nothing to end
            return
        with self._lock:
            for nodeid in list(self.pending):
                state = self.pending.pop(nodeid)
                self._finish(nodeid, state, interrupted=True)
            self.flush()   # what finished reaches the sinks before the (slow) trait rerun
            for o in self.traits.resolve(self.config, INTERRUPTED.is_set(), self.settings.timeout):
                self._append(o)
            self.flush()
            if self.traits.stats["candidates"]:
                self.run["trait_reruns"] = dict(self.traits.stats)
            early = early_stop(session, self.config, self.run.get("planned"), self.total)
            if early is not None and int(exitstatus) in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
                # -x or --maxfail left planned tests unrun: the run is interrupted (a later
                # --resume runs the rest) and the CLI says INCOMPLETE with the count
                say(self.config, STOP_PREFIX + early)
                exitstatus = pytest.ExitCode.INTERRUPTED
            self.run.update(end_time=_now(), exitstatus=int(exitstatus), total=self.total, outcomes=dict(self.counts))
            self.config.hook.pytest_torchconform_run_end(config=self.config, run=self.run, exitstatus=int(exitstatus))
        for signum, handler in self._old_signals.items():
            signal.signal(signum, handler)

    # -- how many tests the run plans ----------------------------------------------
    def _planned(self, count: int):
        if "planned" in self.run:
            return
        with self._lock:
            self.run["planned"] = int(count)
            self.config.hook.pytest_torchconform_planned(config=self.config, run=self.run, planned=int(count))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        if not self.distributed:
            self._planned(len(session.items))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        self._collected_nodes.add(node.gateway.id)
        self._planned(len(ids))  # every worker collects the same tests

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        """A worker that dies before it has collected failed to start (a device it cannot
        see, a backend that will not load): its replacement would fail the same way, and
        xdist would replace it up to --max-worker-restart times, for minutes.  The second
        such death ends the run with the worker's own last line."""
        if error is None or node.gateway.id in self._collected_nodes:
            return
        self._startup_failures += 1
        if self._startup_failures >= 2:
            lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
            why = lines[-1] if lines else "no error text"
            dsession = self.config.pluginmanager.getplugin("dsession")
            if dsession is not None and not dsession.shouldstop:
                dsession.shouldstop = f"torchconform: xdist workers fail at start-up: {why}"
                # xdist re-arms its shutdown before replacing a dead worker; only its
                # restart limit (checked right after this hook) stops the replacing.
                if hasattr(dsession, "_max_worker_restart"):
                    dsession._max_worker_restart = 0

    def pytest_runtest_logstart(self, nodeid, location):
        # A serial run's tests run in this process: a test that aborts or segfaults it
        # takes the buffer along, so everything finished is handed to the sinks before
        # the next test starts (under xdist a worker's crash leaves this process alive).
        if not self.distributed and self.buffer:
            self.flush()

    def _flush_loop(self):
        while not self._stop.wait(FLUSH_SECONDS / 2):
            if self.buffer and time.monotonic() - self._last_flush >= FLUSH_SECONDS:
                with self._lock:
                    self.flush()

    def flush(self):
        with self._lock:
            self._last_flush = time.monotonic()
            if not self.buffer:
                return
            batch, self.buffer = self.buffer, []
            self.config.hook.pytest_torchconform_outcomes(config=self.config, outcomes=batch)

    # -- assembling outcomes ---------------------------------------------------
    def pytest_runtest_logreport(self, report):
        with self._lock:
            state = self.pending.setdefault(report.nodeid, {"phases": {}, "duration": 0.0, "info": None,
                                                             "fallback_ops": []})
            state["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
            tc = getattr(report, "tc", None) or {}
            if report.when == "???":  # xdist: the worker died while running this test
                marker = read_timeout_marker(self.state_dir, report.nodeid)
                if INTERRUPTED.is_set():
                    # A cancelled run's workers die with it (a CI runner signals the whole group).
                    v = {"outcome": ERROR, "message": INTERRUPTED_MESSAGE}
                elif marker:
                    v = {"outcome": TIMEOUT, "message": f"exceeded the {marker.get('timeout')} s per-test timeout; worker killed"}
                    state["duration"] += float(marker.get("timeout") or 0)
                else:
                    v = {"outcome": CRASH, "message": bound_message(
                        f"{report.longrepr}{worker_exit(getattr(report, 'node', None), limit_mb=self._memory_limit())}")}
                state["phases"]["call"] = v
                self._finish(report.nodeid, self.pending.pop(report.nodeid))
                return
            if "info" in tc:
                state["info"] = tc["info"]
            if "fallback_ops" in tc:
                state["fallback_ops"] = tc["fallback_ops"]
            if tc.get("evidence"):
                state["evidence"] = tc["evidence"]
            if "mismatch" in tc:
                state["mismatch"] = tc["mismatch"]
            if "errors" in tc:
                state["errors"] = tc["errors"]
            if "perf" in tc:
                state["perf"] = tc["perf"]
            if "coverage" in tc:
                state["coverage"] = tc["coverage"]
            verdict = tc.get("verdict")
            if verdict is None and not tc and not report.passed:
                # A report the worker side did not classify (plugin inactive there).
                status = "skipped" if report.skipped else ("failure" if report.when == "call" else "error")
                verdict = classify_text(str(report.longrepr), self.profile, status=status).to_dict()
            elif verdict is None and not tc and report.when == "call":
                verdict = {"outcome": PASS}
            state["phases"][report.when] = verdict
            if report.when == "teardown":
                self._finish(report.nodeid, self.pending.pop(report.nodeid))

    def pytest_collectreport(self, report):
        if not report.failed or report.nodeid in self._seen_collect_errors:
            return
        with self._lock:
            self._seen_collect_errors.add(report.nodeid)
            text = str(report.longrepr)
            v = classify_text(text, self.profile, status="error")
            self._append(Outcome(
                test_id=report.nodeid or "<collection>", outcome=ERROR if v.outcome != ERROR else v.outcome,
                suite=self.run.get("suite", ""), file=report.nodeid.split("::")[0], device=self.device,
                message=f"collection error: {v.message or bound_message(text)}", repro=self._repro(report.nodeid),
            ))

    def _memory_limit(self) -> int:
        try:
            return int(option(self.config, "tc_memory_limit_mb") or 0)
        except ValueError:
            return 0

    def _node_path(self, nodeid: str, path: str = "") -> str:
        """The node id with its file as an absolute path (a rerun's argument)."""
        file, sep, rest = nodeid.partition("::")
        if path:  # the worker knows where the file really is
            return path + sep + rest
        return nodeid if os.path.isabs(file) else os.path.join(str(self.config.rootpath), nodeid)

    def _repro(self, nodeid: str, path: str = "", op: str = "") -> str:
        return repro_for(self._node_path(nodeid, path), nodeid, self.config.invocation_params.args, self.device,
                         self.profile, self.settings, op=op if self.run.get("suite") == "ops" else "")

    def _finish(self, nodeid: str, state: dict, interrupted: bool = False):
        info = state["info"] or parse_test_id(nodeid, self.device)
        if interrupted and "call" not in state["phases"]:
            verdict = {"outcome": ERROR, "message": INTERRUPTED_MESSAGE}
        else:
            verdict = combine(state["phases"], state["fallback_ops"])
            verdict = strict.apply(verdict, state["fallback_ops"], state.get("evidence", ""),
                                   self.settings.no_fallback)
        outcome = verdict["outcome"]
        o = Outcome(
            test_id=nodeid, outcome=outcome, suite=self.run.get("suite", ""),
            file=info.get("file", ""), cls=info.get("cls", ""), name=info.get("name", ""),
            op=info.get("op", ""), variant=info.get("variant", ""), dtype=info.get("dtype", ""),
            device=info.get("device") or self.device, kind=verdict.get("kind", "") or "",
            missing_op=verdict.get("missing_op", "") or "",
            fallback_ops=list(state["fallback_ops"]),  # whatever the outcome: a fallback can be why it failed
            skiplist_entry=verdict.get("skiplist_entry", "") or "",
            duration=round(state["duration"], 6), message=verdict.get("message", "") or "",
            repro=self._repro(nodeid, info.get("path", ""), info.get("op", "")),
            **dict(zip(NUMERIC_FIELDS, state.get("errors") or ())),
            tier=outcome_tier(outcome, state.get("errors")),   # docs/classification.md "Tolerance tiers"
        )
        o.perf = state.get("perf")   # the perf suite's timings (torchconform/core/perf.py)
        o.evidence = state.get("evidence", "")   # where the fallback/host_only verdicts came from
        o.coverage = state.get("coverage")   # the overloads the call reached (torchconform/core/coverage.py)
        o = self.traits.take(o, state.get("mismatch"), self._node_path(nodeid, info.get("path", "")))
        if o is not None:  # else held for the trait rerun at the end
            self._append(o)

    def _append(self, o: Outcome):
        self.buffer.append(o)
        self.total += 1
        self.counts[o.outcome] = self.counts.get(o.outcome, 0) + 1
        if len(self.buffer) >= BATCH_SIZE:
            self.flush()


def worker_exit(node, wait: float = 3.0, limit_mb: int = 0) -> str:
    """How a crashed xdist worker's process ended, as a clause for the crash message:
    ``: killed by SIGSEGV``, ``: exit status 3``; empty when the platform does not say
    (a worker on a remote gateway, or one still not gone after ``wait`` seconds)."""
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    if popen is None:
        return ""
    try:
        code = popen.wait(timeout=wait)
    except Exception:  # subprocess.TimeoutExpired, or a gateway without a real process
        return ""
    if code == OOM_EXIT and limit_mb:   # a worker without the fork server (collectors/forkserver.py)
        return f": ran out of memory (limit {limit_mb} MiB)"
    return "" if code is None else f": {describe_exit(code)}"
