"""pytest plugin used by ``torchconform sweep --suite ops|upstream``: keep one shard.

Loaded with ``-p torchconform.sweep.pytest_shard``.  Collected node ids are
split by ``sweep/shards.py`` (balanced by earlier builds' durations when a
store is given) and the other shards' items are deselected; with
``--tc-sweep-resume`` items the build already has a result for are deselected too
(not those an interrupted run left as "run interrupted before the test finished").
"""
from __future__ import annotations


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
    from torchconform.config import db_url
    from torchconform.db.store import open_store
    from torchconform.sweep import history

    store = open_store(db_url(db))
    try:
        durations = history.earlier_durations(store, suite_hint, exclude_build=build or "",
                                              device=config.getoption("tc_device", None) or None)
        done = history.done_test_ids(store, build, suite_hint) if build else set()
        return durations, done
    finally:
        store.close()


def pytest_collection_modifyitems(session, config, items):
    from torchconform.sweep import shards

    n, i = config.getoption("tc_sweep_shards"), config.getoption("tc_sweep_shard")
    resume = config.getoption("tc_sweep_resume")
    if n <= 1 and not resume:
        return
    suite = config.getoption("tc_suite", None) or ""
    durations, done = _store_facts(config, suite) if (suite and (n > 1 or resume)) else ({}, set())
    keep = set(shards.select([it.nodeid for it in items], n, i, durations)) if n > 1 else {it.nodeid for it in items}
    if resume:
        keep -= done
    selected = [it for it in items if it.nodeid in keep]
    deselected = [it for it in items if it.nodeid not in keep]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
