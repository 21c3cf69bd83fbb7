"""Tolerance tiers for upstream PyTorch test files (docs/classification.md, "Tolerance tiers").

PyTorch's own tests compare with ``TestCase.assertEqual``, not with torchconform's
``assert_close_to_cpu``; ``install()`` wraps that method once per worker process (the
upstream plugin calls it) so that every call adds to the running test's tally
(core/numeric.py):

* a passing call whose values are all equal: ``exact``; another passing call: ``default``
  (the tier only: ``numeric.record_tier``);
* a failing call: ``loose`` when every compared pair lies within ``numeric.LOOSE_FACTOR``
  times the tolerance it was held to (``suites.common.missed_tier``), else ``beyond``; and
  the failing call's errors (``numeric.record``), so that a near miss has a distance.

``assertNotEqual`` (an assertEqual expected to fail) records nothing, nor does a call made
inside another.

A passing call records no errors: its expected value is whatever the test chose (the CPU's
result, a NumPy reference, a constant, another result on the same device), not always the
CPU reference that ``max_abs_err``/``max_rel_err`` stand for, and those feed the
``numeric_drift`` gate rule and the per operator x dtype error tables, which compare like
with like.  A failed test never enters those (they read passes only), and its one failing
comparison is what its distance is measured on.  Skipping the error computation on the
common path also keeps the wrapper's cost to one equality check per call.
"""
from __future__ import annotations

import functools
import math

from torchconform.core import numeric

_MARK = "_torchconform_tiers"
# Calls of the wrapper in progress (a call inside another, assertNotEqual's for one, is the
# outer call's business).
_depth = 0


def install() -> bool:
    """Wrap ``TestCase.assertEqual`` of torch.testing._internal.common_utils (once; True when
    it is wrapped now or already was)."""
    try:
        from torch.testing._internal.common_utils import TestCase
    except ImportError:
        return False
    original = TestCase.assertEqual
    if getattr(original, _MARK, False):
        return True

    @functools.wraps(original)
    def assertEqual(self, x, y, *args, **kwargs):
        global _depth
        if _depth:
            return original(self, x, y, *args, **kwargs)
        _depth += 1
        try:
            original(self, x, y, *args, **kwargs)
        except AssertionError:
            _record_miss(self, x, y, kwargs)
            raise
        finally:
            _depth -= 1
        numeric.record_tier(numeric.EXACT if equal(x, y) else numeric.DEFAULT)

    not_equal = TestCase.assertNotEqual

    @functools.wraps(not_equal)
    def assertNotEqual(self, *args, **kwargs):
        # its assertEqual is expected to fail: neither a miss nor errors of the test
        global _depth
        _depth += 1
        try:
            return not_equal(self, *args, **kwargs)
        finally:
            _depth -= 1

    setattr(assertEqual, _MARK, True)
    TestCase.assertEqual = assertEqual
    TestCase.assertNotEqual = assertNotEqual
    return True


def _record_miss(test, x, y, kwargs: dict) -> None:
    """A failed call's errors and tier; never raises (the test's own failure is the verdict)."""
    try:
        # suites.common loads torch and the dispatch observer: this wrapper is installed before they are needed
        from torchconform.suites.common import missed_tier

        numeric.record(x, y)
        numeric.record_miss(missed_tier(test, x, y, kwargs))
    except Exception:  # noqa: BLE001 - an odd pair: not comparable, so not a near miss
        numeric.record_miss(numeric.BEYOND)


def equal(x, y) -> bool:
    """Every value of two structures that assertEqual found equal is bitwise the same (NaN
    equal to NaN): one ``torch.equal`` per tensor pair in the usual case.  Values that
    ``numeric.pairs`` does not take (strings, types, None) were compared for equality by
    assertEqual itself."""
    try:
        return all(_leaf_equal(a, e) for a, e in numeric.pairs(x, y))
    except Exception:  # noqa: BLE001 - cannot tell: not exact
        return False


def _leaf_equal(a, e) -> bool:
    import torch

    if not isinstance(a, torch.Tensor) and not isinstance(e, torch.Tensor):
        return a == e or (_is_nan(a) and _is_nan(e))
    a = a.detach() if isinstance(a, torch.Tensor) else torch.as_tensor(a)
    e = e.detach() if isinstance(e, torch.Tensor) else torch.as_tensor(e)
    if a.shape != e.shape or a.layout != torch.strided or e.layout != torch.strided:
        return False
    if a.device != e.device:
        a, e = a.cpu(), e.cpu()
    if a.dtype != e.dtype:
        common = torch.promote_types(a.dtype, e.dtype)
        a, e = a.to(common), e.to(common)
    if torch.equal(a, e):
        return True
    if not (a.is_floating_point() or a.is_complex()):
        return False
    return bool(((a == e) | (a.isnan() & e.isnan())).all())


def _is_nan(v) -> bool:
    if isinstance(v, complex):
        return math.isnan(v.real) or math.isnan(v.imag)
    return isinstance(v, float) and math.isnan(v)
