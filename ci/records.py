"""A build's outcome records as the gate reads them: per test, what it says.

The gate compares two builds of about 154,000 tests each, where nearly every test
says the same as in the baseline.  ``Records`` keeps, per test id, the index of its
*value* (outcome, kind, missing operator, fallback operators, skiplist entry, device,
message: ``Value``), so that rules reason once per distinct value and per pair of
values, and builds a test's full record (a dict with every Outcome field) only for
the tests a finding names, a batch at a time.

It is a read-only ``Mapping`` {test_id: record dict}: ``records[tid]`` and
``records.items()`` work as on the plain dicts the rules' tests pass in
(``from_dicts``), just slower than the grouped views the rules use.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Callable, Iterable, Iterator, NamedTuple


class Value(NamedTuple):
    """What a result says (the store's result_values without the repro command)."""
    outcome: str
    kind: str
    missing_op: str
    fallback_ops: tuple
    skiplist_entry: str
    device: str
    message: str


def value_of(rec: dict) -> Value:
    return Value(rec["outcome"], rec.get("kind") or "", rec.get("missing_op") or "",
                 tuple(rec.get("fallback_ops") or ()), rec.get("skiplist_entry") or "", rec.get("device") or "",
                 rec.get("message") or "")


class Records(Mapping):
    """{test_id: record} of one build, grouped by what the records say.

    ``vid``: test id -> value index; ``values``: value index -> Value; ``errors``: test id ->
    (max_abs_err, max_rel_err) of the tests that recorded one; ``fetch(test_ids)`` returns
    the full records of those tests; ``suite_ids(suite)`` the build's test ids in a suite."""

    def __init__(self, vid: dict[str, int], values: dict[int, Value], errors: dict[str, tuple],
                 fetch: Callable[[list[str]], dict[str, dict]], suite_ids: Callable[[str], list[str]],
                 space: object = None):
        self.vid = vid
        self.values = values
        self.errors = errors
        self._fetch = fetch
        self._suite_ids = suite_ids
        # Records with the same ``space`` number their values alike (the store's value ids):
        # equal indexes are equal values, which spares comparing the values themselves.
        self.space = space if space is not None else object()
        self._full: dict[str, dict] = {}

    @classmethod
    def from_dicts(cls, records: dict[str, dict]) -> "Records":
        """Records over plain record dicts ({test_id: dict with Outcome's keys})."""
        index: dict[Value, int] = {}
        vid = {tid: index.setdefault(value_of(r), len(index)) for tid, r in records.items()}
        errors = {tid: (r["max_abs_err"], r.get("max_rel_err")) for tid, r in records.items()
                  if r.get("max_abs_err") is not None}
        return cls(vid, {i: v for v, i in index.items()}, errors,
                   fetch=lambda tids: {t: records[t] for t in tids},
                   suite_ids=lambda suite: [t for t, r in records.items() if r.get("suite") == suite])

    # -- the Mapping ------------------------------------------------------------------------
    def __getitem__(self, tid: str) -> dict:
        rec = self._full.get(tid)
        if rec is None:
            if tid not in self.vid:
                raise KeyError(tid)
            rec = self.load([tid])[tid]
        return rec

    def __iter__(self) -> Iterator[str]:
        return iter(self.vid)

    def __len__(self) -> int:
        return len(self.vid)

    def __contains__(self, tid) -> bool:
        return tid in self.vid

    # -- grouped views ---------------------------------------------------------------------
    def value(self, tid: str) -> Value:
        return self.values[self.vid[tid]]

    def counts(self) -> Iterator[tuple[Value, int]]:
        """(value, tests saying it) for every value of the build."""
        for v, n in Counter(self.vid.values()).items():
            yield self.values[v], n

    def where(self, keep: Callable[[Value], bool]) -> list[str]:
        """The test ids whose value passes ``keep`` (asked once per distinct value)."""
        wanted = {v for v, value in self.values.items() if keep(value)}
        if not wanted:
            return []
        return [tid for tid, v in self.vid.items() if v in wanted]

    def in_suite(self, suite: str) -> list[str]:
        return [t for t in self._suite_ids(suite) if t in self.vid]

    def load(self, tids: Iterable[str]) -> dict[str, dict]:
        """The full records of ``tids`` (a batch: one read for all that are not loaded yet)."""
        tids = list(tids)
        wanted = [t for t in dict.fromkeys(tids) if t not in self._full]
        if wanted:
            self._full.update(self._fetch(wanted))
        return {t: self._full[t] for t in tids}


def pairs(old: Records, new: Records) -> dict[tuple, list[str]]:
    """(old value index or None, new value index) -> the test ids of ``new`` with those values,
    for the tests whose value changed or that are new; unchanged tests are left out."""
    changed = defaultdict(list)
    old_get, old_values, new_values = old.vid.get, old.values, new.values
    if old.space is new.space:   # one numbering: only differing indexes can differ
        for tid, nv in new.vid.items():
            ov = old_get(tid)
            if ov != nv and (ov is None or old_values[ov] != new_values[nv]):
                changed[(ov, nv)].append(tid)
        return dict(changed)
    for tid, nv in new.vid.items():
        ov = old_get(tid)
        if ov is None or old_values[ov] != new_values[nv]:
            changed[(ov, nv)].append(tid)
    return dict(changed)


def value_counter(records: Records, key: Callable[[Value], object]) -> Counter:
    """Counter of ``key(value)`` over the records' tests (None keys left out)."""
    counts = Counter()
    for value, n in records.counts():
        k = key(value)
        if k is not None:
            counts[k] += n
    return counts
