"""Per-test device check for the ops suite (loaded after the plugin set the device up).

Like PyTorch's CUDA memory-leak check, but for the device under test and always
on: after a passing test has released everything it made, the device must hold
no more memory than before.  A leak is a teardown error (outcome ``error``): the
op may compute correctly and still be unusable in a long-running job.
Devices without ``memory_allocated`` are not checked.
"""
import gc
import os
from pathlib import Path

import pytest


def _allocated(device_type):
    import torch

    mod = getattr(torch, device_type, None)
    fn = getattr(mod, "memory_allocated", None)
    if fn is None or device_type == "cpu":
        return None
    try:
        return sum(int(fn(i)) for i in range(int(mod.device_count())))
    except Exception:
        return None


@pytest.fixture(autouse=True)
def device_memory_check(request):
    device_type = os.environ.get("TORCHCONFORM_DEVICE")
    if not device_type:
        yield
        return
    before = _allocated(device_type)
    yield
    if before is None:
        return
    report = getattr(request.node, "_tc_call_report", None)
    if report is not None and not report.passed:
        return  # a failed test's traceback still holds its tensors: not a leak
    after = _allocated(device_type)
    if after is not None and after > before:
        # Only now pay for a full collection: compiled graphs may hold constants
        # on purpose and cycles may hold tensors until collected.
        import torch
        import torch._dynamo

        torch._dynamo.reset()
        gc.collect()
        after = _allocated(device_type)
    if after is not None and after > before:
        report_fn = getattr(getattr(torch, device_type, None), "leak_report", None)
        detail = report_fn() if callable(report_fn) else ""
        raise AssertionError(f"device memory leak: {after - before} bytes of {device_type} memory still allocated "
                             f"after the test ({before} before)" + (f"; {detail}" if detail else ""))


HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """The selection's per-op dtype rule (complex64 only for a few ops in quick), for
    this suite's tests only: the hook sees every item of the session, and other
    suites run in the same session keep their own complex64 tests."""
    from torchconform.suites.ops.selection import keep_test

    device_type = os.environ.get("TORCHCONFORM_DEVICE") or "cpu"
    kept, dropped = [], []
    for item in items:
        ours = Path(item.path).resolve().is_relative_to(HERE)
        (kept if not ours or keep_test(item.name, device_type) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item._tc_call_report = report
    return report
