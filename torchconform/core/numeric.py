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

from torchconform.core.outcome import PASSED

FIELDS = ("max_abs_err", "max_rel_err")

# Tolerance tiers (docs/classification.md, "Tolerance tiers"): the tightest a test's
# comparisons met.  ``exact``: every compared value equal to the CPU's; ``default``: within
# PyTorch's own tolerance for the op and dtype (a pass); ``loose``: outside it but within
# LOOSE_FACTOR times it (a failure that is a near miss: float64 run as float32 lands here,
# wrong math does not); ``beyond``: further off, or not comparable at all.
EXACT, DEFAULT, LOOSE, BEYOND = "exact", "default", "loose", "beyond"
TIERS = (EXACT, DEFAULT, LOOSE, BEYOND)
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
    """The largest errors seen over a test's comparisons (None until one is added)."""

    __slots__ = ("max_abs", "max_rel", "missed")

    def __init__(self):
        self.max_abs: float | None = None
        self.max_rel: float | None = None
        # the loosest tier a failed comparison met (LOOSE or BEYOND); None: none failed
        self.missed: str | None = None

    def add_miss(self, tier: str) -> None:
        if self.missed != BEYOND:
            self.missed = tier

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


def clear() -> None:
    global _current
    _current = Tally()


def take() -> list | None:
    """[max abs, max rel, missed tier or ""] of the running test (None: it compared
    nothing), and clear."""
    tally = _current
    clear()
    return None if tally.max_abs is None else [tally.max_abs, tally.max_rel, tally.missed or ""]


def tier_of(passed: bool, max_abs_err: float | None, missed: str = "") -> str:
    """The tier a test met from what its comparisons left: a pass is EXACT when no compared
    value differed, else DEFAULT; a failure whose failed comparison was a near miss is
    LOOSE, another BEYOND; "" when the test compared nothing with the CPU."""
    if max_abs_err is None:
        return ""
    if passed:
        return EXACT if max_abs_err == 0 else DEFAULT
    return LOOSE if missed == LOOSE else BEYOND


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
