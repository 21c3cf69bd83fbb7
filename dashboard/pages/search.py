"""Test search and history: compact per-build data searched on the client.

For 150k tests per build one HTML page per test is out of the question; the
site instead writes one index of every test id (``data/tests.js``, by position:
dashboard/positions.py) and per build one string with a character per position
(``data/builds/<slug>.js``; see styles.OUTCOME_CODES).  A test's history is then
one character from each build's string.  Only the builds within ``--full-builds``
(``BuildInfo.full``) have such a string; the page lists only those.

A build's string is written by whoever renders the build (``write_build``, in a
worker process for a big site); the parent collects what the site-wide pages need
(``SearchIndex``: which positions some build has, the model-zoo rows), from the
worker's answer or, for a build kept from the last run, from its file.

``data/builds/<slug>.js`` (key ``build:<slug>``): ``codes`` (a character per position,
``.`` where the build has no result), ``missing_ops`` (sorted) and ``missing`` (a base-64
digit column with one value per ``M`` in ``codes``, in position order: 0 for none, k + 1
for ``missing_ops[k]``), ``models`` (the model-zoo rows: test id, op, outcome, variant,
kind, missing op, message).
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

import numpy as np

from torchconform.core.outcome import (BACKEND_SKIP_KINDS, FAILED, HOST_ONLY, MISSING_OP, OUTCOMES, PASS,
                                             SKIP_BACKEND, SKIPPED, Outcome)
from torchconform.dashboard.encoding import DIGITS, column, decode_digits, digits_width, encode_digits  # noqa: F401
from torchconform.dashboard.model import BuildInfo
from torchconform.dashboard.positions import ATTR_COLUMNS  # noqa: F401  (the query fields' columns)
from torchconform.dashboard.render import read_data_file
from torchconform.dashboard.styles import ABSENT_CODE, CODE_LABELS, outcome_code
from torchconform.db.arrays import CODES

_ABSENT = ord(ABSENT_CODE)
_MISSING_CODE = ord(outcome_code(SKIP_BACKEND, MISSING_OP))
# The names data/attrs.js's readers know these by (static/query.js, tests).
encode_attrs, decode_attrs = encode_digits, decode_digits


def outcome_names() -> dict[str, str]:
    """Each name a query's ``outcome:`` accepts -> the search-data codes it stands for.

    A stored outcome (pass, skip_backend...) names every code it is split into (pass:
    native and host-only; skip_backend: each kind), a kind names its own code, and
    ``failed`` / ``skipped`` the groups of torchconform/core/outcome.py."""
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


def failure_codes() -> str:
    """The codes of the tests a build's failure data holds (failures.py), as one string."""
    return "".join(sorted({outcome_code(o, k) for o, k in failure_pairs()}))


# The model-zoo rows a build keeps for the models page and its search data.
ModelRow = namedtuple("ModelRow", "test_id op outcome variant kind missing_op message name")


class _Codes(dict):
    """(outcome, kind) -> byte of its code, filled on first use (an unknown outcome still raises)."""
    def __missing__(self, key):
        code = self[key] = ord(outcome_code(*key))
        return code


_CODES = _Codes()


@dataclass
class BuildSearch:
    """What the parent keeps of one build's search data: which positions it has (packed
    bits, small enough to send back from a worker) and its model-zoo rows."""
    present: bytes
    n: int
    models: list

    def shown(self, n: int) -> np.ndarray:
        flags = np.unpackbits(np.frombuffer(self.present, dtype=np.uint8), count=self.n).astype(bool)
        return np.concatenate([flags, np.zeros(max(0, n - self.n), dtype=bool)])[:n]


def position_codes(data, positions) -> np.ndarray:
    """A build's code byte at every position (``.`` where it has no result)."""
    lut = np.fromiter((_CODES[pair] for pair in CODES.pairs), dtype=np.uint8, count=len(CODES.pairs))
    pos = positions.of(data.pk)
    ok = pos >= 0
    row = np.full(positions.n, _ABSENT, dtype=np.uint8)
    row[pos[ok]] = lut[data.code[ok]]
    return row


def _payload(name: str, row: np.ndarray, missing: dict, models: list) -> dict:
    """The data file of a build: ``missing``: {position: operator} of its missing_op results."""
    ops = sorted(set(missing.values()) - {""})
    rank = {op: k + 1 for k, op in enumerate(ops)}
    at = np.flatnonzero(row == _MISSING_CODE).tolist()
    numbers = [rank.get(missing.get(p, ""), 0) for p in at]
    return {"build": name, "codes": row.tobytes().decode("ascii"), "missing_ops": ops,
            "missing": column(numbers, len(ops)), "models": models}


