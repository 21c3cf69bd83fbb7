"""Tolerance tiers (issue 33 item 2): the tightest tier a comparison test met, from what
its comparisons left: exact, within PyTorch's tolerance (default), a near miss within ten
times it (loose), or beyond."""
import pytest
import torch
from torch.testing._internal.common_utils import TestCase

from torchconform.core import numeric
from torchconform.suites.common import assert_close_to_cpu, missed_tier


class _Case(TestCase):
    def runTest(self):
        pass


@pytest.fixture
def case():
    numeric.clear()
    yield _Case()
    numeric.clear()


def test_a_bitwise_equal_result_is_exact(case):
    ref = torch.tensor([1.0, -2.5, float("nan")])
    assert_close_to_cpu(case, ref.clone(), ref)
    abs_err, rel_err, missed = numeric.take()
    assert (abs_err, missed) == (0.0, "") and numeric.tier_of(True, abs_err, missed) == numeric.EXACT


def test_a_result_within_pytorch_tolerance_is_default(case):
    ref = torch.tensor([1.0, 2.0, 3.0])
    assert_close_to_cpu(case, ref + 1e-7, ref)
    abs_err, _, missed = numeric.take()
    assert abs_err > 0 and numeric.tier_of(True, abs_err, missed) == numeric.DEFAULT


def test_float64_computed_in_float32_is_a_near_miss_and_wrong_math_is_not(case):
    ref = torch.linspace(0.1, 3.0, 50, dtype=torch.float64)
    as_float32 = ref * (1 + 4e-7)     # a few float32 ulps off: float32 arithmetic, right math
    with pytest.raises(AssertionError):
        assert_close_to_cpu(case, as_float32, ref)
    abs_err, _, missed = numeric.take()
    assert numeric.tier_of(False, abs_err, missed) == numeric.LOOSE
    with pytest.raises(AssertionError):
        assert_close_to_cpu(case, ref * 1.01, ref)                # wrong by 1 %
    abs_err, _, missed = numeric.take()
    assert numeric.tier_of(False, abs_err, missed) == numeric.BEYOND


def test_one_far_comparison_makes_the_test_beyond(case):
    ref = torch.linspace(0.1, 3.0, 50, dtype=torch.float64)
    for actual in (ref * 1.01, ref * (1 + 4e-7)):
        with pytest.raises(AssertionError):
            assert_close_to_cpu(case, actual, ref)
    assert numeric.take()[2] == numeric.BEYOND


def test_the_loose_tier_follows_the_tolerance_the_comparison_was_held_to(case):
    ref = torch.tensor([1.0, 2.0])
    # given 1e-3: an error of 5e-3 is within 10x, 5e-2 is not
    assert missed_tier(case, ref + 5e-3, ref, {"atol": 1e-3, "rtol": 0.0}) == numeric.LOOSE
    assert missed_tier(case, ref + 5e-2, ref, {"atol": 1e-3, "rtol": 0.0}) == numeric.BEYOND
    # a shape mismatch is not comparable: not a near miss
    assert missed_tier(case, torch.ones(3), torch.ones(2), {}) == numeric.BEYOND


def test_a_test_that_compared_nothing_has_no_tier():
    assert numeric.tier_of(True, None) == "" and numeric.tier_of(False, None, "loose") == ""
