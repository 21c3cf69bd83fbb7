"""The ops suite: every OpInfo of the wheel's ``op_db`` on the device under test,
compared with CPU, in PyTorch's device-generic style.

Run it through torchconform (``torchconform run --suite ops`` or
``pytest suites/ops --tc-device refdev``); without ``--tc-device`` PyTorch
instantiates it for CPU only.

Variants (the test name after ``test_``), all in class ``TestCommon`` so that
OpInfo's own skips and expected failures for ``TestCommon`` apply:

* ``compare_cpu``: forward, every sample, device result vs CPU result;
* ``compare_cpu_grad``: gradients of the summed outputs w.r.t. every input that
  requires grad, device vs CPU (differentiable ops and dtypes only);
* ``out``: the ``out=`` variant on the first sample, with empty outputs to resize;
* ``noncontiguous_samples``: non-contiguous device inputs vs contiguous CPU ones;
* ``error_inputs``: OpInfo's ``error_inputs`` (inputs PyTorch rejects) on the device, each
  held to what CPU does with its twin: accepting one CPU rejects is a fail
  (``error_inputs.py``; one test per OpInfo that has them, no dtype);
* ``compile_compare_cpu``: ``torch.compile`` with the profile's compile backend on
  the first sample; a passing outcome's message is
  ``compiled: backend=B graphs=N graph_breaks=N recompiles=N``
  (``torchconform.core.notes.parse_compile_note`` reads it back).

Samples are made on the device (``--tc-samples-on cpu``: on CPU, then copied); the CPU
reference runs on a copy with every tensor on CPU and every argument naming the device
(``device=`` of factories) renamed ``cpu``, and a device failure in it is never taken for
a sample CPU cannot compute (``samples.py``).

Every comparison goes through ``suites.common.assert_close_to_cpu``, which records the
largest absolute and relative error against CPU on the test's outcome
(``max_abs_err``/``max_rel_err``, torchconform/core/numeric.py).

Classes are named after the device (``TestCommonREFDEV``, ``TestCommonNEURON``,
``TestCommonCPU``), as upstream PyTorch names them once the PrivateUse1 base knows
its backend name.
"""
import unittest
import warnings

import torch
from torch.testing._internal.common_device_type import OpDTypes, instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, run_tests

from torchconform.collectors.dispatchwatch import host_phase
from torchconform.core.classify import NOT_EXECUTED_PREFIX, TestTimeout
from torchconform.core.notes import compile_note, note
from torchconform.suites.common import (
    active_profile, assert_close_to_cpu, check_executed, compile_backend, missing_op_guard,
    name_device_test_base, scalar_loss, tensors_in, to_cpu, tolerances,
)
from torchconform.suites.ops.samples import (
    check_reference_on_cpu, cpu_copy, device_failure_verdict, device_samples, noncontiguous,
)
from torchconform.suites.ops import error_inputs
from torchconform.suites.ops.selection import allowed_dtypes, select_ops
from torchconform import settings
from torchconform.collectors.not_run import uncollected
from torchconform.suites.ops.selection import left_out

_OPS = select_ops(op_db)
_OPS_WITH_ERROR_INPUTS = [op for op in _OPS if error_inputs.has_error_inputs(op)]


def _cpu_failed(test, exc: Exception) -> None:
    """Note a sample PyTorch cannot compute on CPU (the sample does not apply), unless the
    failure is the device's (a missing operator...): that is never a CPU-reference failure."""
    if isinstance(exc, TestTimeout) or device_failure_verdict(exc) is not None:
        raise exc
    test._cpu_failures.append(type(exc).__name__)


def _cpu_reference(test, op, cpu_sample):
    """The CPU result, or None when PyTorch itself cannot compute this sample on CPU."""
    try:
        with host_phase():   # the CPU sample names no device (samples.cpu_copy)
            result = op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
    except Exception as exc:
        _cpu_failed(test, exc)
        return None
    check_reference_on_cpu(result, op.name)
    return result


def _samples_with_cpu_reference(test, op, device, dtype):
    """(device sample, its CPU copy, the CPU result) for every sample PyTorch can compute on CPU."""
    for sample in device_samples(op, device, dtype):
        cpu_sample = cpu_copy(sample, device)
        expected = _cpu_reference(test, op, cpu_sample)
        if expected is not None:
            yield sample, cpu_sample, expected

def _no_sample_ran(test):
    kinds = ", ".join(sorted(set(test._cpu_failures))) or "no samples"
    raise unittest.SkipTest(f"no sample input could be computed on CPU ({kinds}); nothing to compare")


def _empty_out_like(x, device):
    if isinstance(x, torch.Tensor):
        return torch.empty(0, dtype=x.dtype, device=device)
    if isinstance(x, (tuple, list)):
        return tuple(_empty_out_like(v, device) for v in x)
    raise unittest.SkipTest(f"out= variant returns {type(x).__name__}, not tensors")




def _check_not_placeholder(caught):
    """A compile backend that says it returned placeholders (the profile's
    ``not_executed_patterns``) did not compute: skip_backend/not_executed,
    decided before the comparison, so neither a pass nor a fail is claimed.
    Other warnings are re-emitted so fallback evidence is not lost."""
    profile = active_profile()
    for w in caught:
        text = str(w.message)
        if profile.matches_not_executed(text):
            raise unittest.SkipTest(f"{NOT_EXECUTED_PREFIX} {text}")
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


