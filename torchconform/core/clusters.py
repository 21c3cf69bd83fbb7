"""Failure clusters: a build's failures grouped by a normalised message signature.

Two failures belong together when their messages differ only in what varies
from test to test: numbers, tensor shapes, memory addresses and quoted or
qualified names (the test's own name, its operator, any quoted identifier).
``signature`` takes those out; dtype names (``float32``, ``torch.bfloat16``)
are kept, since a failure of one dtype is often another bug than of the next.
Users can name categories (a YAML file of ``name`` + ``message`` regex, like
Allure's ``categories.json``): a failure whose message matches one is in that
category's cluster, whatever its signature.

Used by the site (a page per build) and the gate (its Markdown summary lists
the clusters new since the baseline first); both read the same records.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from torchconform.core.outcome import FAILED

SIGNATURE_CHARS = 200
# dtype names as PyTorch spells them (torch.<name>); kept whole in a signature
DTYPE = re.compile(r"^(?:torch\.)?(?:u?int(?:8|16|32|64)|float(?:8_\w+|16|32|64)|b?float16|bfloat16|half|"
                   r"double|float|long|int|short|bool|complex(?:32|64|128)|c?float|cdouble|q?u?int\d+|quint4x2)$")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_SIZE = re.compile(r"torch\.Size\(\[[^\]]*\]\)")
_SHAPE = re.compile(r"\[\s*-?\d+(?:\s*,\s*-?\d+)*\s*,?\s*\]|\(\s*-?\d+\s*,(?:\s*-?\d+\s*,?)*\s*\)")
_QUOTED = re.compile(r"""(?<![\w'"])(['"`])([^'"`\s]{1,200})\1(?![\w'"])""")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?(?![\w])")
_SPACE = re.compile(r"\s+")


def _quoted(m: re.Match) -> str:
    return m.group(0) if DTYPE.match(m.group(2)) else m.group(1) + "<name>" + m.group(1)


def signature(message: str, name: str = "", op: str = "") -> str:
    """``message`` (its first line) with the parts that vary per test taken out:
    the test's ``name`` -> <test>, its ``op`` where qualified (``aten::op``, ``torch.op``)
    -> <op>, quoted identifiers -> '<name>' (quoted dtypes kept), 0x... -> <addr>,
    torch.Size([...]) / [3, 4] / (3, 4) -> <shape>, numbers -> <n>."""
    text = (message or "").strip().split("\n", 1)[0]
    if name and name in text:
        text = text.replace(name, "<test>")
    if op and op in text:
        text = re.sub(r"(?<=[.:])" + re.escape(op) + r"(?![\w])", "<op>", text)
    text = _QUOTED.sub(_quoted, text)
    text = _HEX.sub("<addr>", text)
    text = _SIZE.sub("torch.Size([<shape>])", text)
    text = _SHAPE.sub(lambda m: m.group(0)[0] + "<shape>" + m.group(0)[-1], text)
    text = _NUMBER.sub("<n>", text)
    text = _SPACE.sub(" ", text).strip()
    return text[:SIGNATURE_CHARS] or "(no message)"


# -- user categories ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Category:
    name: str
    pattern: re.Pattern
    outcomes: frozenset = frozenset()   # empty: any failed outcome

    def matches(self, outcome: str, message: str) -> bool:
        return (not self.outcomes or outcome in self.outcomes) and self.pattern.search(message or "") is not None


def load_categories(path) -> list[Category]:
    """Categories from a YAML file: a list (or ``categories:`` list) of
    ``{name, message: regex, outcomes: [fail, error, ...] (optional)}``; the first that matches wins.
    The file's shape is declared in core/category_schema.py; a bad file is a ``UserError``
    ``FILE:LINE: ...``."""
    # pydantic (the declared shape) loads only when a file is read: the site's workers import this module
    from torchconform.core.category_schema import load

    return [Category(e.name, re.compile(e.regex), frozenset(e.outcomes or ())) for e in load(path)]


def categories_key(path) -> str:
    """What a categories file contributes to a cache key (its text; '' without one)."""
    return Path(path).read_text(encoding="utf-8") if path else ""


# -- clusters ------------------------------------------------------------------------------------
@dataclass
class Failure:
    """One failed test, as both callers have it."""
    test_id: str
    outcome: str
    message: str
    repro: str = ""
    name: str = ""
    op: str = ""
    dtype: str = ""


@dataclass
class Cluster:
    signature: str               # the category's name for a user category
    category: str = ""           # the user category, '' for a signature cluster
    tests: int = 0
    ops: Counter = field(default_factory=Counter)
    dtypes: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    example: Failure | None = None
    first_build: str = ""        # set by the caller that knows the earlier builds
    new: bool = False            # not in the baseline (set by ``order``)

    @property
    def key(self) -> str:
        return ("category:" if self.category else "signature:") + self.signature


class Clusterer:
    """Assigns failures to clusters; ``cluster_of`` gives each one's index in ``clusters``."""

    def __init__(self, categories: list[Category] = ()):
        self.categories = list(categories)
        self.clusters: list[Cluster] = []
        self._at: dict[str, int] = {}
        self._signatures: dict[str, str] = {}   # message -> signature, for messages naming no test

    def _signature(self, f: Failure) -> str:
        message = f.message or ""
        if (f.name and f.name in message) or (f.op and f.op in message):
            return signature(message, f.name, f.op)
        sig = self._signatures.get(message)
        if sig is None:
            sig = self._signatures[message] = signature(message)
        return sig

    def add(self, f: Failure) -> int:
        category = next((c.name for c in self.categories if c.matches(f.outcome, f.message)), "")
        key = ("category:" + category) if category else ("signature:" + self._signature(f))
        i = self._at.get(key)
        if i is None:
            i = self._at[key] = len(self.clusters)
            self.clusters.append(Cluster(category or key.split(":", 1)[1], category))
        c = self.clusters[i]
        c.tests += 1
        c.outcomes[f.outcome] += 1
        if f.op:
            c.ops[f.op] += 1
        if f.dtype:
            c.dtypes[f.dtype] += 1
        if c.example is None or f.test_id < c.example.test_id:   # the same example whatever the order
            c.example = f
        return i


    def ranked(self) -> tuple[list[Cluster], list[int]]:
        """The clusters largest first, and the rank there of each ``add`` answer."""
        by_size = sorted(range(len(self.clusters)), key=lambda i: (-self.clusters[i].tests, self.clusters[i].signature))
        rank = [0] * len(by_size)
        for r, i in enumerate(by_size):
            rank[i] = r
        return [self.clusters[i] for i in by_size], rank


def cluster(failures, categories: list[Category] = ()) -> list[Cluster]:
    """Clusters of ``failures`` (``Failure`` records of FAILED outcomes), largest first."""
    c = Clusterer(categories)
    for f in failures:
        c.add(f)
    return c.ranked()[0]


def order(clusters: list[Cluster], baseline: list[Cluster] | None) -> list[Cluster]:
    """Marks the clusters not in ``baseline`` as new and puts them first (None: no baseline,
    nothing is new); within each part, largest first."""
    known = None if baseline is None else {c.key for c in baseline}
    for c in clusters:
        c.new = known is not None and c.key not in known
    return sorted(clusters, key=lambda x: (not x.new, -x.tests, x.signature))


def from_records(records: dict, categories: list[Category] = ()) -> list[Cluster]:
    """Clusters of a build's failed outcome records ({test_id: record dict}, the gate's shape)."""
    return cluster((Failure(r["test_id"], r["outcome"], r.get("message") or "", r.get("repro") or "",
                            r.get("name") or "", r.get("op") or "", r.get("dtype") or "")
                    for r in records.values() if r["outcome"] in FAILED), categories)
