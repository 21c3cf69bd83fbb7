"""Numerical error against the CPU reference: what a comparison test saw, per outcome.

Every comparison of a device result with the CPU's (the ops and modules suites through
``suites.common.assert_close_to_cpu``, the models suite through ``compare.assert_same``)
adds its tensors to a ``Tally``; the outcome records the largest absolute and relative
error of all of them (``Outcome.max_abs_err`` / ``max_rel_err``; None when the test
compared nothing).  In a pytest run the tally is per test: the worker plugin clears it
before each test and takes it with the call phase's report (like ``notes``).

The errors, elementwise over every floating, complex or integer tensor compared:

* absolute: ``|actual - expected|``;
* relative: ``|actual - expected| / |expected|`` over the elements whose reference is
  not zero (a reference of exactly zero says nothing about relative precision);

computed in float64 (complex128), after both sides are moved to CPU.  Equal values are
an error of 0, NaN against NaN included; a non-finite value against anything else is an
infinite error (that comparison fails anyway).  Pairs the comparison would not take
(shapes or structures that differ) are left out: the assertion reports them.

The pure helpers at the end (``op_dtype_max``, ``drift``) serve the gate's
``numeric_drift`` rule and db/drift.py alike.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from torchconform.core.outcome import PASSED, PASSING, SKIPPED, TIERS, XFAIL

FIELDS = ("max_abs_err", "max_rel_err")

# Tolerance tiers (docs/classification.md, "Tolerance tiers"): the tightest a test's
# comparisons met.  ``exact``: every compared value equal to the CPU's; ``default``: within
# PyTorch's own tolerance for the op and dtype (a pass); ``loose``: outside it but within
# LOOSE_FACTOR times it (a failure that is a near miss: float64 run as float32 lands here,
# wrong math does not); ``beyond``: further off, or not comparable at all.
EXACT, DEFAULT, LOOSE, BEYOND = TIERS
LOOSE_FACTOR = 10.0


def pairs(actual, expected):
    """(actual, expected) leaves of two structures the way assertEqual pairs them."""
    import torch

    if isinstance(actual, torch.Tensor) or isinstance(expected, torch.Tensor):
        yield actual, expected
    elif isinstance(actual, (bool, int, float, complex)) and isinstance(expected, (bool, int, float, complex)):
        yield actual, expected
    elif isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) == set(expected):
            for key in expected:
                yield from pairs(actual[key], expected[key])
    elif isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        if len(actual) == len(expected):
            for a, e in zip(actual, expected):
                yield from pairs(a, e)


def tensor_errors(actual, expected) -> tuple[float, float] | None:
    """(largest absolute, largest relative error) of one pair of tensors or numbers,
    None when they cannot be compared elementwise (see the module docstring).

    Cheap on purpose (it runs at every comparison, mostly on small tensors, where each
    torch call costs more than its arithmetic): an exact match is one call, finite
    values about ten; the masks for NaN and infinity are built only when the first
    pass met a non-finite difference."""
    import torch

    try:
        a = actual.detach() if isinstance(actual, torch.Tensor) else torch.as_tensor(actual)
        e = expected.detach() if isinstance(expected, torch.Tensor) else torch.as_tensor(expected)
        if a.shape != e.shape or a.layout != torch.strided or e.layout != torch.strided:
            return None
        if a.numel() == 0 or (a.dtype == e.dtype and a.device == e.device and torch.equal(a, e)):
            return 0.0, 0.0
        wide = torch.complex128 if (a.is_complex() or e.is_complex()) else torch.float64
        a, e = a.to("cpu", wide), e.to("cpu", wide)
    except Exception:  # noqa: BLE001 - not a pair of tensors torch can line up
        return None
    diff = (a - e).abs()
    ref = e.abs()
    # A zero reference says nothing about relative precision: 0/0 and d/0 count as 0.
    found = _largest(diff, ref)
    if math.isfinite(found[0]):
        return found
    # Non-finite values: equal ones (NaN against NaN, inf against inf) are no error, any
    # other difference with one is an infinite one.
    same = (a == e) | (a.isnan() & e.isnan())
    diff.masked_fill_(same, 0.0).nan_to_num_(nan=math.inf, posinf=math.inf)
    ref.masked_fill_(same, 0.0)
    return _largest(diff, ref, inf_rel=True)


def _largest(diff, ref, inf_rel: bool = False) -> tuple[float, float]:
    import torch

    rel = diff / ref
    rel = torch.where(ref == 0, 0.0, rel).nan_to_num_(nan=math.inf, posinf=math.inf) if inf_rel \
        else rel.nan_to_num_(nan=0.0, posinf=0.0)
    max_abs, max_rel = torch.stack((diff.max(), rel.max())).tolist()
    return max_abs, max_rel


class Tally:
    """The largest errors seen over a test's comparisons (None until one is added), and the
    tiers its comparisons met."""

    __slots__ = ("max_abs", "max_rel", "missed", "compared")

    def __init__(self):
        self.max_abs: float | None = None
        self.max_rel: float | None = None
        # the loosest tier a failed comparison met (LOOSE or BEYOND); None: none failed
        self.missed: str | None = None
        # the loosest tier a passing comparison that records no errors met (EXACT or
        # DEFAULT: suites/upstream/tiers.py); None: none such
        self.compared: str | None = None

    def add_miss(self, tier: str) -> None:
        if self.missed != BEYOND:
            self.missed = tier

    def add_tier(self, tier: str) -> None:
        if self.compared != DEFAULT:
            self.compared = tier

    def add(self, actual, expected) -> None:
        """Add the errors of every tensor pair of two structures; never raises."""
        try:
            found_pairs = list(pairs(actual, expected))
        except Exception:  # noqa: BLE001 - an odd structure: the assertion speaks for it
            return
        for a, e in found_pairs:
            found = tensor_errors(a, e)
            if found is None:
                continue
            self.max_abs = found[0] if self.max_abs is None else max(self.max_abs, found[0])
            self.max_rel = found[1] if self.max_rel is None else max(self.max_rel, found[1])

    def fields(self) -> dict:
        """``{"max_abs_err", "max_rel_err"}`` for an Outcome."""
        return {"max_abs_err": self.max_abs, "max_rel_err": self.max_rel}


# The tally of the test running in this process (the worker plugin clears it per test).
_current = Tally()


def record(actual, expected) -> None:
    """Add one device-vs-CPU comparison to the running test's errors."""
    _current.add(actual, expected)


