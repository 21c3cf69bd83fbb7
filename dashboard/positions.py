"""The site's numbering of tests: one position per test, shared by the builds' data files and
kept from one run on a folder to the next.

A build's outcome codes (``data/builds/<slug>.js``, a character per test) and its failure
data (``data/failures/<slug>/``, a row per failed or backend-skipped test) name tests by
position, not by id: each test id then travels once, in ``data/tests.js``, instead of once
per build and file (an id is ~70 characters, a build has 150k tests, 44k of them in its
failure data).  Worker processes write those files, so the numbering is made by the parent
before they start (``plan``), from every stored test (``arrays.TestTable``).

A build kept from the last run keeps its files, so a position never moves while any is
kept: a run starts from the numbering in the previous ``data/tests.js`` and gives the tests
it lacks the next positions, sorted among themselves.  A fresh numbering (sorted by id)
happens when there is none to start from, or when more than ``DEAD_SHARE`` of it names tests
no longer stored; then nothing positional may be kept (``Positions.fresh``).

``data/tests.js``: ``{"n", "groups": encoding.code_ids, "shown"}``: the ids by position
(front-coded; none where no stored test has it), and which positions some build of the site
has (encoding.encode_bits; absent when every id is shown): a test only in builds past
``--full-builds`` keeps its position and is left out of the search.
``data/attrs.js``: each position's suite, file, op, variant and dtype (``ATTR_COLUMNS``) as
base-64 digit columns (0: none), read by static/query.js for the search's field terms.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from torchconform.dashboard.encoding import DIGITS, code_ids, column, decode_bits, encode_bits, expand_ids
from torchconform.dashboard.render import read_data_file

# The test attributes a query can name (op:, dtype:...), in data/attrs.js.
ATTR_COLUMNS = ("suite", "file", "op", "variant", "dtype")
# Renumber from scratch when more than this share of the previous numbering is dead.
DEAD_SHARE = 0.25
FORMAT = 2


@dataclass
class Positions:
    ids: list            # the test id at each position (None: no stored test has it)
    at: np.ndarray       # the position of each pk of the TestTable the plan was made from; -1: none
    fresh: bool          # numbered from scratch: no file naming positions can be kept
    same: bool = False   # the previous run's numbering as it was: data/tests.js may already hold it

    @property
    def n(self) -> int:
        return len(self.ids)

    def of(self, pk: np.ndarray) -> np.ndarray:
        """Positions of ``pk`` (-1 for a test stored after the plan was made: a build still being
        written, read again next run; such a row is left out of the positional files)."""
        pk = np.asarray(pk, dtype=np.int64)
        out = np.full(len(pk), -1, dtype=np.int64)
        inside = pk < len(self.at)
        out[inside] = self.at[pk[inside]]
        return out


def plan(tests, previous: list | None) -> Positions:
    """Number every stored test (``tests``: a arrays.TestTable) starting from ``previous``
    (the last run's ids by position, ``read_ids``), or afresh."""
    test_id = tests.values["test_id"]
    pks = np.flatnonzero(tests.id_rank >= 0)
    by_id = pks[np.argsort(tests.id_rank[pks], kind="stable")]      # stored tests in id order
    at = np.full(tests.size, -1, dtype=np.int64)
    fresh = previous is None or (previous and sum(t is None for t in previous) > DEAD_SHARE * len(previous))
    if fresh:
        at[by_id] = np.arange(len(by_id))
        return Positions([test_id[pk] for pk in by_id.tolist()], at, True)
    ids = list(previous)
    where = {t: i for i, t in enumerate(ids) if t is not None}
    stored = set()
    for pk in by_id.tolist():          # id order, so the tests new to the numbering come sorted
        tid = test_id[pk]
        stored.add(tid)
        i = where.get(tid)
        if i is None:
            i = len(ids)
            ids.append(tid)
        at[pk] = i
    # a previous position whose test is no longer stored names nothing now
    ids = [t if t is None or t in stored else None for t in ids]
    return Positions(ids, at, False, same=ids == previous)


def read_ids(out_dir: Path) -> list | None:
    """The previous run's ids by position (None where none), or None without a usable file."""
    path = Path(out_dir) / "data" / "tests.js"
    if not path.is_file():
        return None
    try:
        data = read_data_file(path)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None   # a site from before positions: render every build again
    ids = expand_ids(data["groups"])
    return ids if len(ids) == data["n"] else None


def shown_of(data: dict) -> np.ndarray:
    """Which positions of a ``data/tests.js`` payload the search shows."""
    if data.get("shown") is None:
        return np.array([t is not None for t in expand_ids(data["groups"])], dtype=bool)
    return decode_bits(data["shown"], data["n"])


def write_index(site, positions: Positions, shown: np.ndarray) -> int:
    """data/tests.js; ``shown``: the positions some build of the site has.  Returns how many.
    Left as it is when it holds this numbering and shows the same already (a nightly run
    that added no test): front-coding 150k ids again took 1.5 s of a ~5 s increment."""
    named = np.array([t is not None for t in positions.ids], dtype=bool)
    shown = np.asarray(shown, dtype=bool)[:positions.n] & named
    named_ids = [t for t in positions.ids if t is not None]
    # in id order unless tests were added after an earlier numbering (the search sorts then)
    in_order = all(a < b for a, b in zip(named_ids, named_ids[1:]))
    header = {"format": FORMAT, "n": positions.n, "sorted": in_order,
              "shown": None if (shown == named).all() else encode_bits(shown)}
    path = Path(site.out_dir) / "data" / "tests.js"
    if not (positions.same and _header_of(path) == header):
        payload = {"format": FORMAT, "n": positions.n, "groups": code_ids(positions.ids),
                   "sorted": in_order, "shown": header["shown"]}
        site.write_data("data/tests.js", "tests", payload)
    return int(shown.sum())


def _header_of(path: Path) -> dict | None:
    """What a data/tests.js says besides its ids (None: no usable file)."""
    try:
        data = read_data_file(path)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return {k: data.get(k) for k in ("format", "n", "sorted", "shown")}


def write_attrs(site, positions: Positions, tests) -> None:
    """data/attrs.js: per ATTR_COLUMNS, the values (sorted) and each position's number among
    them plus one (0: none) as base-64 digits."""
    pk_at = np.full(positions.n, -1, dtype=np.int64)
    known = positions.at >= 0
    pk_at[positions.at[known]] = np.flatnonzero(known)
    has = pk_at >= 0
    columns = {}
    for c in ATTR_COLUMNS:
        levels, index = tests.levels[c], tests.index[c]
        number = np.full(positions.n, -1, dtype=np.int64)
        number[has] = index[pk_at[has]]
        used = np.unique(number[number >= 0]).tolist()
        values = sorted({levels[i] for i in used} - {None, ""})
        rank = {v: k + 1 for k, v in enumerate(values)}
        lut = np.array([rank.get(v, 0) for v in levels] + [0], dtype=np.int64)   # -1 picks the last: 0
        columns[c] = {"values": values, **column(lut[number], len(values))}
    site.write_data("data/attrs.js", "attrs", {"n": positions.n, "digits": DIGITS, "columns": columns})
