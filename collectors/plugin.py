"""torchconform's pytest plugin (entry point ``pytest11``): options and hook wiring.

Completely inert unless ``--tc-device`` (or ``TORCHCONFORM_DEVICE`` or the
``tc_device`` ini key) is given: it then sets the device up before any test
module is imported, classifies every test on the process that runs it
(:mod:`.worker`), assembles ``Outcome`` records on the controller
(:mod:`.controller`) and hands them to the sinks through :mod:`.hooks`.
"""
from __future__ import annotations

import os

import pytest

# option dest -> (flag, env var, help)
OPTIONS = {
    "tc_device": ("--tc-device", "TORCHCONFORM_DEVICE", "device under test (refdev, neuron, cuda, cpu, any PrivateUse1 name); enables torchconform"),
    "tc_backend_module": ("--tc-backend-module", "TORCHCONFORM_BACKEND_MODULE", "module whose import registers the backend (default: the profile's)"),
    "tc_profile": ("--tc-profile", "TORCHCONFORM_PROFILE", "backend profile name or path to a profile.yaml (default: the device name)"),
    "tc_build": ("--tc-build", "TORCHCONFORM_BUILD", "build name the results belong to (default <device>-<profile>-<UTC time>)"),
    "tc_junit": ("--tc-junit", "TORCHCONFORM_JUNIT", "write JUnit XML with torchconform properties to this path"),
    "tc_jsonl": ("--tc-jsonl", "TORCHCONFORM_JSONL", "append outcome records as JSON lines to this path"),
    "tc_db": ("--tc-db", "TORCHCONFORM_DB", "stream outcomes into this results store (path or SQLAlchemy URL)"),
    "tc_timeout": ("--tc-timeout", "TORCHCONFORM_TIMEOUT", "per-test timeout in seconds (0: none); recorded as timeout"),
    "tc_suite": ("--tc-suite", "TORCHCONFORM_SUITE", "suite name recorded with each outcome (default: from the test paths)"),
    "tc_selection": ("--tc-selection", "TORCHCONFORM_SELECTION", "selection of a torchconform suite (quick, full)"),
    "tc_ops": ("--tc-ops", "TORCHCONFORM_OPS", "comma-separated OpInfo names to restrict torchconform suites to"),
    "tc_shard": ("--tc-shard", "TORCHCONFORM_SHARD", "shard label recorded with the run (e.g. 1/4)"),
    "tc_branch": ("--tc-branch", "TORCHCONFORM_BRANCH", "source branch recorded with the build (default: GitHub's or git's)"),
    "tc_commit": ("--tc-commit", "TORCHCONFORM_COMMIT", "source commit recorded with the build (default: GitHub's or git's)"),
    "tc_samples_on": ("--tc-samples-on", "TORCHCONFORM_SAMPLES_ON",
                      "where the ops suite makes its sample inputs: device (default) or cpu (copied to the device)"),
    "tc_trait_reruns": ("--tc-trait-reruns", "TORCHCONFORM_TRAIT_RERUNS",
                        "at most N failures a declared trait may explain are rerun with the trait off at the end "
                        "(default 200; 0: none; docs/classification.md)"),
    "tc_no_fallback": ("--tc-no-fallback", "TORCHCONFORM_NO_FALLBACK",
                       "1: strict mode, a test that ran an operator through the CPU fallback is a fail of kind "
                       "fallback_forbidden (and the profile's no_fallback_env is set)"),
    "tc_fork_server": ("--tc-fork-server", "TORCHCONFORM_FORK_SERVER",
                       "on|off|auto: each xdist worker collects once and runs its tests in forked children, so a "
                       "crash costs a fork (auto: on for refdev and cpu; collectors/forkserver.py)"),
    "tc_memory_limit_mb": ("--tc-memory-limit-mb", "TORCHCONFORM_MEMORY_LIMIT_MB",
                           "a test may grow its xdist worker's address space by at most N MiB; past it the test is "
                           "a crash 'ran out of memory (limit N MiB)' and the worker is replaced (0: no limit)"),
}

# Skiplists apply in every run that loads this plugin (``--tc-skiplist``); the
# skiplist plugin is itself inert without a skiplist.
pytest_plugins = ["torchconform.collectors.skiplist_plugin"]


def pytest_addhooks(pluginmanager):
    from torchconform.collectors import hooks
    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser):
    group = parser.getgroup("torchconform", "torchconform conformance runner")
    for dest, (flag, env, help_text) in OPTIONS.items():
        group.addoption(flag, dest=dest, default=None, help=f"{help_text} [env {env}, ini {dest}]")
        parser.addini(dest, help=help_text, default=None)


def option(config, dest: str, namespace=None):
    """Command line, then environment, then ini."""
    ns = namespace if namespace is not None else config.option
    value = getattr(ns, dest, None)
    if value in (None, ""):
        value = os.environ.get(OPTIONS[dest][1]) or None
    if value in (None, ""):
        try:
            value = config.getini(dest) or None
        except (ValueError, KeyError):
            value = None
    return value