def record_miss(tier: str) -> None:
    """A comparison of the running test failed; ``tier``: LOOSE when it was a near miss."""
    _current.add_miss(tier)


def record_tier(tier: str) -> None:
    """A comparison of the running test passed at ``tier`` (EXACT or DEFAULT) without its
    errors being recorded (an upstream test's assertEqual: suites/upstream/tiers.py)."""
    _current.add_tier(tier)


def clear() -> None:
    global _current
    _current = Tally()


def take() -> list | None:
    """[max abs, max rel, missed tier or "", passing tier or ""] of the running test (None:
    it compared nothing; the errors are None when only tiers were recorded), and clear."""
    tally = _current
    clear()
    if tally.max_abs is None and tally.missed is None and tally.compared is None:
        return None
    return [tally.max_abs, tally.max_rel, tally.missed or "", tally.compared or ""]


def tier_of(passed: bool, max_abs_err: float | None, missed: str = "", compared: str = "") -> str:
    """The tier a test met from what its comparisons left (``take()``'s fields): when no
    comparison failed (or the test passed anyway), EXACT if no compared value differed
    (``max_abs_err`` 0 and no DEFAULT among ``compared``), else DEFAULT; when one failed,
    LOOSE if every failed comparison was a near miss, else BEYOND; "" when the test compared
    nothing.  A failure none of whose comparisons failed (a leak found at teardown) keeps
    the tier its comparisons met: the breakdown counts it in no tier (core/tiers.py)."""
    if max_abs_err is None and not missed and not compared:
        return ""
    if passed or not missed:
        return DEFAULT if compared == DEFAULT or (max_abs_err or 0.0) != 0.0 else EXACT
    return LOOSE if missed == LOOSE else BEYOND


def outcome_tier(outcome: str, taken) -> str:
    """The tier of a test's record from its outcome and what ``take()`` gave (the worker's
    ``errors``; None or shorter lists from older workers are read as far as they go): a
    skipped or expected-to-fail test has none, whatever it compared."""
    if not taken or outcome in SKIPPED or outcome == XFAIL:
        return ""
    taken = list(taken) + [None, None, "", ""][len(taken):]
    return tier_of(outcome in PASSING, taken[0], taken[2] or "", taken[3] or "")


