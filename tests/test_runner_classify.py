"""The one classifier: live exception chains and their rendered forms agree."""
import sys
import traceback
import unittest
from pathlib import Path

import pytest

from torchconform.core.classify import (
    SKIPLIST_PREFIX, classify_exception, classify_text, exception_chain,
)
from torchconform.core.profile import load_profile

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))

DISPATCH = ("Could not run 'aten::_cdist_forward' with arguments from the 'refdev' backend. This could be because "
            "the operator doesn't exist for this backend, or was omitted during the selective/custom build process.")


@pytest.fixture(scope="module")
def refdev():
    return load_profile("refdev")


def ops_wrapper_chain():
    """What PyTorch's @ops test_wrapper raises: a plain Exception carrying the
    dispatcher text and the sample repro, with the NotImplementedError as __cause__."""
    try:
        try:
            raise NotImplementedError(DISPATCH)
        except NotImplementedError as e:
            raise Exception(f"{e}\n\nCaused by sample input at index 3: SampleInput(input=Tensor[size=(5,)])") from e
    except Exception as exc:
        return exc


def compare_chain(explicit: bool):
    """PyTorch's comparison helpers: 'Comparing TensorOrArrayPair(...) resulted in the
    unexpected exception above', chained by __cause__ or by __context__."""
    try:
        try:
            raise NotImplementedError(DISPATCH.replace("_cdist_forward", "isclose"))
        except NotImplementedError as error:
            msg = ("Comparing\n\nTensorOrArrayPair(id=(), actual=..., expected=...)\n\nresulted in the unexpected "
                   "exception above. If you are a user and see this message during normal operation please file an issue")
            if explicit:
                raise RuntimeError(msg) from error
            raise RuntimeError(msg)
    except RuntimeError as exc:
        return exc


def test_ops_wrapper_chain_live_and_rendered(refdev):
    exc = ops_wrapper_chain()
    live = classify_exception(exc, refdev)
    assert (live.outcome, live.kind, live.missing_op) == ("skip_backend", "missing_op", "aten::_cdist_forward")
    rendered = "".join(traceback.format_exception(exc))
    text = classify_text(rendered, refdev, status="failure")
    assert (text.outcome, text.kind, text.missing_op) == ("skip_backend", "missing_op", "aten::_cdist_forward")


@pytest.mark.parametrize("explicit", [True, False])
def test_tensor_or_array_pair_chain(refdev, explicit):
    exc = compare_chain(explicit)
    chain = exception_chain(exc)
    assert len(chain) == 2
    for verdict in (classify_exception(exc, refdev),
                    classify_text("".join(traceback.format_exception(exc)), refdev, status="failure")):
        assert verdict.outcome == "skip_backend" and verdict.missing_op == "aten::isclose"


def test_suppressed_context_is_not_read(refdev):
    try:
        try:
            raise NotImplementedError(DISPATCH)
        except NotImplementedError:
            raise AssertionError("values differ") from None
    except AssertionError as exc:
        verdict = classify_exception(exc, refdev)
    assert verdict.outcome == "fail" and verdict.missing_op == ""


def test_root_cause_operator_wins(refdev):
    text = (DISPATCH.replace("_cdist_forward", "first.out") + "\n\nThe above exception was the direct cause of the "
            "following exception:\n\n" + DISPATCH.replace("_cdist_forward", "second"))
    assert classify_text(text, refdev).missing_op == "aten::first.out"


def test_other_backend_is_not_this_devices_missing_op(refdev):
    text = "NotImplementedError: Could not run 'aten::add.out' with arguments from the 'CPU' backend."
    assert classify_text(text, refdev).outcome == "fail"
    # ...but the generic profile (ingest without a profile) accepts any backend.
    assert classify_text(text).missing_op == "aten::add.out"
    # Autograd/Quantized keys of the device are the device.
    text2 = "Could not run 'aten::mul.Tensor' with arguments from the 'AutogradPrivateUse1' backend."
    assert classify_text(text2, refdev).missing_op == "aten::mul.Tensor"