class TestCommon(TestCase):
    def setUp(self):
        super().setUp()
        self._cpu_failures = []

    @ops(_OPS, allowed_dtypes=allowed_dtypes("compare_cpu"))
    def test_compare_cpu(self, device, dtype, op):
        ran = 0
        with missing_op_guard(self):
            for sample, cpu_sample, expected in _samples_with_cpu_reference(self, op, device, dtype):
                actual = op(sample.input, *sample.args, **sample.kwargs)
                actual = sample.output_process_fn_grad(actual)
                expected = cpu_sample.output_process_fn_grad(expected)
                assert_close_to_cpu(self, to_cpu(actual), expected, **tolerances(dtype))
                ran += 1
        if not ran:
            _no_sample_ran(self)

    @ops(_OPS, dtypes=OpDTypes.supported_backward, allowed_dtypes=allowed_dtypes("compare_cpu_grad"))
    def test_compare_cpu_grad(self, device, dtype, op):
        if not op.supports_autograd:
            raise unittest.SkipTest(f"{op.name} does not support autograd")
        ran = 0
        with missing_op_guard(self):
            for sample in device_samples(op, device, dtype, requires_grad=True):
                cpu_sample = cpu_copy(sample, device, leaf=True)
                dev_all = tensors_in([sample.input, sample.args, sample.kwargs])
                cpu_all = tensors_in([cpu_sample.input, cpu_sample.args, cpu_sample.kwargs])
                idx = [i for i, t in enumerate(dev_all) if t.requires_grad and t.is_leaf]
                if not idx:
                    continue
                try:
                    with host_phase():
                        cpu_loss = scalar_loss(cpu_sample.output_process_fn_grad(
                            op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)))
                        if cpu_loss is None:
                            continue
                        expected = torch.autograd.grad(cpu_loss, [cpu_all[i] for i in idx], allow_unused=True)
                except Exception as exc:
                    _cpu_failed(self, exc)
                    continue
                check_reference_on_cpu(list(expected), op.name)
                loss = scalar_loss(sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs)))
                actual = torch.autograd.grad(loss, [dev_all[i] for i in idx], allow_unused=True)
                assert_close_to_cpu(self, to_cpu(list(actual)), list(expected), **tolerances(dtype))
                ran += 1
        if not ran:
            _no_sample_ran(self)

    @ops(_OPS, allowed_dtypes=allowed_dtypes("out"))
    def test_out(self, device, dtype, op):
        if not op.supports_out:
            raise unittest.SkipTest("Skipped! Op doesn't support out= kwarg.")
        with missing_op_guard(self):
            for sample, cpu_sample, expected in _samples_with_cpu_reference(self, op, device, dtype):
                out = _empty_out_like(expected, device)
                op(sample.input, *sample.args, out=out, **sample.kwargs)
                assert_close_to_cpu(self, to_cpu(out), expected, **tolerances(dtype))
                return  # the first computable sample is the out= check, as upstream does
        _no_sample_ran(self)

    if _OPS_WITH_ERROR_INPUTS:   # @ops refuses an empty list (--tc-ops naming only ops without error inputs)
        @ops(_OPS_WITH_ERROR_INPUTS, dtypes=OpDTypes.none)
        def test_error_inputs(self, device, op):
            with missing_op_guard(self):
                got = error_inputs.check(op, device, op.name, lambda exc: device_failure_verdict(exc) is not None)
                error_inputs.verdict(got)

    @ops(_OPS, allowed_dtypes=allowed_dtypes("noncontiguous_samples"))
    def test_noncontiguous_samples(self, device, dtype, op):
        ran = 0
        with missing_op_guard(self):
            for sample, cpu_sample, expected in _samples_with_cpu_reference(self, op, device, dtype):
                nc = noncontiguous(sample)
                actual = nc.output_process_fn_grad(op(nc.input, *nc.args, **nc.kwargs))
                assert_close_to_cpu(self, to_cpu(actual), cpu_sample.output_process_fn_grad(expected),
                                    **tolerances(dtype))
                ran += 1
        if not ran:
            _no_sample_ran(self)

    @ops(_OPS, allowed_dtypes=allowed_dtypes("compile_compare_cpu"))
    def test_compile_compare_cpu(self, device, dtype, op):
        import torch._dynamo
        from torch._dynamo.utils import counters

        backend = compile_backend()
        with missing_op_guard(self):
            for sample, cpu_sample, expected in _samples_with_cpu_reference(self, op, device, dtype):
                torch._dynamo.reset()
                counters.clear()

                def fn(*args, **kwargs):
                    return op(*args, **kwargs)

                compiled = torch.compile(fn, backend=backend, dynamic=False)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    actual = compiled(sample.input, *sample.args, **sample.kwargs)
                _check_not_placeholder(caught)
                check_executed(actual, device)
                assert_close_to_cpu(self, to_cpu(sample.output_process_fn_grad(actual)),
                                    cpu_sample.output_process_fn_grad(expected), **tolerances(dtype))
                note(compile_note(backend, counters["stats"]["unique_graphs"],
                                  sum(counters["graph_break"].values()), len(counters["recompiles"])))
                return  # one sample: compile time dominates
        _no_sample_ran(self)


name_device_test_base()
instantiate_device_type_tests(TestCommon, globals())


def _count_left_out():
    """Tell the plugin how many tests the selection left out before collection (not-run
    accounting, collectors/not_run.py), for the device the suite runs on."""
    device = settings.given("TORCHCONFORM_DEVICE")
    if not device:
        return   # plain pytest: nobody records
    device_type = torch.device(device).type
    for reason, (count, detail) in left_out(op_db, device_type).items():
        uncollected(reason, count, detail)


_count_left_out()

if __name__ == "__main__":
    run_tests()
