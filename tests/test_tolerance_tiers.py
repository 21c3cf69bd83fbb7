"""Tolerance tiers (issue 33 item 2): the tightest tier a comparison test met, from what
its comparisons left: exact, within PyTorch's tolerance (default), a near miss within ten
times it (loose), or beyond."""
import sys
from pathlib import Path

import pytest
import torch
from torch.testing._internal.common_utils import TestCase

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import REPO, by_name, child_env, run_pytest  # noqa: E402

from torchconform.core import numeric, tiers  # noqa: E402
from torchconform.core.breakdown import breakdown, format_breakdown  # noqa: E402
from torchconform.core.outcome import Outcome  # noqa: E402
from torchconform.db import export, read_builds, read_rows, values  # noqa: E402
from torchconform.db.ingest import ingest  # noqa: E402
from torchconform.db.junit.read import parse_junit  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402
from torchconform.suites.common import assert_close_to_cpu, missed_tier  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "tiers" / "fx_tiers.py"


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
    abs_err, rel_err, missed, compared = numeric.take()
    assert (abs_err, missed, compared) == (0.0, "", "") and numeric.tier_of(True, abs_err, missed) == numeric.EXACT


def test_a_result_within_pytorch_tolerance_is_default(case):
    ref = torch.tensor([1.0, 2.0, 3.0])
    assert_close_to_cpu(case, ref + 1e-7, ref)
    abs_err, _, missed, _ = numeric.take()
    assert abs_err > 0 and numeric.tier_of(True, abs_err, missed) == numeric.DEFAULT


def test_float64_computed_in_float32_is_a_near_miss_and_wrong_math_is_not(case):
    ref = torch.linspace(0.1, 3.0, 50, dtype=torch.float64)
    as_float32 = ref * (1 + 4e-7)     # a few float32 ulps off: float32 arithmetic, right math
    with pytest.raises(AssertionError):
        assert_close_to_cpu(case, as_float32, ref)
    abs_err, _, missed, _ = numeric.take()
    assert numeric.tier_of(False, abs_err, missed) == numeric.LOOSE
    with pytest.raises(AssertionError):
        assert_close_to_cpu(case, ref * 1.01, ref)                # wrong by 1 %
    abs_err, _, missed, _ = numeric.take()
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
    # a shape mismatch is not comparable: not a near miss; nor is a comparison of no numbers
    assert missed_tier(case, torch.ones(3), torch.ones(2), {}) == numeric.BEYOND
    assert missed_tier(case, [1, 2], [1], {}) == numeric.BEYOND and missed_tier(case, "a", "b", {}) == numeric.BEYOND


def test_a_test_that_compared_nothing_has_no_tier():
    assert numeric.tier_of(True, None) == "" and numeric.tier_of(False, None) == ""
    # a failed comparison whose values could not be compared still compared something
    assert numeric.tier_of(False, None, "beyond") == numeric.BEYOND


# -- the record: its tier from the outcome and what the comparisons left --------------------------
def test_the_record_tier_follows_the_outcome():
    assert numeric.outcome_tier("pass", [0.0, 0.0, "", ""]) == numeric.EXACT
    assert numeric.outcome_tier("pass_fallback", [1e-7, 1e-7, "", ""]) == numeric.DEFAULT
    assert numeric.outcome_tier("pass", [None, None, "", "default"]) == numeric.DEFAULT   # tier-only comparisons
    assert numeric.outcome_tier("fail", [1e-6, 4e-7, "loose", ""]) == numeric.LOOSE
    # a failure none of whose comparisons failed (a leak at teardown) keeps their tier, counted in none
    assert numeric.outcome_tier("error", [0.0, 0.0, "", ""]) == numeric.EXACT
    assert tiers.tier_counts([("error", "exact", 3), ("pass", "exact", 1)])["exact"] == 1
    assert numeric.outcome_tier("pass", [0.0, 0.0]) == numeric.EXACT          # an older worker's two fields
    for outcome in ("skip_eligibility", "skip_backend", "xfail"):
        assert numeric.outcome_tier(outcome, [1e-6, 4e-7, "loose", ""]) == ""
    assert numeric.outcome_tier("pass", None) == ""
    with pytest.raises(ValueError, match="unknown tolerance tier"):
        Outcome("t", "pass", tier="close")


def test_default_tolerances_are_pytorchs():
    from torch.testing._comparison import default_tolerances

    for name, (rtol, atol) in numeric.DEFAULT_TOLERANCES.items():
        assert default_tolerances(getattr(torch, name)) == (rtol, atol), name
    assert numeric.distance("float64", 4e-4, 4e-7) == pytest.approx(4.0)      # the smaller of the two ratios
    assert numeric.distance("int64", 1.0, 1.0) is None and numeric.distance("float32", None, None) is None


# -- the breakdown -----------------------------------------------------------------------------------
def _records():
    return [Outcome("t::exact", "pass", tier="exact", max_abs_err=0.0, max_rel_err=0.0),
            Outcome("t::default", "pass_fallback", tier="default", max_abs_err=1e-7, max_rel_err=1e-7),
            Outcome("t::near", "fail", op="exp", dtype="float64", kind="trait:float64_as_float32", tier="loose",
                    max_abs_err=5e-2, max_rel_err=5e-7),
            Outcome("t::far", "fail", op="sin", dtype="float64", tier="beyond", max_abs_err=1.4, max_rel_err=70.0),
            Outcome("t::xfail", "xfail", tier=""), Outcome("t::none", "pass")]


