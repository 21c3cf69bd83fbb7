"""pytest side of skiplists: ``skip`` entries at collection, ``xfail`` entries at run time.

Inert unless ``--tc-skiplist PATH`` (repeatable) or ``$TORCHCONFORM_SKIPLIST``
(``os.pathsep``-separated) names files.  Load it with ``-p torchconform.collectors.skiplist_plugin``
or from another plugin with ``pytest_plugins = ["torchconform.collectors.skiplist_plugin"]``.

Two ways in, one matcher:

* with the torchconform runner active (``--tc-device``), the runner asks for the
  matcher through its seam ``pytest_torchconform_skiplist(config, profile)`` and
  marks the items itself (collectors/worker.py), recording the entry as the
  outcome's ``skiplist_entry``;
* in a plain pytest run, :class:`SkiplistMatcher` marks the items.

Either way a ``skip`` entry becomes a skip whose reason starts with
``torchconform skiplist: <file>::<id>`` (the classifier's ``skip_backend/skiplist``),
and an ``xfail`` entry a non-strict xfail (failure: ``xfail``; pass: ``xpass``, a
stale expectation that ``propose --prune`` turns into a removal).

``--tc-skiplist-audit`` runs ``skip`` entries as ``xfail`` (except ``crashes_device``),
so that one build shows which skips have become stale.
"""
from __future__ import annotations

import os

import pytest

from torchconform import settings as tc_settings
from torchconform.collectors.session import enabled
from torchconform.skiplists.entries import first_match, info_from_item, info_from_record, ref_from_message
from torchconform.errors import UserError
from torchconform.skiplists.schema import load_entries

ENV_PATHS = "TORCHCONFORM_SKIPLIST"
ENV_AUDIT = "TORCHCONFORM_SKIPLIST_AUDIT"
PROPERTY = "tc.skiplist_entry"
_MATCHER_KEY = pytest.StashKey[object]()


def pytest_addoption(parser):
    group = parser.getgroup("torchconform-skiplist", "torchconform skiplists")
    group.addoption("--tc-skiplist", action="append", default=[], metavar="PATH",
                    help="skiplist YAML file to apply (repeatable; also $TORCHCONFORM_SKIPLIST)")
    group.addoption("--tc-skiplist-audit", action="store_true", default=False,
                    help="run skip entries as xfail to find stale ones (crashes_device entries stay skipped)")


def skiplist_paths(config) -> list[str]:
    paths = list(config.getoption("tc_skiplist", None) or [])
    env = tc_settings.given(ENV_PATHS) or ""
    return paths + [p for p in env.split(os.pathsep) if p and p not in paths]


def pytest_configure(config):
    paths = skiplist_paths(config)
    if not paths:
        return

    try:
        # a torch-neuronx spec (.json) names its tests for the device under test
        entries = load_entries(paths, config.getoption("tc_device", None) or None)
    except UserError as exc:
        # A usage error, not a test failure: one line, exit 2, nothing run.
        raise pytest.UsageError(f"torchconform: error: {exc}") from None
    audit = bool(config.getoption("tc_skiplist_audit", False)) or tc_settings.is_on(ENV_AUDIT)
    matcher = SkiplistMatcher(entries, audit=audit, mark_items=not _runner_enabled(config))
    config.stash[_MATCHER_KEY] = matcher
    config.pluginmanager.register(matcher, "torchconform-skiplist-matcher")


def _runner_enabled(config) -> bool:
    return enabled(config)


@pytest.hookimpl(trylast=True)
def pytest_torchconform_skiplist(config, profile):
    """The runner's seam (collectors/hooks.py): the matcher for its collection pass."""
    return config.stash.get(_MATCHER_KEY, None)


def run_mode(entry, audit: bool) -> str:
    """``xfail`` entries run; in audit mode ``skip`` entries run too, unless they crash the device."""
    if entry.mode == "xfail" or (audit and entry.category != "crashes_device"):
        return "xfail"
    return "skip"


class RunnerEntry:
    """What the runner's seam needs of an entry: ``id`` (stored as skiplist_entry), mode, reason."""

    def __init__(self, entry, mode: str):
        self.entry = entry
        self.id = entry.ref
        self.mode = mode
        self.reason = f"{entry.reason} ({entry.issue})"
        self.category = entry.category


class SkiplistMatcher:
    """Finds the entry for each collected test; marks items itself in plain pytest runs."""

    def __init__(self, entries, audit: bool = False, mark_items: bool = True, today=None, torch_version=None):
        self.entries = list(entries)
        self.audit = audit
        self.mark_items = mark_items
        self.today, self.torch_version = today, torch_version
        # Entry refs applied through PyTorch's own op_overrides (suites/upstream):
        # marking those items too would pre-empt PyTorch's mechanism.
        self.delegated: set[str] = set()
        self._items: dict = {}
        self.applied: dict[str, int] = {}
        self.stale: dict[str, list[str]] = {}

    def entry_for(self, info):
        entry = first_match(self.entries, info, self.today, self.torch_version)
        if entry is None or entry.ref in self.delegated:
            return None
        return entry

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items):
        # Read op/variant/dtype/kind from the live items before the runner asks:
        # the item knows more than the info dict the runner passes to match().
        self._items = {item.nodeid: info_from_item(item) for item in items}
        if not self.mark_items:
            return
        for item in items:
            entry = self.entry_for(self._items[item.nodeid])
            if entry is None:
                continue
            item.user_properties.append((PROPERTY, entry.ref))
            self.applied[entry.ref] = self.applied.get(entry.ref, 0) + 1
            if run_mode(entry, self.audit) == "xfail":
                item.add_marker(pytest.mark.xfail(reason=entry.skip_reason(), strict=False))
            else:
                item.add_marker(pytest.mark.skip(reason=entry.skip_reason()))

    def match(self, info: dict):
        """The runner's seam: ``info`` is collectors.testinfo.item_info plus test_id."""
        ti = self._items.get(info.get("test_id", ""))
        if ti is None:
            ti = info_from_record(info.get("test_id", ""), info.get("cls", ""), info.get("name", ""),
                                  info.get("op", ""), info.get("variant", ""), info.get("dtype", ""))
        entry = self.entry_for(ti)
        if entry is None:
            return None
        self.applied[entry.ref] = self.applied.get(entry.ref, 0) + 1
        return RunnerEntry(entry, run_mode(entry, self.audit))

    def pytest_runtest_logreport(self, report):
        # An xfail entry whose test passed is a stale expectation: remember it for
        # the summary, which proposes the removal.  Runs where reports arrive
        # (the controller under xdist).
        if report.when == "call" and report.passed and getattr(report, "wasxfail", None) is not None:
            ref = ref_from_message(report.wasxfail)
            if ref:
                self.stale.setdefault(ref, []).append(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter):
        if not self.stale:
            return
        tr = terminalreporter
        tr.section("torchconform skiplist: proposed removals")
        for ref, nodeids in sorted(self.stale.items()):
            tr.write_line(f"{ref}: its test passed ({len(nodeids)} xpass, e.g. {nodeids[0]}); remove the entry")
        tr.write_line("(torchconform skiplist propose --build NAME --prune lists them from a stored build)")

    def pytest_report_header(self, config):
        mode = " (audit: skip entries run as xfail)" if self.audit else ""
        return f"torchconform skiplist: {len(self.entries)} entries{mode}"


def entry_ref_of(report) -> str:
    """The entry reference a plain-pytest report carries, or ""."""
    for name, value in getattr(report, "user_properties", ()) or ():
        if name == PROPERTY:
            return str(value)
    return ""
