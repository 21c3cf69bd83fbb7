"""torchconform's pytest plugin (entry point ``pytest11``): options and hook wiring.

Completely inert unless ``--tc-device`` (or ``TORCHCONFORM_DEVICE`` or the
``tc_device`` ini key) is given: it then sets the device up before any test
module is imported, classifies every test on the process that runs it
(:mod:`.worker`), assembles ``Outcome`` records on the controller
(:mod:`.controller`) and hands them to the sinks through :mod:`.hooks`.

Its parts are imported inside the hooks, when a run is a torchconform run: the plugin is
registered in every pytest process of the environment, whose start-up it must not slow
(importing them at the top: 0.8 s instead of 0.3 s).
"""
from __future__ import annotations

import os

import pytest

from torchconform.collectors.session import (
    OPTIONS, PENDING_SETUP_KEY, SETTINGS_KEY, device_ready, distributes, enabled, is_xdist_controller, is_xdist_worker,
    option,
)

# Skiplists apply in every run that loads this plugin (``--tc-skiplist``); the
# skiplist plugin is itself inert without a skiplist.
pytest_plugins = ["torchconform.collectors.skiplist_plugin"]


def pytest_addhooks(pluginmanager):
    # a torchconform run's part, loaded here and not at the top (see the module docstring)
    from torchconform.collectors import hooks
    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser):
    group = parser.getgroup("torchconform", "torchconform conformance runner")
    for dest, (flag, env, help_text) in OPTIONS.items():
        group.addoption(flag, dest=dest, default=None, help=f"{help_text} [env {env}, ini {dest}]")
        parser.addini(dest, help=help_text, default=None)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    ns = early_config.known_args_namespace
    if not enabled(early_config, ns):
        return
    # (a torchconform run's part: see the module docstring)
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
        if distributes(ns):
            early_config.stash[PENDING_SETUP_KEY] = BackgroundSetup(settings.device, settings.profile,
                                                                    settings.backend_module)
        else:
            setup_device(settings.device, settings.profile, settings.backend_module)
    except UserError as exc:
        raise pytest.UsageError(f"torchconform: {exc}") from None
    early_config.stash[SETTINGS_KEY] = settings


def _export_samples_on(config, ns) -> None:
    """``--tc-samples-on`` for the ops suite, which reads it from the environment."""
    # (a torchconform run's part: see the module docstring)
    from torchconform.errors import UserError

    where = option(config, "tc_samples_on", ns)
    if where is None:
        return
    if where not in ("device", "cpu"):
        raise UserError(f"--tc-samples-on {where!r} is not a place to make samples; use device (the default) or cpu")
    os.environ["TORCHCONFORM_SAMPLES_ON"] = where


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    # The session has started, so xdist has started its workers: the controller's
    # device check ran alongside their start-up.  Checked before any result counts.
    device_ready(session.config)


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None:
        if not enabled(config):
            return
        # Options came from somewhere the early hook could not see (rare): set up now.
        pytest_load_initial_conftests(config, None, [])
        settings = config.stash[SETTINGS_KEY]
    # (a torchconform run's part: see the module docstring)
    from torchconform.collectors.worker import WorkerPlugin

    config.pluginmanager.register(WorkerPlugin(config, settings), "torchconform-worker")
    # (a torchconform run's part: see the module docstring)
    from torchconform.collectors.not_run import NotRunTally

    # what the selection left out, per reason (collectors/not_run.py): counted where tests are collected
    config.pluginmanager.register(NotRunTally(config), "torchconform-not-run")
    if is_xdist_worker(config):
        # (a torchconform run's part: see the module docstring)
        from torchconform.collectors.forkserver import register_on_worker

        register_on_worker(config, settings, option(config, "tc_fork_server"), option(config, "tc_memory_limit_mb"))
    # xdist gives its workers' configs ``workerinput``; the environment variable is
    # inherited by any pytest started inside a worker, which must still record.
    if not is_xdist_worker(config):
        # (a torchconform run's part: see the module docstring)
        from torchconform.collectors.controller import ControllerPlugin
        from torchconform.collectors.recording import RecordingGuard

        config.pluginmanager.register(ControllerPlugin(config, settings), "torchconform-controller")
        if is_xdist_controller(config):
            # (a torchconform run's part: see the module docstring)
            from torchconform.collectors.xdist_guard import XdistGuard

            # pytest-xdist's assert not crashitem never ends the run (collectors/xdist_guard.py)
            config.pluginmanager.register(XdistGuard(config), "torchconform-xdist-guard")
            # (a torchconform run's part: see the module docstring)
            from torchconform.collectors.lean_reports import LeanReports

            config.pluginmanager.register(LeanReports(config), "torchconform-lean-reports")
        # A sink that cannot write (disk full, store failure) stops the run in order (collectors/recording.py).
        config.pluginmanager.register(RecordingGuard(config), "torchconform-recording")