def test_breakdown_counts_passes_by_tier_and_near_misses_apart():
    b = breakdown("b", _records())
    assert b["tiers"] == {"exact": 1, "default": 1, "loose": 1, "beyond": 1}
    assert b["near_misses"] == [{"test_id": "t::near", "op": "exp", "dtype": "float64",
                                 "kind": "trait:float64_as_float32", "max_abs_err": 5e-2, "max_rel_err": 5e-7,
                                 "distance": pytest.approx(5.0)}]
    text = format_breakdown(b)
    assert "passed: exact 1, within PyTorch tolerance 1" in text
    assert "near misses (within 10x the tolerance each comparison was held to) 1, further off 1" in text
    assert "t::near (exp float64): <= 5x default tolerance" in text
    # a build without tiers prints as before
    assert "tolerance tiers" not in format_breakdown(breakdown("b", [Outcome("t", "pass")]))


# -- a real run: the record, the store, JUnit, summary --json ------------------------------------------
@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tiers")
    db, junit = tmp / "store.db", tmp / "run.xml"
    proc, run, outcomes = run_pytest([FIXTURE, "--tc-device", "refdev", "--tc-db", db, "--tc-build", "tiers",
                                      "--tc-junit", junit, "--tc-trait-reruns", "0"], tmp,
                                     env=child_env(TORCHCONFORM_REFDEV_PROFILE="young-backend"))
    return str(db), junit, by_name(outcomes)


def test_refdev_records_exact_near_miss_and_beyond(fixture_run):
    _, _, got = fixture_run
    assert {n: (o.outcome, o.tier) for n, o in got.items()} == {
        "test_add_float32_exact": ("pass", "exact"), "test_exp_float64_near_miss": ("fail", "loose"),
        "test_sin_against_cos_wrong": ("fail", "beyond"), "test_compares_nothing": ("pass", "")}


def test_the_tier_round_trips_through_the_store_junit_and_summary(fixture_run, tmp_path):
    db, junit, live = fixture_run
    want = {n: (o.tier, o.max_abs_err) for n, o in live.items()}
    with open_store(db) as store:
        stored = {o.name: (o.tier, o.max_abs_err) for o in read_rows.iter_outcomes(store, "tiers")}
        assert stored == want
        assert dict(read_rows.latest_rows(store, "tiers", ("name", "tier")))["test_add_float32_exact"] == "exact"
        b = read_builds.summary(store, "tiers")
        ingest(store, [str(junit)], "from-junit")
        again = {o.name: (o.tier, o.max_abs_err) for o in read_rows.iter_outcomes(store, "from-junit")}
        out = tmp_path / "export.xml"
        with open(out, "w") as fh:
            export.export(store, "tiers", "junit", fh)
    assert again == want
    assert {o.name: o.tier for o in parse_junit(str(out))} == {n: t for n, (t, _) in want.items()}
    assert b["tiers"] == {"exact": 1, "default": 0, "loose": 1, "beyond": 1}
    assert [m["test_id"].split("::")[-1] for m in b["near_misses"]] == ["test_exp_float64_near_miss"]


def test_a_value_without_a_tier_keeps_its_digest():
    value = ("pass", "", "", "", "", "refdev:0", "", None)
    assert values.digest((*value, "")) == values.digest(value) != values.digest((*value, "exact"))


# -- upstream files: TestCase.assertEqual records the tier ---------------------------------------------
def test_upstream_assert_equal_records_a_tier(case):
    from torchconform.suites.upstream import tiers as upstream_tiers

    assert upstream_tiers.install() and upstream_tiers.install()          # once, whatever the calls
    ref = torch.tensor([1.0, float("nan"), 3.0])
    case.assertEqual(ref.clone(), ref)
    case.assertEqual([1, 2], (1, 2))
    assert numeric.take() == [None, None, "", numeric.EXACT]
    case.assertEqual(ref + 1e-7, ref)
    assert numeric.outcome_tier("pass", numeric.take()) == numeric.DEFAULT
    wide = torch.linspace(0.1, 3.0, 50, dtype=torch.float64)
    with pytest.raises(AssertionError):
        case.assertEqual(wide * (1 + 4e-7), wide)
    taken = numeric.take()
    assert numeric.outcome_tier("fail", taken) == numeric.LOOSE and taken[1] == pytest.approx(4e-7)
    with pytest.raises(AssertionError):
        case.assertEqual("a", "b")
    assert numeric.outcome_tier("fail", numeric.take()) == numeric.BEYOND
    case.assertNotEqual(wide * 2, wide)      # its inner assertEqual fails on purpose: nothing recorded
    assert numeric.take() is None


# -- the site: the build page's tier counts and near misses, escaped ----------------------------------
def test_the_build_page_shows_tiers_and_near_misses_escaped(tmp_path):
    import json

    from torchconform.dashboard.site import build_site

    hostile = "t.py::C::test_<b>bold</b>_float64"
    with open_store(str(tmp_path / "s.db")) as store:
        store.ensure_build("b1", device="refdev")
        run = store.start_run("b1", suite="ops")
        store.add_outcomes(run, [*_records(),
                                 Outcome(hostile, "fail", op="<i>op</i>", dtype="float64", tier="loose",
                                         max_abs_err=2e-6, max_rel_err=2e-7)])
        build_site(store, tmp_path / "site")
    page = next((tmp_path / "site" / "builds").glob("*/index.html"))
    html = page.read_text()
    assert "Tolerance tiers" in html and "Near misses (2, closest first)" in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html and "<i>op</i>" not in html
    near = json.loads((page.parent / "near-misses.json").read_text())
    assert [(r["test"], r["dtype"], r["distance"]) for r in near] == [
        (hostile, "float64", "<= 2x default tolerance"), ("t::near", "float64", "<= 5x default tolerance")]
    counts = json.loads((page.parent / "tiers.json").read_text())
    assert {r["tier"]: r["tests"] for r in counts} == {"exact": 1, "default": 1, "loose": 2, "beyond": 1}
