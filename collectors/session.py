"""What every part of the pytest plugin asks of the session: its options (command line, then
environment, then ini), whether this process is an xdist controller or worker, and the
stash keys of the settings and of the controller's background device check.  Imported by
the plugin's hooks (plugin.py), the controller, the worker and the settings alike, so none
of them imports another to ask."""
from __future__ import annotations

import os

import pytest

from torchconform import settings as tc_settings

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


def option(config, dest: str, namespace=None):
    """Command line, then environment, then ini."""
    ns = namespace if namespace is not None else config.option
    value = getattr(ns, dest, None)
    if value in (None, ""):
        value = tc_settings.given(OPTIONS[dest][1])   # the default comes after ini
    if value in (None, ""):
        try:
            value = config.getini(dest) or None
        except (ValueError, KeyError):
            value = None
    return value


def enabled(config, namespace=None) -> bool:
    return bool(option(config, "tc_device", namespace))


SETTINGS_KEY = pytest.StashKey()
PENDING_SETUP_KEY = pytest.StashKey()


def distributes(ns) -> bool:
    """This process is the controller of an xdist run: its workers run every test."""
    return not os.environ.get("PYTEST_XDIST_WORKER") and bool(getattr(ns, "numprocesses", None))


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
