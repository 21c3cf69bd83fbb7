"""A crash costs a fork, not a collection: the xdist worker as a fork server.

An xdist worker collects once and then runs no test itself: it forks a child (a
copy of the collected process, copy-on-write) that runs the tests xdist hands the
worker, one by one, and relays their events (logstart, reports, warnings) to the
worker, which sends them on to the controller as its own.  When a test kills the
child (segfault, abort, ``os._exit``, its per-test timeout, the memory limit), the
worker reports that test as ``crash`` (or ``timeout``) naming the test and how the
child ended, forks a fresh child and goes on with the next test: xdist never sees a
worker die, so its replacement path (a new worker that collects every file again,
``--max-worker-restart``, and the ``assert not crashitem`` of pytest-xdist#204 and
#1178) is never taken for a test's crash.

Used where forking a process that has the device set up is safe: refdev and cpu
(host memory).  A real device's runtime (CUDA and most PrivateUse1 drivers) cannot
be used in a child forked after it initialised, so there a worker runs its tests
itself, as xdist does (``--tc-fork-server on|off|auto``).

Two things a fork needs here, each checked:
- GNU OpenMP cannot run a parallel region in a child forked after the parent ran
  one (the child hangs): the worker runs at one intra-op thread and each child gets
  the thread count back.  Every new child first runs a small parallel reduction and
  says it is ready; a child that does not within ``READY_SECONDS`` turns the fork
  server off for that worker (a warning), which then runs its tests itself.
- ``--tc-memory-limit-mb N``: each child may grow its address space by N MiB beyond
  its size when forked (as the sweep's workers do); a test past it is a ``crash``
  "ran out of memory (limit N MiB)" naming the test, and a fresh child goes on.
"""
from __future__ import annotations

import gc
import os
import pickle
import signal
import socket
import sys
import time
import traceback
import warnings
from multiprocessing.connection import Connection

import pytest

from torchconform.core.outcome import CRASH, TIMEOUT, bound_message
from torchconform import settings as tc_settings
from torchconform.collectors.watchdog import STATE_ENV, TIMEOUT_EXIT, read_timeout_marker
from torchconform.procs import die_with_parent
from torchconform.errors import UserError
from torchconform.procs import describe_exit

# Exit statuses of a child, beside signals: a test past the memory limit, and an error
# of the child's own loop (a bug of ours: said in the crash message).
OOM_EXIT = 86            # the sweep's worker uses the same status (sweep/failures.py)
INTERNAL_EXIT = 87
READY_SECONDS = 60.0     # a new child's probe (fork + one parallel reduction) takes milliseconds
GRACE_SECONDS = 15.0     # past the per-test timeout before the worker kills a child whose watchdog could not
EXIT_SECONDS = 10.0
DEVICES = ("refdev", "cpu")
ENV = "TORCHCONFORM_FORK_SERVER"   # on | off | auto, as --tc-fork-server
# Where each recovery's cost goes, one JSON line per lost child (for bench/crash_scale.py).
RECOVERY_LOG_ENV = "TORCHCONFORM_FORK_RECOVERY_LOG"

# Words of an allocation that failed at the address-space limit, in Python and in torch.
_OOM_WORDS = ("can't allocate memory", "not enough memory", "std::bad_alloc", "cannot allocate memory")


def wanted(mode: str | None, device: str) -> bool:
    mode = (mode or tc_settings.get(ENV)).lower()
    if mode not in ("on", "off", "auto"):
        raise UserError(f"--tc-fork-server {mode!r} is not a mode; use on, off or auto")
    return mode == "on" or (mode == "auto" and device.split(":")[0] in DEVICES)


def is_out_of_memory(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, MemoryError):
            return True
        if isinstance(exc, RuntimeError) and any(w in str(exc) for w in _OOM_WORDS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def address_space() -> int:
    """This process's virtual size in bytes (what RLIMIT_AS limits)."""
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _interactor(config):
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "run_one_test") \
                and hasattr(plugin, "torun") and hasattr(plugin, "sendevent"):
            return plugin
    return None


