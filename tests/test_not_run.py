"""Not-run accounting (issue 33, 4c): what a run's selection, --ops, -k or a spec left out is
counted per reason, once per run (serial or under xdist), stored per run and shown in the
breakdown, and never counted as a result."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torchconform.core import not_run
from torchconform.core.breakdown import breakdown_of_counts, format_breakdown, pass_rate

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import FIXTURES, OPS_SUITE, child_env, run_pytest  # noqa: E402


def _reasons(run: dict) -> dict:
    return {reason: e["count"] for reason, e in (run.get("not_run") or {}).items()}


# -- the shapes -----------------------------------------------------------------------------

def test_a_build_takes_each_reasons_largest_count_per_suite_and_adds_suites():
    rows = [  # (suite, run, reason, count, detail): two shards of ops saw the same selection
        ("ops", 1, "selection", 26000, "quick"), ("ops", 1, "-k", 10, "grad"),
        ("ops", 2, "selection", 26000, "quick"), ("ops", 2, "-k", 12, "grad"),
        ("modules", 3, "selection", 40, "quick"),
    ]
    got = not_run.of_build(rows)
    assert got == {"total": 26052, "reasons": {"selection": {"count": 26040, "detail": "quick"},
                                               "-k": {"count": 12, "detail": "grad"}}}


def test_not_run_is_a_line_of_the_breakdown_and_never_a_result():
    b = breakdown_of_counts("b1", [("pass", "", "", 3), ("fail", "", "", 1)])
    rate, total = pass_rate(b), b["total"]
    b["not_run"] = not_run.of_run({"-k": {"count": 7, "detail": "add", "example": "t::x"},
                                   "selection": {"count": 90, "detail": "quick", "example": ""}})
    assert (pass_rate(b), b["total"]) == (rate, total)   # the denominator's other side only
    text = format_breakdown(b)
    assert "  not run        97   (selection 90 [quick], -k 7 [add])" in text.splitlines()
    del b["not_run"]
    assert "not run" not in format_breakdown(b)          # a reader that does not know says nothing


# -- counted where tests are collected --------------------------------------------------------

@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_keyword_and_deselect_are_counted_once(tmp_path, workers):
    args = [FIXTURES / "fx_not_run.py", "--tc-device", "cpu", "-k", "alpha",
            "--deselect", "tests/fixtures/runner/fx_not_run.py::test_alpha[0]", *workers]
    proc, run, outcomes = run_pytest(args, tmp_path)
    assert len(outcomes) == 4, proc.stdout[-2000:]
    assert _reasons(run) == {"-k": 3, "--deselect": 1}
    assert run["not_run"]["-k"]["detail"] == "alpha"
    assert run["not_run"]["-k"]["example"].endswith("test_beta[0]")


def test_the_ops_selection_counts_what_it_never_instantiated(tmp_path):
    """What quick leaves out of two OpInfos, plus what quick runs of them, is what full runs:
    the suite's count of tests it never instantiated agrees with PyTorch's instantiation."""
    def left_out(selection):
        args = [OPS_SUITE, "--tc-device", "cpu", "--tc-ops", "cat,gather", "--tc-selection", selection,
                "-k", "no_such_test"]
        proc, run, outcomes = run_pytest(args, tmp_path, jsonl=f"{selection}.jsonl", check_rc=(5,))
        assert not outcomes, proc.stdout[-2000:]
        return _reasons(run)

    quick, full = left_out("quick"), left_out("full")
    assert quick["--ops"] == full["--ops"] > 20000       # every other OpInfo of op_db
    assert "selection" not in full and quick["selection"] > 0
    assert quick["selection"] + quick["-k"] == full["-k"]


def test_a_stored_build_shows_its_not_run(tmp_path):
    from torchconform.db.opening import open_store
    from torchconform.db.read_builds import summary

    db = tmp_path / "t.db"
    args = [FIXTURES / "fx_not_run.py", "--tc-device", "cpu", "-k", "beta", "--tc-db", db, "--tc-build", "nr"]
    run_pytest(args, tmp_path)
    b = summary(open_store(f"sqlite:///{db}"), "nr")
    assert b["total"] == 3 and b["not_run"] == {"total": 5, "reasons": {"-k": {"count": 5, "detail": "beta"}}}
