"""pytest plugin used by ``torchconform sweep --suite ops|upstream``: keep one shard.

Loaded with ``-p torchconform.sweep.pytest_shard``.  Collected node ids are
split by ``sweep/shards.py`` (balanced by earlier builds' durations when a
store is given) and the other shards' items are deselected; with
``--tc-sweep-resume`` items the build already has a result for are deselected too
(not those an interrupted run left as "run interrupted before the test finished").

Under xdist every worker must deselect the same items: xdist schedules by index into
one collection, and a worker that collects a different list (a replacement started
after a crash, reading a store that has grown since) ends the run with an internal
error.  So the store is read once, by the controller, and its workers -- replacements
too -- get that snapshot through a file named in their ``workerinput``.
"""
from __future__ import annotations

import json
import os
import tempfile

import pytest
from torchconform.config import db_url
from torchconform.db.opening import open_store
from torchconform.sweep import history, shards

_SNAPSHOT = "tc_sweep_snapshot"
_SNAPSHOT_KEY = pytest.StashKey()
_PATH_KEY = pytest.StashKey()


def pytest_addoption(parser):
    group = parser.getgroup("torchconform-sweep")
    group.addoption("--tc-sweep-shards", type=int, default=1, help="number of shards")
    group.addoption("--tc-sweep-shard", type=int, default=0, help="this shard (0-based)")
    group.addoption("--tc-sweep-resume", action="store_true", default=False,
                    help="deselect tests the build (--tc-build) already has in the store (--tc-db)")


def _store_facts(config, suite_hint: str):
    db = config.getoption("tc_db", None)
    build = config.getoption("tc_build", None)
    if not db:
        return {}, set()

    store = open_store(db_url(db))
    try:
        durations = history.earlier_durations(store, suite_hint, exclude_build=build or "",
                                              device=config.getoption("tc_device", None) or None)
        done = history.done_test_ids(store, build, suite_hint) if build else set()
        return durations, done
    finally:
        store.close()


def _wanted(config) -> bool:
    return config.getoption("tc_sweep_shards") > 1 or config.getoption("tc_sweep_resume")


def _snapshot(config) -> tuple[dict, set]:
    """(durations, done) read once per process; a worker reads its controller's file."""
    if _SNAPSHOT_KEY in config.stash:
        return config.stash[_SNAPSHOT_KEY]
    path = getattr(config, "workerinput", {}).get(_SNAPSHOT)
    if path:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        facts = (data["durations"], set(data["done"]))
    else:
        suite = config.getoption("tc_suite", None) or ""
        facts = _store_facts(config, suite) if suite else ({}, set())
    config.stash[_SNAPSHOT_KEY] = facts
    return facts


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller, for each worker it starts: the one snapshot, written once."""
    config = node.config
    if not _wanted(config):
        return
    path = config.stash.get(_PATH_KEY, None)
    if path is None:
        durations, done = _snapshot(config)
        fd, path = tempfile.mkstemp(prefix="torchconform-sweep-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"durations": durations, "done": sorted(done)}, fh)
        config.stash[_PATH_KEY] = path
    node.workerinput[_SNAPSHOT] = path


def pytest_unconfigure(config):
    path = config.stash.get(_PATH_KEY, None)
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:  # removed by hand: nothing left to clean
            return


def pytest_collection_modifyitems(session, config, items):
    n, i = config.getoption("tc_sweep_shards"), config.getoption("tc_sweep_shard")
    resume = config.getoption("tc_sweep_resume")
    if not _wanted(config):
        return
    durations, done = _snapshot(config)
    keep = set(shards.select([it.nodeid for it in items], n, i, durations)) if n > 1 else {it.nodeid for it in items}
    if resume:
        keep -= done
    selected = [it for it in items if it.nodeid in keep]
    deselected = [it for it in items if it.nodeid not in keep]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