# PyTorch's default (rtol, atol) per dtype, as torch.testing.assert_close and
# TestCase.assertEqual apply them (tests/test_tolerance_tiers.py checks them against the
# installed torch); other dtypes compare exactly.  Here so that readers without torch (the
# breakdown, the site) can say how far a near miss was.
DEFAULT_TOLERANCES = {
    "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7),
    "complex32": (1e-3, 1e-5), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7),
}


def distance(dtype: str, max_abs_err: float | None, max_rel_err: float | None) -> float | None:
    """How far a failed test's comparisons were, in multiples of PyTorch's default tolerance
    for ``dtype``: min(max_abs_err / atol, max_rel_err / rtol), an upper bound of the factor
    the tolerance would have to grow by for every compared element to pass (an element fails
    when its difference exceeds atol + rtol * |expected|).  None when the dtype has no
    tolerance (exact dtypes, or none known) or the errors were not recorded."""
    tol = DEFAULT_TOLERANCES.get(dtype or "")
    if tol is None or max_abs_err is None:
        return None
    rtol, atol = tol
    found = max_abs_err / atol
    if max_rel_err is not None:
        found = min(found, max_rel_err / rtol)
    return found


# -- drift: per operator x dtype, baseline against build ------------------------------------------
def op_dtype_max(rows) -> dict[tuple[str, str], dict]:
    """(test_id, op, dtype, max_abs_err, max_rel_err) rows -> {(op, dtype): {"abs", "rel",
    "abs_test", "rel_test", "tests"}}: the largest errors per cell and the test that saw
    each.  Rows without an op or without errors are left out."""
    cells: dict[tuple[str, str], dict] = {}
    for test_id, op, dtype, abs_err, rel_err in rows:
        if not op or abs_err is None:
            continue
        rel_err = rel_err or 0.0
        cell = cells.get((op, dtype))
        if cell is None:
            cells[(op, dtype)] = {"abs": abs_err, "rel": rel_err, "abs_test": test_id, "rel_test": test_id, "tests": 1}
            continue
        cell["tests"] += 1
        if abs_err > cell["abs"]:
            cell["abs"], cell["abs_test"] = abs_err, test_id
        if rel_err > cell["rel"]:
            cell["rel"], cell["rel_test"] = rel_err, test_id
    return cells


def growth(old: float, new: float, floor: float) -> float:
    """How many times ``new`` is ``old``, both raised to ``floor`` first (errors at or below
    the floor are noise around zero, never a growth); 1.0 when both are at the floor."""
    old, new = max(old, floor), max(new, floor)
    if new == old:
        return 1.0
    if old == 0.0:
        return math.inf
    return new / old


def drift(old: dict, new: dict, min_abs: float = 0.0, min_rel: float = 0.0) -> list[dict]:
    """Per (op, dtype) of two builds: their largest errors over the tests that pass in both
    (``old``/``new``: {test_id: (op, dtype, outcome, max_abs_err, max_rel_err)}) and the
    growth of each (``growth`` with floors ``min_abs``/``min_rel``), largest growth first.
    ``test_id``: the build's test with the error that grew most."""
    both = [tid for tid, n in new.items() if n[2] in PASSED and tid in old and old[tid][2] in PASSED]
    before = op_dtype_max((tid, *old[tid][:2], *old[tid][3:]) for tid in both)
    after = op_dtype_max((tid, *new[tid][:2], *new[tid][3:]) for tid in both)
    out = []
    for key in before.keys() & after.keys():
        o, n = before[key], after[key]
        g_abs, g_rel = growth(o["abs"], n["abs"], min_abs), growth(o["rel"], n["rel"], min_rel)
        out.append({"op": key[0], "dtype": key[1], "tests": n["tests"],
                    "old_abs": o["abs"], "new_abs": n["abs"], "abs_growth": g_abs,
                    "old_rel": o["rel"], "new_rel": n["rel"], "rel_growth": g_rel,
                    "test_id": n["abs_test"] if g_abs >= g_rel else n["rel_test"]})
    out.sort(key=lambda d: (-max(d["abs_growth"], d["rel_growth"]), d["op"], d["dtype"]))
    return out
