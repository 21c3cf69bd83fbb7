"""Test search and history: compact per-build data searched on the client.

For 150k tests per build one HTML page per test is out of the question; the
site instead writes one index of every test id ever seen (``data/tests.js``,
ids sorted and grouped by their shared prefix) and per build one string with a
character per test (``data/builds/<slug>.js``; see styles.OUTCOME_CODES),
aligned with the index.  A test's history is then one character from each
build's string.  The same files let the next run reuse a build unchanged
(``read_previous``) instead of reading its outcomes from the store again.

The query language (static/query.js) also filters by a test's suite, file,
operator, variant and dtype: those travel in ``data/attrs.js``, aligned with
the same index and loaded only when a query names one of them (``ATTR_COLUMNS``,
``encode_attrs``).
"""
from __future__ import annotations

import json
from collections import namedtuple
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from pathlib import Path

import numpy as np

from torchconform.collectors.outcome import (BACKEND_SKIP_KINDS, FAILED, HOST_ONLY, OUTCOMES, PASS, SKIP_BACKEND,
                                             SKIPPED, Outcome)
from torchconform.dashboard.model import BuildInfo
from torchconform.dashboard.styles import ABSENT_CODE, CODE_LABELS, outcome_code

_ABSENT = ord(ABSENT_CODE)
# The test attributes a query can name (op:, dtype:...), in data/attrs.js.
ATTR_COLUMNS = ("suite", "file", "op", "variant", "dtype")
# data/attrs.js writes a value's number (0: none) in base 64, with these digits (JSON-safe).
DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_"
_DIGIT_VALUE = np.full(256, -1, dtype=np.int64)
_DIGIT_VALUE[np.frombuffer(DIGITS.encode("ascii"), dtype=np.uint8)] = np.arange(len(DIGITS))


class Numbered(dict):
    """value -> its number in ``values``, numbered on first sight."""

    def __init__(self):
        super().__init__()
        self.values: list = []

    def __missing__(self, value):
        i = self[value] = len(self.values)
        self.values.append(value)
        return i


def digits_width(n_values: int) -> int:
    """Digits per test to write numbers 0..n_values (0 is 'none')."""
    width = 1
    while len(DIGITS) ** width < n_values + 1:
        width += 1
    return width


