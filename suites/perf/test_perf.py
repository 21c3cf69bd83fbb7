"""Per-operator performance: one test per OpInfo operator x dtype of the selection, timing the
operator on the device and on CPU in the same test (measure.py; docs/perf.md).

``test_perf_compiled`` times the same forward call through ``torch.compile`` (compiled.py), its
first call including the compile (``TORCHCONFORM_PERF_VARIANTS``, default ``eager,compiled``).

A passing test's message is its ``perf:`` note; its rows (forward, and backward where the op
and dtype have a gradient) travel on the outcome to the store (torchconform/core/perf.py).  A missing
operator is a backend skip naming it, as in the ops suite; forward rows measured before a
backward that hits a missing operator are kept.
"""
import unittest

import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, run_tests

from torchconform.core import perf
from torchconform.core.notes import note
from torchconform.errors import UserError
from torchconform.suites.common import active_profile, compile_backend, missing_op_guard, name_device_test_base
from torchconform.suites.ops.samples import cpu_copy, device_failure_verdict, device_samples
from torchconform.suites.ops.selection import full_name, select_ops
from torchconform.suites.perf.measure import (
    backward_row, device_sync, forward_row, intra_op_threads, representative, warm_calls,
)
from torchconform.suites.perf.compiled import compiled_row, cpu_backend, variants
from torchconform.suites.perf.selection import perf_dtypes

_OPS = select_ops(op_db)
try:
    _VARIANTS, _VARIANTS_ERROR = variants(), None
except UserError as exc:   # each compiled test fails with the one-line cause
    _VARIANTS, _VARIANTS_ERROR = ("eager", "compiled"), exc


def _has_backward(op, device, dtype) -> bool:
    if not op.supports_autograd:
        return False
    try:
        return dtype in op.supported_backward_dtypes(torch.device(device).type)
    except Exception:  # noqa: BLE001 - an OpInfo that cannot say: no backward row
        return False


def _measured(fn, op, cpu_sample):
    """``fn()``; a failure that is not the device's and that the CPU shares (the sample does
    not apply to this op on CPU either) is a skip, not a result."""
    try:
        return fn()
    except unittest.SkipTest:
        raise
    except Exception as exc:
        if device_failure_verdict(exc) is not None:
            raise
        try:
            op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
        except Exception as cpu_exc:
            raise unittest.SkipTest(f"the representative sample cannot be computed on CPU either "
                                    f"({type(cpu_exc).__name__}); nothing to time") from None
        raise


class TestPerf(TestCase):
    if "eager" in _VARIANTS:
        @ops(_OPS, allowed_dtypes=perf_dtypes())
        def test_perf(self, device, dtype, op):
            self._eager(device, dtype, op)

    def _eager(self, device, dtype, op):
        calls, sync = warm_calls(), device_sync(device)
        name, dt = full_name(op), str(dtype).replace("torch.", "")
        rows = []
        try:
            with intra_op_threads(), missing_op_guard(self):
                _, sample = representative(device_samples(op, device, dtype))
                if sample is None:
                    raise unittest.SkipTest(f"{name} has no sample inputs for {dt}")
                cpu_sample = cpu_copy(sample, device)
                rows.append(_measured(lambda: forward_row(name, dt, op, sample, cpu_sample, sync, calls),
                                      op, cpu_sample))
                perf.record(rows[-1])
                del sample, cpu_sample
                if _has_backward(op, device, dtype):
                    _, grad_sample = representative(device_samples(op, device, dtype, requires_grad=True))
                    if grad_sample is not None:
                        cpu_grad = cpu_copy(grad_sample, device, leaf=True)
                        row = _measured(lambda: backward_row(name, dt, op, grad_sample, cpu_grad, sync, calls),
                                        op, cpu_grad)
                        if row is not None:
                            rows.append(row)
                            perf.record(row)
        finally:
            if rows:
                note(perf.note_text(rows))

    if "compiled" in _VARIANTS:
        @ops(_OPS, allowed_dtypes=perf_dtypes())
        def test_perf_compiled(self, device, dtype, op):
            if _VARIANTS_ERROR is not None:
                raise _VARIANTS_ERROR
            calls, sync, backend = warm_calls(), device_sync(device), compile_backend()
            name, dt = full_name(op), str(dtype).replace("torch.", "")
            with intra_op_threads(), missing_op_guard(self):
                _, sample = representative(device_samples(op, device, dtype))
                if sample is None:
                    raise unittest.SkipTest(f"{name} has no sample inputs for {dt}")
                cpu_sample = cpu_copy(sample, device)
                row, counts = _measured(lambda: compiled_row(name, dt, op, sample, cpu_sample, sync, calls, backend,
                                                             active_profile()), op, cpu_sample)
            perf.record(row)
            note(perf.note_text([row]) + f" (backend={backend} cpu_backend={cpu_backend(backend)} "
                                         f"graphs={counts['graphs']} graph_breaks={counts['graph_breaks']})")


name_device_test_base()
instantiate_device_type_tests(TestPerf, globals())

if __name__ == "__main__":
    run_tests()