def write_build(site, b: BuildInfo, data, positions) -> BuildSearch:
    """Write ``b``'s search data from its arrays.BuildData; returns what the parent keeps."""
    row = position_codes(data, positions)
    pos = positions.of(data.pk[data.missing_at])
    missing = {p: op for p, op in zip(pos.tolist(), data.missing_ops) if p >= 0}
    rows, tests = data.rows, data.tests.values
    models = []
    for k in data.models_rows():
        pk, outcome, kind, missing_op, _, message = rows[k][:6]
        models.append(ModelRow(tests["test_id"][pk], tests["op"][pk], outcome, tests["variant"][pk], kind,
                               missing_op, message, tests["name"][pk]))
    models.sort(key=attrgetter("test_id"))
    site.write_data(f"data/builds/{b.slug}.js", f"build:{b.slug}",
                    _payload(b.name, row, missing, [list(m[:7]) for m in models]))
    return BuildSearch(np.packbits(row != _ABSENT).tobytes(), len(row), models)


def read_kept(out_dir: Path, b: BuildInfo, n: int) -> tuple[BuildSearch, dict] | None:
    """A kept build's search data from its file, written against a numbering of ``n`` positions
    (the previous run's); None when it is not usable (the build is then rendered again)."""
    try:
        data = read_data_file(Path(out_dir) / "data" / "builds" / f"{b.slug}.js")
        codes, width = data["codes"], data["missing"]["width"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if len(codes) != n or not isinstance(width, int) or not isinstance(data.get("missing_ops"), list):
        return None
    present = np.frombuffer(codes.encode("ascii"), dtype=np.uint8) != _ABSENT
    models = [Outcome(test_id=r[0], outcome=r[2], suite="models", op=r[1], variant=r[3], kind=r[4],
                      missing_op=r[5], message=r[6]) for r in data.get("models", [])]
    return BuildSearch(np.packbits(present).tobytes(), n, models), data


class SearchIndex:
    """The search data of the site's full builds, for the site-wide pages (search, models)."""

    def __init__(self):
        self.builds: dict[str, BuildSearch] = {}
        self._kept: dict[str, dict] = {}     # slug -> the file's payload, of the builds kept

    @property
    def models(self) -> dict[str, list]:
        return {slug: s.models for slug, s in self.builds.items()}

    def add(self, slug: str, found: BuildSearch, payload: dict | None = None) -> None:
        """A build's search data (``payload``: its file's, for a kept build)."""
        self.builds[slug] = found
        if payload is not None:
            self._kept[slug] = payload

    def pad_kept(self, site, n: int) -> None:
        """Write again, with room for every position, the files of kept builds made when there
        were fewer (tests stored since): a build's string always has a character per position."""
        for slug, data in self._kept.items():
            codes = data["codes"]
            if len(codes) >= n:
                continue
            row = np.full(n, _ABSENT, dtype=np.uint8)
            row[:len(codes)] = np.frombuffer(codes.encode("ascii"), dtype=np.uint8)
            at = np.flatnonzero(row == _MISSING_CODE).tolist()
            ops = [""] + data["missing_ops"]
            numbers = decode_digits(data["missing"]["width"], data["missing"]["codes"], len(at)).tolist()
            site.write_data(f"data/builds/{slug}.js", f"build:{slug}",
                            _payload(data["build"], row, {p: ops[k] for p, k in zip(at, numbers)}, data["models"]))

    def shown(self, n: int) -> np.ndarray:
        """The positions some full build has."""
        out = np.zeros(n, dtype=bool)
        for s in self.builds.values():
            out |= s.shown(n)
        return out


def failure_pairs() -> list[tuple[str, str]]:
    """The (outcome, kind) pairs of the tests a build's failure data holds."""
    return [(o, "") for o in sorted(FAILED)] + [(SKIP_BACKEND, k) for k in BACKEND_SKIP_KINDS]


def render(site, n_tests: int, builds: list[BuildInfo], generated: str, retired: int = 0, full_builds=None):
    """The search page over the ``builds`` with search data (the full ones); ``n_tests``: how many
    tests they have; ``retired``: how many older builds have none (``--full-builds``)."""
    config = {
        "builds": [{"slug": b.slug, "name": b.name, "created": b.created} for b in builds],
        "codeLabels": {code: list(v) for code, v in CODE_LABELS.items()},
        "limit": 200,
        # the codes whose tests have a message and repro in the build's failure data (failures.py)
        "failureCodes": failure_codes(),
        # the query language's outcome: names (static/query.js)
        "outcomes": outcome_names(),
    }
    code_labels = [(code, label) for code, (_, label) in CODE_LABELS.items()]
    return site.page("search.html", "search.html", title="Test search and history", config=config,
                     builds=list(reversed(builds)), n_builds=len(builds), n_tests=n_tests,
                     code_labels=code_labels, outcome_names=sorted(config["outcomes"]), retired=retired,
                     full_builds=full_builds, generated=generated)