@pytest.mark.parametrize("reason", [
    "Only runs on cuda",
    "\"add_cpu\" not implemented for 'Half'",
    "Skipped! Op doesn't support out= kwarg.",
    "test doesn't currently work on the privateuse1 backend",
])
def test_pytorch_skip_reasons_are_eligibility(refdev, reason):
    v = classify_text(reason, refdev, status="skipped")
    assert v.outcome == "skip_eligibility" and v.message


def test_skip_reason_with_dispatcher_text_is_missing_op(refdev):
    # skip_exception_type(NotImplementedError) in PyTorch's helpers: "not implemented: <dispatcher text>"
    v = classify_text("not implemented: " + DISPATCH, refdev, status="skipped")
    assert (v.outcome, v.kind, v.missing_op) == ("skip_backend", "missing_op", "aten::_cdist_forward")


def test_torchconform_prefixes_and_statuses(refdev):
    v = classify_text(f"{SKIPLIST_PREFIX} refdev-042 flaky on refdev", refdev, status="skipped")
    assert (v.outcome, v.kind, v.skiplist_entry) == ("skip_backend", "skiplist", "refdev-042")
    assert classify_text("torchconform unsupported dtype: float64", refdev, status="skipped").kind == "unsupported_dtype"
    assert classify_text("torchconform not executed: FakeTensor", refdev, status="skipped").kind == "not_executed"
    assert classify_text("numerics", refdev, status="skipped", type_name="pytest.xfail").outcome == "xfail"
    assert classify_text("Unexpected success", refdev, status="failure").outcome == "xpass"
    assert classify_text("[XPASS(strict)] stale", refdev, status="failure").outcome == "xpass"
    assert classify_text("worker 'gw1' crashed while running 'a.py::t'", refdev, status="failure").outcome == "crash"
    assert classify_text("torchconform timeout: a.py::t exceeded 5 s", refdev, status="error").outcome == "timeout"
    assert classify_text("E   RuntimeError: boom", refdev, status="error").outcome == "error"
    assert classify_text("", refdev, status="passed").outcome == "pass"


def test_live_skip_and_timeout_exceptions(refdev):
    from torchconform.core.classify import TestTimeout
    assert classify_exception(unittest.SkipTest("Only runs on cuda"), refdev).outcome == "skip_eligibility"
    assert classify_exception(TestTimeout("x exceeded 1 s"), refdev).outcome == "timeout"


def test_convolution_overrideable_is_missing_op(refdev):
    text = ("Exception: convolution_overrideable not implemented. You are likely triggering this with tensor "
            "backend other than CPU/CUDA/MKLDNN, if this is intended, please use TORCH_LIBRARY_IMPL to override")
    assert classify_text(text, refdev).missing_op == "aten::convolution_overrideable"


def test_rendered_pytest_junit_agrees_with_live(tmp_path):
    """Run the fixture file with pytest's own --junitxml and the plugin: classifying
    the rendered JUnit text gives the same outcome as the live classification."""
    import junitparser
    from runner_support import FIXTURES, by_name, run_pytest

    xml = tmp_path / "pytest.xml"
    _, _, outcomes = run_pytest([FIXTURES / "fx_outcomes.py", "--tc-device", "cpu", f"--junitxml={xml}"], tmp_path)
    live = by_name(outcomes)
    cpu = load_profile("cpu")
    checked = 0
    for suite in junitparser.JUnitXml.fromfile(str(xml)):
        for case in suite:
            name = case.name
            if name not in live:
                continue
            result = case.result[0] if case.result else None
            if result is None:
                continue
            status = type(result).__name__.lower()  # failure / error / skipped
            text = (result.message or "") + "\n" + (result.text or "")
            verdict = classify_text(text, cpu, status=status, type_name=result.type or "")
            expected = live[name]
            if expected.outcome == "xpass" and status == "skipped":
                continue  # pytest writes a non-strict XPASS as a pass-like skip; the plugin knows better
            assert verdict.outcome == expected.outcome, (name, verdict, expected)
            assert verdict.missing_op == expected.missing_op, name
            checked += 1
    assert checked >= 8