def encode_attrs(numbers: np.ndarray, n_values: int) -> tuple[int, str]:
    """(width, string of ``width`` base-64 digits per test) of numbers 0..n_values."""
    width = digits_width(n_values)
    base = len(DIGITS)
    table = np.frombuffer(DIGITS.encode("ascii"), dtype=np.uint8)
    numbers = np.asarray(numbers, dtype=np.int64)
    places = [table[numbers // base ** (width - 1 - k) % base] for k in range(width)]
    return width, np.stack(places, axis=1).tobytes().decode("ascii") if len(numbers) else ""


def decode_attrs(width: int, text: str) -> np.ndarray:
    """The numbers ``encode_attrs`` wrote (what static/query.js reads)."""
    digits = _DIGIT_VALUE[np.frombuffer(text.encode("ascii"), dtype=np.uint8)].reshape(-1, width)
    weights = len(DIGITS) ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return digits @ weights


def outcome_names() -> dict[str, str]:
    """Each name a query's ``outcome:`` accepts -> the search-data codes it stands for.

    A stored outcome (pass, skip_backend...) names every code it is split into (pass:
    native and host-only; skip_backend: each kind), a kind names its own code, and
    ``failed`` / ``skipped`` the groups of collectors/outcome.py."""
    names: dict[str, str] = {}

    def add(name, code):
        if code not in names.get(name, ""):
            names[name] = names.get(name, "") + code
    for o in OUTCOMES:
        if o != SKIP_BACKEND:
            add(o, outcome_code(o))
    add(PASS, outcome_code(PASS, HOST_ONLY))
    add(HOST_ONLY, outcome_code(PASS, HOST_ONLY))
    for k in BACKEND_SKIP_KINDS:
        add(SKIP_BACKEND, outcome_code(SKIP_BACKEND, k))
        add(k, outcome_code(SKIP_BACKEND, k))
    for o in sorted(FAILED):
        add("failed", outcome_code(o))
    for o in sorted(SKIPPED):
        for c in names[o]:
            add("skipped", c)
    # the chart categories not named already (missing_distributed: the distributed kinds)
    for code, (category, _) in CODE_LABELS.items():
        if category not in names:
            add(category, code)
    return names


def _prefix(test_id: str) -> int:
    """Length of the part of a test id shared with its neighbours (file and class)."""
    cut = test_id.rfind("::")
    if cut >= 0:
        return cut + 2
    return test_id.rfind("/") + 1


def split_id(test_id: str) -> tuple[str, str]:
    """(the prefix a test id shares with its neighbours, the rest)."""
    cut = _prefix(test_id)
    return test_id[:cut], test_id[cut:]


def group_parts(heads, tails) -> list[list]:
    """Sorted test ids, split by ``split_id``, as ``[[shared prefix, [rest, ...]], ...]``."""
    groups: list[list] = []
    last = None
    for head, tail in zip(heads, tails):
        if head != last:
            groups.append([head, []])
            last = head
        groups[-1][1].append(tail)
    return groups


def group_ids(ids) -> list[list]:
    """Sorted test ids as ``[[shared prefix, [rest, ...]], ...]`` (neighbours sharing a prefix)."""
    parts = list(map(split_id, ids))
    return group_parts(map(itemgetter(0), parts), map(itemgetter(1), parts))


def read_data_file(path: Path):
    """Payload of a ``TC.loaded(key, payload);`` data file (see render.Site.write_data)."""
    text = path.read_text(encoding="utf-8")
    start = text.index(",") + 1
    return json.loads(text[start:text.rindex(");")].replace("<\\/", "</"))


# The model-zoo rows a build keeps for the models page and its search data.
ModelRow = namedtuple("ModelRow", "test_id op outcome variant kind missing_op message name")


class _Codes(dict):
    """(outcome, kind) -> byte of its code, filled on first use (an unknown outcome still raises)."""
    def __missing__(self, key):
        code = self[key] = ord(outcome_code(*key))
        return code


_CODES = _Codes()


@dataclass
class EncodedBuild:
    """One build's search data, position-free so a worker process can make it:
    test ids in row order (None: same as the previous build the worker encoded),
    one code byte per row, {row index: missing operator}, model-zoo rows by test id,
    and with the ids their tests' attributes: {column: (values, each row's index among
    them, -1 for none)} (ATTR_COLUMNS)."""
    ids: list | None
    codes: bytes
    missing: dict
    models: list
    attrs: dict | None = None


def encode_build(data, previous_pk: np.ndarray | None = None) -> EncodedBuild:
    """One build's search data from a build_data.BuildData: codes by array lookup, test ids
    only when the tests differ from ``previous_pk`` (the previous build encoded here)."""
    from torchconform.dashboard.build_data import CODES

    lut = np.fromiter((_CODES[pair] for pair in CODES.pairs), dtype=np.uint8, count=len(CODES.pairs))
    codes = lut[data.code]
    rows, tests = data.rows, data.tests.values
    # the skip_backend/missing_op rows that name their operator
    missing = {k: op for k, op in zip(data.missing_at.tolist(), data.missing_ops) if op}
    same = previous_pk is not None and np.array_equal(previous_pk, data.pk)
    ids = None if same else list(map(tests["test_id"].__getitem__, data.pk.tolist()))
    # the attributes go with the ids only: a run of builds of the same tests sends them once
    attrs = None if same else {c: (data.tests.levels[c], data.tests.index[c][data.pk].astype(np.int32))
                               for c in ATTR_COLUMNS}
    models = []
    for k in data.models_rows():
        pk, outcome, kind, missing_op, _, message = rows[k][:6]
        models.append(ModelRow(tests["test_id"][pk], tests["op"][pk], outcome, tests["variant"][pk], kind,
                               missing_op, message, tests["name"][pk]))
    models.sort(key=attrgetter("test_id"))
    return EncodedBuild(ids, codes.tobytes(), missing, models, attrs)


class SearchIndex:
    def __init__(self):
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        # per build: positions in ``ids`` and the code at each (numpy arrays)
        self.builds: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.missing: dict[str, dict[int, str]] = {}
        self.models: dict[str, list] = {}
        self._previous_ids: list[str] | None = None
        self._previous_pos: np.ndarray | None = None
        self._previous_attrs: dict | None = None
        # per ATTR_COLUMNS: the distinct values seen, and each position's number among them (-1: none)
        self.attr_values = {c: Numbered() for c in ATTR_COLUMNS}
        self.attr = {c: np.full(0, -1, dtype=np.int64) for c in ATTR_COLUMNS}

    def _set_attrs(self, pos: np.ndarray, columns: dict) -> None:
        """Record the attributes of the tests at ``pos``: {column: (values, index per test)}."""
        n = len(self.ids)
        for c in ATTR_COLUMNS:
            if len(self.attr[c]) < n:   # positions added since: grow, with room for more
                grown = np.full(max(n, 2 * len(self.attr[c])), -1, dtype=np.int64)
                grown[:len(self.attr[c])] = self.attr[c]
                self.attr[c] = grown
            if c not in columns:
                continue
            values, index = columns[c]
            own = self.attr_values[c]
            # index -1 (no value) picks the appended -1
            lut = np.fromiter((own[v] for v in values), dtype=np.int64, count=len(values))
            self.attr[c][pos] = np.append(lut, -1)[np.asarray(index, dtype=np.int64)]

    def _position(self, test_id: str) -> int:
        i = self.index.get(test_id)
        if i is None:
            i = self.index[test_id] = len(self.ids)
            self.ids.append(test_id)
        return i

    def add_encoded(self, slug: str, enc: "EncodedBuild", same_as: np.ndarray | None = None) -> np.ndarray:
        """Record a build encoded by ``encode_build`` (possibly in a worker process).

        ``same_as``: the positions of the previous build encoded by the same
        worker, used when ``enc.ids`` is None (same test ids in the same order).
        Returns this build's positions, for the next one."""
        if enc.ids is None:
            pos = same_as
        else:
            found = list(map(self.index.get, enc.ids))
            if None in found:   # tests not seen in any earlier build get the next positions
                found = [i if i is not None else self._position(t) for i, t in zip(found, enc.ids)]
            pos = np.asarray(found, dtype=np.int64)
        self.builds[slug] = (pos, np.frombuffer(enc.codes, dtype=np.uint8))
        if enc.attrs:
            self._set_attrs(pos, enc.attrs)
        rows = np.fromiter(enc.missing.keys(), dtype=np.int64, count=len(enc.missing))
        self.missing[slug] = dict(zip(pos[rows].tolist(), enc.missing.values()))
        self.models[slug] = enc.models
        return pos

    # -- reuse of a previous run's files --------------------------------------------------
    def read_previous(self, out_dir: Path) -> bool:
        """Load the previous site's test index, so unchanged builds can be re-added from their files."""
        path = out_dir / "data" / "tests.js"
        if not path.is_file():
            return False
        attrs = out_dir / "data" / "attrs.js"
        if not attrs.is_file():   # a site from before the attributes: render every build again
            return False
        data = read_data_file(path)
        self._previous_ids = [head + tail for head, tails in data["groups"] for tail in tails]
        self._previous_pos = None
        found = read_data_file(attrs)
        if found.get("n") != len(self._previous_ids):
            return False
        # numbers count from 1 there (0: none), -1 here
        self._previous_attrs = {c: (col["values"], decode_attrs(col["width"], col["codes"]) - 1)
                                for c, col in found["columns"].items()}
        return True

    def add_previous(self, slug: str, path: Path) -> bool:
        """Re-add a build from its data file of the previous run; False when that is not possible."""
        if self._previous_ids is None or not path.is_file():
            return False
        data = read_data_file(path)
        if len(data["codes"]) != len(self._previous_ids):
            return False
        if self._previous_pos is None or len(self._previous_pos) != len(self._previous_ids):
            # map every previous index position to this run's positions, once
            self._previous_pos = np.fromiter((self._position(t) for t in self._previous_ids),
                                             dtype=np.int64, count=len(self._previous_ids))
            # the previous run's attributes of those tests (a changed build's, added later, prevail)
            self._set_attrs(self._previous_pos, self._previous_attrs)
        codes = np.frombuffer(data["codes"].encode("ascii"), dtype=np.uint8)
        present = codes != _ABSENT
        pos = self._previous_pos[present]
        self.builds[slug] = (pos, codes[present])
        self.missing[slug] = {int(self._previous_pos[i]): data["missing_ops"][k] for i, k in data["missing_at"]}
        self.models[slug] = [Outcome(test_id=r[0], outcome=r[2], suite="models", op=r[1], variant=r[3], kind=r[4],
                                     missing_op=r[5], message=r[6]) for r in data.get("models", [])]
        return True

    # -- output -------------------------------------------------------------------------------
    def write(self, site, builds: list[BuildInfo]) -> None:
        n = len(self.ids)
        order = sorted(range(n), key=self.ids.__getitem__)
        new_pos = np.empty(n, dtype=np.int64)
        new_pos[order] = np.arange(n)
        groups = group_ids(map(self.ids.__getitem__, order))
        site.write_data("data/tests.js", "tests", {"n": n, "groups": groups})
        self.write_attrs(site, order)
        for b in builds:
            pos, codes = self.builds.get(b.slug, (np.empty(0, np.int64), np.empty(0, np.uint8)))
            row = np.full(n, _ABSENT, dtype=np.uint8)
            row[new_pos[pos]] = codes
            missing = self.missing.get(b.slug, {})
            ops = sorted(set(missing.values()))
            op_index = {op: k for k, op in enumerate(ops)}
            # [position, operator] pairs by position (a build has each position once)
            where = new_pos[np.fromiter(missing.keys(), dtype=np.int64, count=len(missing))]
            which = np.fromiter(map(op_index.__getitem__, missing.values()), dtype=np.int64, count=len(missing))
            order = np.argsort(where, kind="stable")
            at = np.stack([where[order], which[order]], axis=1).tolist()
            models = [[o.test_id, o.op, o.outcome, o.variant, o.kind, o.missing_op, o.message]
                      for o in self.models.get(b.slug, [])]
            site.write_data(f"data/builds/{b.slug}.js", f"build:{b.slug}",
                            {"build": b.name, "codes": row.tobytes().decode("ascii"), "missing_ops": ops,
                             "missing_at": at, "models": models})


    def write_attrs(self, site, order: list[int]) -> None:
        """data/attrs.js: per ATTR_COLUMNS, the values (sorted) and each test's number among
        them plus one (0: none) as base-64 digits, in the order of data/tests.js."""
        n = len(self.ids)
        self._set_attrs(np.empty(0, dtype=np.int64), {})   # sized to every position
        columns = {}
        for c in ATTR_COLUMNS:
            at = self.attr[c][:n][np.asarray(order, dtype=np.int64)] if n else np.empty(0, dtype=np.int64)
            values = self.attr_values[c].values
            used = sorted({values[i] for i in np.unique(at[at >= 0]).tolist()} - {None, ""})
            rank = {v: k + 1 for k, v in enumerate(used)}
            lut = np.array([rank.get(v, 0) for v in values] + [0], dtype=np.int64)
            width, codes = encode_attrs(lut[at], len(used))
            columns[c] = {"values": used, "width": width, "codes": codes}
        site.write_data("data/attrs.js", "attrs", {"n": n, "digits": DIGITS, "columns": columns})


def failure_pairs() -> list[tuple[str, str]]:
    """The (outcome, kind) pairs of the tests a build's failure data holds."""
    return [(o, "") for o in sorted(FAILED)] + [(SKIP_BACKEND, k) for k in BACKEND_SKIP_KINDS]


def render(site, index: SearchIndex, builds: list[BuildInfo], generated: str):
    index.write(site, builds)
    config = {
        "builds": [{"slug": b.slug, "name": b.name, "created": b.created} for b in builds],
        "codeLabels": {code: list(v) for code, v in CODE_LABELS.items()},
        "limit": 200,
        # the codes whose tests have a message and repro in the build's failure data (failures.py)
        "failureCodes": "".join(sorted({outcome_code(o, k) for o, k in failure_pairs()})),
        # the query language's outcome: names (static/query.js)
        "outcomes": outcome_names(),
    }
    code_labels = [(code, label) for code, (_, label) in CODE_LABELS.items()]
    return site.page("search.html", "search.html", title="Test search and history", config=config,
                     builds=list(reversed(builds)), n_builds=len(builds), n_tests=len(index.ids),
                     code_labels=code_labels, outcome_names=sorted(config["outcomes"]), generated=generated)