class _OomGuard:
    """Registered in a child with a memory limit: a phase that ran out of memory ends the
    child with OOM_EXIT before its report goes anywhere (the worker reports the crash)."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if call.excinfo is not None and is_out_of_memory(call.excinfo.value):
            os._exit(OOM_EXIT)
        return report


class ForkServer:
    """Registered on an xdist worker (collectors/plugin.py); takes over the worker's
    ``run_one_test`` once xdist's loop starts."""

    def __init__(self, config, settings, memory_limit_mb: int = 0):
        self.config = config
        self.timeout = float(settings.timeout or 0)
        self.memory_limit_mb = int(memory_limit_mb or 0)
        self.state_dir = tc_settings.given(STATE_ENV)
        self.workerid = getattr(config, "workerinput", {}).get("workerid", "?")
        self.enabled = True
        self.pid = 0
        self.conn: Connection | None = None
        self.stats = {"forks": 0, "crashes": 0}
        self.session = None
        self.interactor = None
        self._lost_at = 0.0   # when the last child was found dead (monotonic), until its successor is up
        self._lost_test = ""
        # GNU OpenMP: a child of a process that ran a parallel region hangs in its own first
        # one, so this process runs at one thread and its children get the count back.
        self.threads = 0
        torch = sys.modules.get("torch")
        if torch is not None:
            self.threads = torch.get_num_threads()
            torch.set_num_threads(1)

    # -- in the worker --------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        interactor = _interactor(self.config)
        if interactor is None:   # an xdist whose worker we do not know: run as xdist does
            self._give_up("pytest-xdist's worker loop is not the one this runner knows")
            return None
        self.session, self.interactor = session, interactor
        own = interactor.run_one_test

        def run_one_test():
            if not self.enabled:
                return own()
            index = interactor.nextitem_index
            interactor.item_index = index
            interactor.nextitem_index = interactor.torun.get()
            following = interactor.nextitem_index if isinstance(interactor.nextitem_index, int) else None
            start = time.perf_counter()
            if not self._run(index, following):
                # the fork server turned itself off before this test started: run it here
                items = session.items
                self.config.hook.pytest_runtest_protocol(
                    item=items[index], nextitem=items[following] if following is not None else None)
            interactor.sendevent("runtest_protocol_complete", item_index=index,
                                 duration=time.perf_counter() - start)

        interactor.run_one_test = run_one_test
        # What the first test of each child would set up again (the device check, the
        # dispatcher observer): set up once here, so a child is ready when forked.
        worker = self.config.pluginmanager.get_plugin("torchconform-worker")
        if worker is not None and hasattr(worker, "device_check"):
            worker.device_check()
        # The collected tests (millions of objects for 150,000 tests) go to the permanent
        # generation: a child's collections never walk them, nor copy their pages to do so.
        gc.collect()
        gc.freeze()
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        self.close()

    def close(self):
        if not self.pid:
            return
        try:
            self.conn.send(("exit",))
        except OSError:
            pass
        deadline = time.monotonic() + EXIT_SECONDS
        while time.monotonic() < deadline:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                break
            time.sleep(0.02)
        else:
            self._kill()
        self._forget()

    def _give_up(self, why: str):
        self.enabled = False
        warnings.warn(f"torchconform: worker {self.workerid} runs its tests itself (no fork server): {why}")
        if self.threads:
            sys.modules["torch"].set_num_threads(self.threads)

    def _kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def _forget(self):
        if self.conn is not None:
            self.conn.close()
        self.conn, self.pid = None, 0

    def _spawn(self) -> bool:
        ours, theirs = socket.socketpair()
        sys.stdout.flush()
        sys.stderr.flush()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)   # 3.12+: fork of a process with threads
            pid = os.fork()
        if pid == 0:
            code = INTERNAL_EXIT
            try:
                ours.close()
                code = self._child(Connection(theirs.detach()))
            except MemoryError:
                code = OOM_EXIT
            except BaseException:   # noqa: BLE001 - never unwind into the worker's stack
                traceback.print_exc()
            finally:
                os._exit(code)
        theirs.close()
        self.pid, self.conn = pid, Connection(ours.detach())
        self.stats["forks"] += 1
        if self.conn.poll(READY_SECONDS):
            try:
                if self.conn.recv() == ("ready",):
                    self._recovered()
                    return True
            except (EOFError, OSError):
                pass
        self._kill()
        self._forget()
        self._give_up(f"a child forked from it did not come up within {READY_SECONDS:g} s")
        return False

    def _run(self, index: int, following: int | None, retry: bool = True) -> bool:
        """Run one test in the child (forked first when there is none); False when the
        fork server is off now and the test has not run."""
        if not self.pid and not self._spawn():
            return False
        item = self.session.items[index]
        reported: set = set()
        started = time.monotonic()
        error = ""
        began = False   # the child said it started this test (logstart)
        try:
            self.conn.send(("run", index, following))
            while True:
                if not self.conn.poll(1.0):
                    if self.timeout and time.monotonic() - started > self.timeout + GRACE_SECONDS:
                        self._kill()   # a hang its own watchdog could not end (the GIL held in C code)
                        return self._lost(item, started, reported, None, killed_for_time=True)
                    continue
                msg = self.conn.recv()
                if msg[0] == "event":
                    name, kwargs = msg[1], msg[2]
                    if name == "testreport":
                        reported.add(kwargs["data"].get("when"))
                    began = began or name == "logstart"
                    self.interactor.sendevent(name, **kwargs)
                elif msg[0] == "done":
                    self.session.shouldfail = self.session.shouldfail or msg[1]
                    self.session.shouldstop = self.session.shouldstop or msg[2]
                    return True
                elif msg[0] == "error":
                    error = msg[1]
        except (EOFError, OSError):
            pass
        _, status = os.waitpid(self.pid, 0)
        stopped = os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGTERM, signal.SIGINT)
        if not began and retry and not error and not stopped:
            # it died between tests (a thread an earlier test left behind, say): this test
            # never started, so it runs once more in a fresh child before it is blamed
            self._forget()
            return self._run(index, following, retry=False)
        return self._lost(item, started, reported, status, error=error)

    def _recovered(self):
        path = tc_settings.given(RECOVERY_LOG_ENV)
        if not (self._lost_at and path):
            return
        import json

        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"worker": self.workerid, "test": self._lost_test,
                                 "seconds": round(time.monotonic() - self._lost_at, 6)}) + "\n")
        self._lost_at = 0.0

    def _lost(self, item, started, reported, status, killed_for_time=False, error="") -> bool:
        """The child died during ``item``: its outcome, and the next test gets a new child."""
        self._forget()
        self._lost_at, self._lost_test = time.monotonic(), item.nodeid
        self.stats["crashes"] += 1
        code = None if status is None else (-os.WTERMSIG(status) if os.WIFSIGNALED(status)
                                            else os.WEXITSTATUS(status))
        if code in (-signal.SIGTERM, -signal.SIGINT):
            # the run is being stopped (a CI cancel signals the whole group): end as the
            # child did, so the controller records this test as interrupted
            os.kill(os.getpid(), -code)
        nodeid = item.nodeid
        marker = read_timeout_marker(self.state_dir, nodeid)
        seconds = time.monotonic() - started
        if killed_for_time or code == TIMEOUT_EXIT and marker:
            limit = (marker or {}).get("timeout", self.timeout)
            verdict = {"outcome": TIMEOUT, "message": f"exceeded the {limit:g} s per-test timeout; worker killed"}
        elif code == OOM_EXIT and self.memory_limit_mb:
            verdict = {"outcome": CRASH, "message": f"worker '{self.workerid}' crashed while running '{nodeid}': "
                                                    f"ran out of memory (limit {self.memory_limit_mb} MiB)"}
        else:
            how = "its runner failed" if code == INTERNAL_EXIT else describe_exit(code)
            verdict = {"outcome": CRASH, "message": bound_message(
                f"worker '{self.workerid}' crashed while running '{nodeid}': {how}" + (f"\n{error}" if error else ""))}
        worker = self.config.pluginmanager.get_plugin("torchconform-worker")
        info = getattr(worker, "_info", {}).get(nodeid)
        location = item.location
        if "teardown" not in reported:
            if "call" not in reported:
                self._report(item, "call", "failed", verdict, seconds, info)
                self._report(item, "teardown", "passed", None, 0.0, None)
            else:
                self._report(item, "teardown", "failed", verdict, seconds, info)
        self.interactor.sendevent("logfinish", nodeid=nodeid, location=location)
        return True

    def _report(self, item, when, outcome, verdict, seconds, info):
        tc = {"when": when}
        if verdict is not None:
            tc["verdict"] = verdict
        if info is not None:
            tc["info"] = info
        report = pytest.TestReport(nodeid=item.nodeid, location=item.location, keywords={},
                                   outcome=outcome, longrepr=verdict["message"] if verdict else None,
                                   when=when, duration=seconds)
        report.tc = tc
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        data.update(item_index=self.interactor.item_index, worker_id=self.interactor.workerid,
                    testrun_uid=self.interactor.testrunuid)
        self.interactor.sendevent("testreport", data=data)

    # -- in the child -----------------------------------------------------------------
    def _child(self, conn: Connection) -> int:
        die_with_parent(signal.SIGKILL)   # a worker that is killed takes its child along
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)
        interactor, session = self.interactor, self.session

        def send(msg):
            try:
                conn.send(msg)
            except pickle.PicklingError:   # an event with a value only execnet knew how to skip
                conn.send((msg[0], msg[1], {k: repr(v) for k, v in msg[2].items()}))

        interactor.sendevent = lambda name, **kwargs: send(("event", name, kwargs))
        torch = sys.modules.get("torch")
        if torch is not None and self.threads:
            torch.set_num_threads(self.threads)
            torch.ones(1 << 17).sum().item()   # a parallel region: hangs here, not in a test, if forking broke it
        if self.memory_limit_mb:
            import resource

            limit = address_space() + self.memory_limit_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
            self.config.pluginmanager.register(_OomGuard(), "torchconform-oom-guard")
        # pytest's capture files are shared with the worker and earlier children: what a
        # crashed child wrote (its faulthandler dump) must not show up as this child's output
        capman = self.config.pluginmanager.getplugin("capturemanager")
        if capman is not None and hasattr(capman, "read_global_capture"):
            try:
                capman.read_global_capture()
            except (AttributeError, ValueError, OSError):
                pass
        conn.send(("ready",))
        items = session.items
        while True:
            try:
                msg = conn.recv()
            except EOFError:
                return 0
            if msg[0] == "exit":
                return 0
            _, index, following = msg
            interactor.item_index = index
            try:
                self.config.hook.pytest_runtest_protocol(
                    item=items[index], nextitem=items[following] if following is not None else None)
            except MemoryError:
                raise
            except Exception:   # noqa: BLE001 - a hook failed: the test is lost, said as such
                conn.send(("error", traceback.format_exc(limit=8)))
                return INTERNAL_EXIT
            sys.stdout.flush()
            conn.send(("done", session.shouldfail, session.shouldstop))


