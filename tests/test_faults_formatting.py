"""Faults: a test's exception that fights being printed (issue 34, item 3).

A test's exception is the test's own code: its ``__str__`` or ``__repr__`` may raise or
return a non-string, its message may be megabytes long or full of control characters
and lone surrogates, its id may hold bytes no terminal shows.  Before the fix the
classifier formatted the chain unguarded (``f"{e}"``): the worker hit INTERNALERROR and
the run ended there.  Here a real pytest run of tests/fixtures/runner/fx_unprintable.py,
serial and with two xdist workers: every test is recorded, the bad ones are ordinary
``fail`` / ``error`` / ``xfail`` outcomes, the tests after them pass.
"""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import FIXTURES, by_name, run_pytest  # noqa: E402

from torchconform.core.classify import (  # noqa: E402
    EXCEPTION_TEXT_LIMIT, classify_exception, exception_text, render_chain,
)
from torchconform.core.outcome import MESSAGE_LIMIT  # noqa: E402

FIXTURE = FIXTURES / "fx_unprintable.py"
UNPRINTABLE = {
    "test_str_raises": "StrRaises: <unprintable StrRaises: str() raised RuntimeError>",
    "test_str_and_repr_raise": "BothRaise: <unprintable BothRaise: str() raised RuntimeError>",
    "test_str_returns_a_number": "StrNotAString: <unprintable StrNotAString: str() raised TypeError>",
    "test_unrenderable_argument": "KeyError: <unprintable KeyError: str() raised RuntimeError>",
}


@pytest.mark.parametrize("workers", ["2", "0"])
def test_unprintable_exceptions_are_ordinary_outcomes_and_the_run_goes_on(tmp_path, workers):
    proc, run, outcomes = run_pytest([FIXTURE, "-n", workers, "--tc-device", "refdev", "-p", "no:randomly",
                                      "--tc-junit", tmp_path / "out.xml"], tmp_path)
    output = proc.stdout + proc.stderr
    assert "INTERNALERROR" not in output, output[-3000:]
    assert proc.returncode == 1, output[-3000:]   # tests failed; pytest itself did not
    got = by_name(outcomes)
    # every test of the file is recorded, once
    assert len(outcomes) == len(got) == 14, sorted(got)
    for name, message in UNPRINTABLE.items():
        assert (got[name].outcome, got[name].message) == ("fail", message), got[name]
    odd_id = next(n for n in got if n.startswith("test_binary_id["))
    assert (got[odd_id].outcome, got[odd_id].message) == ("fail", UNPRINTABLE["test_str_raises"])
    # the printable outer exception names itself; its unprintable cause did not stop the classifier
    assert (got["test_chain_with_an_unprintable_cause"].outcome,
            got["test_chain_with_an_unprintable_cause"].message) == ("fail", "AssertionError: outer, printable")
    huge = got["test_huge_message"]
    assert huge.outcome == "fail" and huge.message.startswith("AssertionError: huge xxx")
    assert len(huge.message) <= MESSAGE_LIMIT
    binary = got["test_binary_message"]
    assert binary.outcome == "fail" and binary.message.startswith("ValueError: \x00\x01\x02")
    setup = got["test_setup_raises_unprintable"]
    assert (setup.outcome, setup.message) == ("error", "BothRaise: <unprintable BothRaise: str() raised RuntimeError>")
    assert got["test_xfail_unprintable"].outcome == "xfail"
    assert [got[f"test_after[{i}]"].outcome for i in range(4)] == ["pass"] * 4
    # the run ended in order, and its JUnit file (no control characters allowed in XML) was written
    assert run.get("exitstatus") == 1
    junit = (tmp_path / "out.xml").read_text(encoding="utf-8")
    assert junit.count("<testcase") == 14 and "\x00" not in junit


class _Raises(Exception):
    def __str__(self):
        raise RuntimeError("no")


def test_rendering_a_chain_never_raises_and_stays_bounded():
    try:
        try:
            raise _Raises()
        except _Raises as inner:
            raise ValueError("y" * (EXCEPTION_TEXT_LIMIT * 4)) from inner
    except ValueError as outer:
        exc = outer
    text = render_chain(exc)
    first, second = text.split("\n")
    assert first == f"{__name__}._Raises: <unprintable _Raises: str() raised RuntimeError>"
    assert second.startswith("builtins.ValueError: yyy") and len(second) < EXCEPTION_TEXT_LIMIT + 100
    assert second.endswith(f"[{EXCEPTION_TEXT_LIMIT * 3:,} more characters]")
    assert exception_text(KeyboardInterrupt()) == ""
    verdict = classify_exception(_Raises())
    assert (verdict.outcome, verdict.message) == ("fail", "_Raises: <unprintable _Raises: str() raised RuntimeError>")
