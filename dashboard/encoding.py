"""Compact encodings of the site's lazily loaded data, in Python and (static/*.js) in the browser.

The data files are JSON inside ``TC.loaded(key, ...)`` scripts (render.Site.write_data);
gzip is not an option (file:// and any static host), so the files themselves are kept
small with three plain encodings:

- base-64 digit columns (``encode_digits``): a column of small integers as one string of
  ``width`` characters per value, from ``DIGITS`` (no quote or backslash, so JSON writes them
  as they are); a column with one possible value has width 0 and costs nothing;
- front-coded test ids (``code_ids``): sorted ids share long starts with their neighbours,
  so each is grouped under the prefix it shares with them (file and class) and written as one
  digit (how many characters it shares with the previous one, at most 63) and the rest;
- bitmaps (``encode_bits``): six flags per digit.
"""
from __future__ import annotations

import numpy as np

DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_"
_BASE = len(DIGITS)
_TABLE = np.frombuffer(DIGITS.encode("ascii"), dtype=np.uint8)
_VALUE = np.full(256, -1, dtype=np.int64)
_VALUE[_TABLE] = np.arange(_BASE)
SHARED_MAX = _BASE - 1   # the most characters a front-coded id says it shares (one digit)


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
    """Digits per value to write numbers 0..n_values."""
    width = 0
    while _BASE ** width < n_values + 1:
        width += 1
    return width


def encode_digits(numbers, n_values: int, width: int | None = None) -> tuple[int, str]:
    """(width, string of ``width`` base-64 digits per value) of numbers 0..n_values."""
    width = digits_width(n_values) if width is None else width
    numbers = np.asarray(numbers, dtype=np.int64)
    if not width or not len(numbers):
        return width, ""
    places = [_TABLE[numbers // _BASE ** (width - 1 - k) % _BASE] for k in range(width)]
    return width, np.stack(places, axis=1).tobytes().decode("ascii")


def decode_digits(width: int, text: str, count: int | None = None) -> np.ndarray:
    """The numbers ``encode_digits`` wrote (``count``: how many, for a width-0 column)."""
    if not width:
        return np.zeros(count or 0, dtype=np.int64)
    digits = _VALUE[np.frombuffer(text.encode("ascii"), dtype=np.uint8)].reshape(-1, width)
    weights = _BASE ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return digits @ weights


def column(numbers, n_values: int) -> dict:
    """A column of numbers 0..n_values as the data files carry it: {"width", "codes"}."""
    width, codes = encode_digits(numbers, n_values)
    return {"width": width, "codes": codes}


def encode_bits(flags: np.ndarray) -> str:
    """Six flags per digit, the first flag the digit's lowest bit."""
    flags = np.asarray(flags, dtype=np.int64)
    pad = -len(flags) % 6
    grouped = np.concatenate([flags, np.zeros(pad, dtype=np.int64)]).reshape(-1, 6)
    return _TABLE[grouped @ (1 << np.arange(6))].tobytes().decode("ascii")


def decode_bits(text: str, n: int) -> np.ndarray:
    values = _VALUE[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    return ((values[:, None] >> np.arange(6)) & 1).astype(bool).reshape(-1)[:n]


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


def _shared(a: str, b: str) -> int:
    """Characters ``b`` shares with the start of ``a``; counted only over characters that are
    one UTF-16 unit, so that the browser's string lengths agree with Python's."""
    n = min(len(a), len(b), SHARED_MAX)
    i = 0
    while i < n and a[i] == b[i] and a[i] < "\U00010000":
        i += 1
    return i


def code_ids(ids) -> list[list]:
    """Test ids, in order, as ``[[shared prefix, [front-coded rest, ...]], ...]`` (what
    static/site.js ``TC.expandIds`` reads back); ``None`` for no id: a run of k of them is the number k."""
    groups: list[list] = []
    head, last = None, ""
    for tid in ids:
        if tid is None:
            if not groups:
                groups.append(["", []])
            entries = groups[-1][1]
            if entries and isinstance(entries[-1], int):
                entries[-1] += 1
            else:
                entries.append(1)
            continue
        h, tail = split_id(tid)
        if h != head:
            groups.append([h, []])
            head, last = h, ""
        k = _shared(last, tail)
        groups[-1][1].append(DIGITS[k] + tail[k:])
        last = tail
    return groups


def expand_ids(groups) -> list:
    """The ids ``code_ids`` wrote (None where there is none)."""
    out: list = []
    for head, entries in groups:
        last = ""
        for e in entries:
            if isinstance(e, int):
                out.extend([None] * e)
            else:
                last = last[:DIGITS.index(e[0])] + e[1:]
                out.append(head + last)
    return out