def enabled(config, namespace=None) -> bool:
    return bool(option(config, "tc_device", namespace))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    ns = early_config.known_args_namespace
    if not enabled(early_config, ns):
        return
    from torchconform.collectors.settings import settings_from
    from torchconform.core.device import BackgroundSetup, setup_device
    from torchconform.errors import UserError

    try:
        settings = settings_from(early_config, ns)
        # Suites read these at import time (before instantiating tests); processes a test
        # starts (the distributed suite's ranks) load the same backend module.
        for dest, env in (("tc_ops", "TORCHCONFORM_OPS"), ("tc_selection", "TORCHCONFORM_SELECTION"),
                          ("tc_backend_module", "TORCHCONFORM_BACKEND_MODULE")):
            if getattr(settings, dest.replace("tc_", "")):
                os.environ[env] = getattr(settings, dest.replace("tc_", ""))
        _export_samples_on(early_config, ns)
        if settings.no_fallback:
            # before the backend loads (its own strict switches), and for processes tests start
            os.environ["TORCHCONFORM_NO_FALLBACK"] = "1"
            os.environ.update(settings.profile.no_fallback_env)
        os.environ["TORCHCONFORM_DEVICE"] = settings.device
        os.environ["TORCHCONFORM_PROFILE"] = settings.profile.path
        if _distributes(ns):
            early_config.stash[PENDING_SETUP_KEY] = BackgroundSetup(settings.device, settings.profile,
                                                                    settings.backend_module)
        else:
            setup_device(settings.device, settings.profile, settings.backend_module)
    except UserError as exc:
        raise pytest.UsageError(f"torchconform: {exc}") from None
    early_config.stash[SETTINGS_KEY] = settings


def _export_samples_on(config, ns) -> None:
    """``--tc-samples-on`` for the ops suite, which reads it from the environment."""
    from torchconform.errors import UserError

    where = option(config, "tc_samples_on", ns)
    if where is None:
        return
    if where not in ("device", "cpu"):
        raise UserError(f"--tc-samples-on {where!r} is not a place to make samples; use device (the default) or cpu")
    os.environ["TORCHCONFORM_SAMPLES_ON"] = where


SETTINGS_KEY = pytest.StashKey()
PENDING_SETUP_KEY = pytest.StashKey()


def _distributes(ns) -> bool:
    """This process is the controller of an xdist run: its workers run every test."""
    return not os.environ.get("PYTEST_XDIST_WORKER") and bool(getattr(ns, "numprocesses", None))


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    # The session has started, so xdist has started its workers: the controller's
    # device check ran alongside their start-up.  Checked before any result counts.
    device_ready(session.config)


def device_ready(config) -> None:
    """Wait for an xdist controller's background device check; a UsageError if it failed
    (printed like the serial path's, exit 4).  Returns at once where there is none."""
    pending = config.stash.get(PENDING_SETUP_KEY, None)
    if pending is not None:
        error = pending.wait()
        if error is not None:
            raise pytest.UsageError(f"torchconform: {error}")


def is_xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")


def is_xdist_controller(config) -> bool:
    """This process hands tests to xdist workers and runs none itself.  Its device check
    runs in a background thread (``BackgroundSetup``) until collection, so nothing else
    on it may import torch before then: two threads importing torch at once break it."""
    return not is_xdist_worker(config) and bool(getattr(config.option, "numprocesses", None))


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None:
        if not enabled(config):
            return
        # Options came from somewhere the early hook could not see (rare): set up now.
        pytest_load_initial_conftests(config, None, [])
        settings = config.stash[SETTINGS_KEY]
    from torchconform.collectors.worker import WorkerPlugin

    config.pluginmanager.register(WorkerPlugin(config, settings), "torchconform-worker")
    if is_xdist_worker(config):
        from torchconform.collectors.forkserver import register_on_worker

        register_on_worker(config, settings, option(config, "tc_fork_server"), option(config, "tc_memory_limit_mb"))
    # xdist gives its workers' configs ``workerinput``; the environment variable is
    # inherited by any pytest started inside a worker, which must still record.
    if not is_xdist_worker(config):
        from torchconform.collectors.controller import ControllerPlugin
        from torchconform.collectors.recording import RecordingGuard

        config.pluginmanager.register(ControllerPlugin(config, settings), "torchconform-controller")
        if is_xdist_controller(config):
            from torchconform.collectors.xdist_guard import XdistGuard

            # pytest-xdist's assert not crashitem never ends the run (collectors/xdist_guard.py)
            config.pluginmanager.register(XdistGuard(config), "torchconform-xdist-guard")
            from torchconform.collectors.lean_reports import LeanReports

            config.pluginmanager.register(LeanReports(config), "torchconform-lean-reports")
        # A sink that cannot write (disk full, store failure) stops the run in order (collectors/recording.py).
        config.pluginmanager.register(RecordingGuard(config), "torchconform-recording")
