"""How each outcome category looks: label, colour, pattern and symbol.

One table for the SVG charts, the matrix cells, the legends and the client-side
search, so a category looks the same everywhere.  Colours are the Okabe-Ito
palette (distinguishable with the common colour-vision deficiencies) and every
category also has a fill pattern and a text symbol, so nothing relies on
colour alone.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

# The site's pass rate is the breakdown's (and the gate's): one definition, re-exported here.
from torchconform.core.breakdown import pass_rate  # noqa: F401
from torchconform.core.outcome import (
    CRASH, DISTRIBUTED_SKIP_KINDS, ERROR, FAIL, HOST_ONLY, MISSING_OP, NOT_EXECUTED, PASS, PASS_FALLBACK, SKIP_BACKEND,
    SKIP_ELIGIBILITY, SKIPLIST, TIMEOUT, UNSUPPORTED_DTYPE, XFAIL, XPASS,
)


@dataclass(frozen=True)
class Style:
    key: str        # category id, used in CSS classes (c-<key>) and pattern ids (p-<key>)
    label: str      # words shown in legends and tooltips
    colour: str
    symbol: str     # shown in matrix cells and search results
    code: str       # one character in the per-build search data


# Order is the reading order of the breakdown bar: good news first.
CATEGORIES = (
    Style("pass", "pass (native)", "#0072B2", "\u2713", "P"),
    Style("pass_fallback", "pass through CPU fallback", "#56B4E9", "\u21bb", "B"),
    # Passed without touching the device: out of the pass rate, so never drawn as a pass
    # (a pale tint of the pass blue, with blue rings as its pattern).
    Style("host_only", "pass without touching the device", "#DCEAF5", "\u2218", "H"),
    Style("failed", "fail / error / crash / timeout", "#D55E00", "\u2717", "F"),
    Style("skip_eligibility", "skip: PyTorch eligibility", "#BBBBBB", "\u00b7", "S"),
    Style("missing_op", "skip: missing operator", "#E69F00", "M", "M"),
    Style("skiplist", "skip: skiplist entry", "#F0E442", "L", "L"),
    Style("unsupported_dtype", "skip: unsupported dtype", "#CC79A7", "D", "D"),
    Style("not_executed", "skip: not executed", "#6E6E6E", "\u2013", "N"),
    # the distributed suite's: a collective, a c10d backend or a device-module attribute missing
    Style("missing_distributed", "skip: missing collective / c10d backend / device API", "#882255", "K", "K"),
    # Apart, as the gate keeps them: an expected failure is a known gap, an unexpected pass
    # is a stale expectation (the gate's stale_expectations rule warns on xpass alone).
    Style("xfail", "expected failure (xfail)", "#009E73", "x", "X"),
    Style("xpass", "unexpected pass (xpass)", "#117733", "!", "Y"),
)
BY_KEY = {s.key: s for s in CATEGORIES}

# Census statuses drawn with the outcome categories' looks (so the patterns and legend CSS
# exist already), in reading order, good news first: what runs natively, what runs through
# something else, what does not run.  "blocked" is a composite whose decomposition reaches
# an operator that does not run; "unavailable" is not the device's gap (no kernel on any
# backend of this torch build).
CENSUS_STATUSES = (
    replace(BY_KEY["pass"], label="native"),
    replace(BY_KEY["xfail"], label="autograd kernel only"),
    replace(BY_KEY["host_only"], label="composite (decomposition runs)"),
    replace(BY_KEY["pass_fallback"], label="CPU fallback"),
    replace(BY_KEY["failed"], label="composite, blocked"),
    replace(BY_KEY["missing_op"], label="missing"),
    replace(BY_KEY["skip_eligibility"], label="unavailable in this torch"),
)
CENSUS_KEYS = ("native", "autograd", "composite", "fallback", "blocked", "missing", "unavailable")
CENSUS_STYLE = dict(zip(CENSUS_KEYS, CENSUS_STATUSES))

# Codes for the individual outcomes in the search data: finer than the chart
# categories (fail vs crash matters when you look at one test).
OUTCOME_CODES = {
    PASS: "P", PASS_FALLBACK: "B", HOST_ONLY: "H", FAIL: "F", ERROR: "E", CRASH: "C", TIMEOUT: "T",
    SKIP_ELIGIBILITY: "S", XFAIL: "X", XPASS: "Y",
    # skip_backend is split by kind
    MISSING_OP: "M", SKIPLIST: "L", UNSUPPORTED_DTYPE: "D", NOT_EXECUTED: "N",
    **{kind: "K" for kind in DISTRIBUTED_SKIP_KINDS},
}
CODE_LABELS = {
    "P": ("pass", "pass"), "B": ("pass_fallback", "pass through CPU fallback"),
    "H": ("host_only", "pass without touching the device"),
    "F": ("failed", "fail"), "E": ("failed", "error"), "C": ("failed", "crash"),
    "T": ("failed", "timeout"), "S": ("skip_eligibility", "skip: eligibility"),
    "X": ("xfail", "xfail"), "Y": ("xpass", "xpass"),
    "M": ("missing_op", "skip: missing operator"), "L": ("skiplist", "skip: skiplist"),
    "D": ("unsupported_dtype", "skip: unsupported dtype"), "N": ("not_executed", "skip: not executed"),
    "K": ("missing_distributed", "skip: missing collective / c10d backend / device API"),
}
ABSENT_CODE = "."


def outcome_code(outcome: str, kind: str = "") -> str:
    if outcome == SKIP_BACKEND:
        return OUTCOME_CODES.get(kind, "N")
    if outcome == PASS and kind == HOST_ONLY:
        return OUTCOME_CODES[HOST_ONLY]
    return OUTCOME_CODES[outcome]


def category_of(outcome: str, kind: str = "") -> str:
    """Chart category of one outcome (skip_backend is split by its kind)."""
    return CODE_LABELS[outcome_code(outcome, kind)][0]


def breakdown_counts(b: dict) -> list[tuple[Style, int]]:
    """The breakdown dict (core.breakdown shape) as (style, count) in bar order."""
    o, k = b["outcomes"], b["backend_skip_kinds"]
    host_only = b.get("pass_kinds", {}).get(HOST_ONLY, 0)  # breakdowns stored before host_only had none
    counts = {
        "pass": o[PASS] - host_only,
        "host_only": host_only,
        "pass_fallback": o[PASS_FALLBACK],
        "failed": o[FAIL] + o[ERROR] + o[CRASH] + o[TIMEOUT],
        "skip_eligibility": o[SKIP_ELIGIBILITY],
        "missing_op": k[MISSING_OP],
        "skiplist": k[SKIPLIST],
        "unsupported_dtype": k[UNSUPPORTED_DTYPE],
        "not_executed": k[NOT_EXECUTED],
        # breakdowns stored before the distributed suite have none of its kinds
        "missing_distributed": sum(k.get(kind, 0) for kind in DISTRIBUTED_SKIP_KINDS),
        "xfail": o[XFAIL],
        "xpass": o[XPASS],
    }
    return [(s, int(counts[s.key])) for s in CATEGORIES]