def memory_limit(value) -> int:
    """``--tc-memory-limit-mb`` as a whole number of MiB (0: none); a UsageError otherwise."""
    if value in (None, ""):
        return 0
    try:
        mb = int(value)
    except (TypeError, ValueError):
        mb = -1
    if mb < 0:
        raise pytest.UsageError(f"torchconform: --tc-memory-limit-mb {value!r} is not a size; give MiB, e.g. 4096 (0: none)")
    return mb


class _InProcessLimit:
    """The memory limit of a worker that runs its tests itself (no fork server): set once
    it has collected; a test past it ends the worker with OOM_EXIT, which xdist replaces
    and the controller words as "ran out of memory (limit N MiB)"."""

    def __init__(self, mb: int):
        self.mb = mb

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        import resource

        limit = address_space() + self.mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
        session.config.pluginmanager.register(_OomGuard(), "torchconform-oom-guard")


def register_on_worker(config, settings, mode, limit) -> None:
    """On an xdist worker: the fork server where it is wanted, else the in-process memory limit."""
    try:
        on = wanted(mode, settings.device)
    except Exception as exc:   # UserError
        raise pytest.UsageError(f"torchconform: {exc}") from None
    mb = memory_limit(limit)
    if on:
        config.pluginmanager.register(ForkServer(config, settings, mb), "torchconform-fork-server")
    elif mb:
        config.pluginmanager.register(_InProcessLimit(mb), "torchconform-memory-limit")
