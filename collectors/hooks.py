"""Hooks the torchconform plugin offers (registered with ``pluginmanager.add_hookspecs``).

All but the skiplist hook are called on the controller process only (the process that owns the
terminal; under xdist, not on workers).  Sinks (JSON lines, JUnit XML, the
store) are plugins implementing them.  ``pytest_torchconform_skiplist`` is the
exception: it is asked wherever tests are collected (workers).
"""
import pytest


def pytest_torchconform_run_start(config, run):
    """A run begins.  ``run`` is a dict: build, suite, selection, device, profile,
    command_line, host, start_time (UTC ISO 8601), shard, torch_version, torch_git,
    branch, commit (empty when unknown)."""


def pytest_torchconform_outcomes(config, outcomes):
    """A batch of finished :class:`torchconform.core.outcome.Outcome` records.

    Batches are flushed every ~200 outcomes or few seconds and at the end, so a
    run killed half way keeps everything that finished before the last flush.
    """


def pytest_torchconform_planned(config, run, planned):
    """Collection is done: the run sets out to run ``planned`` tests (``run["planned"]``
    holds it too), so a reader of an interrupted run can say how far it got."""


def pytest_torchconform_run_end(config, run, exitstatus):
    """The run ended (normally or by interruption); ``run`` gains end_time and counts."""


@pytest.hookspec(firstresult=True)
def pytest_torchconform_skiplist(config, profile):
    """Return the skiplist to apply (or None).  firstresult.

    The object needs one method, ``match(info) -> entry | None``, where ``info``
    is the dict of :func:`torchconform.collectors.testinfo.item_info` plus
    ``test_id``; an entry has ``id``, ``mode`` (``skip`` or ``xfail``) and
    ``reason``.  ``skip`` entries are applied at collection, ``xfail`` entries at
    run time; both carry the entry id into the outcome's ``skiplist_entry``.
    """

