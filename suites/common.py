"""Helpers every torchconform suite shares: the active profile, moving samples
between device and CPU, tolerances under the profile's dtype policy, the comparison
with CPU that records its numerical errors, and the
guard that turns a missing operator inside an expected-failure test into a
backend skip (unittest's expectedFailure would otherwise swallow it)."""
from __future__ import annotations

import functools
import unittest
from contextlib import contextmanager

import torch

from torchconform import settings
from torchconform.core.classify import (
    NOT_EXECUTED_PREFIX, classify_exception, render_chain,
)
from torchconform.collectors.dispatchwatch import host_phase
from torchconform.core import numeric
from torchconform.core.outcome import MISSING_OP
from torchconform.core.profile import load_profile


@functools.lru_cache(maxsize=None)
def active_profile():
    """The backend profile the plugin set up (TORCHCONFORM_PROFILE), else the device's."""
    path = settings.given("TORCHCONFORM_PROFILE") or settings.get("TORCHCONFORM_DEVICE")
    return load_profile(path)


def device_type() -> str:
    return settings.given("TORCHCONFORM_DEVICE") or active_profile().device


def compile_backend() -> str:
    return active_profile().compile_backend


def to_cpu(x):
    """Detached CPU copy of every tensor in a (nested) structure; other values unchanged."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, (list, tuple)):
        out = [to_cpu(v) for v in x]
        return type(x)(out) if not hasattr(x, "_fields") else type(x)(*out)
    if isinstance(x, dict):
        return {k: to_cpu(v) for k, v in x.items()}
    return x


def cpu_leaf(x):
    """CPU copy that is a fresh autograd leaf where the original required grad."""
    if isinstance(x, torch.Tensor):
        y = x.detach().cpu()
        return y.requires_grad_(x.requires_grad) if (x.is_floating_point() or x.is_complex()) else y
    if isinstance(x, (list, tuple)):
        return type(x)(cpu_leaf(v) for v in x) if not hasattr(x, "_fields") else type(x)(*[cpu_leaf(v) for v in x])
    if isinstance(x, dict):
        return {k: cpu_leaf(v) for k, v in x.items()}
    return x


def tensors_in(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors_in(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors_in(v)]
    return []



def scalar_loss(outputs):
    """Sum of every output tensor that requires grad (complex ones through their real view):
    one scalar to differentiate, so gradients can be compared with CPU.  None when nothing
    requires grad."""
    total = None
    for t in tensors_in(outputs):
        if not t.requires_grad:
            continue
        part = torch.view_as_real(t).sum() if t.is_complex() else t.sum()
        total = part if total is None else total + part
    return total

def comparison_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype whose tolerances apply: the profile may document a downcast
    (Neuron runs float64 as float32), so compare at the precision it promises."""
    policy = active_profile().dtype_policy
    if policy.get("downcast_tolerances") is False:
        return dtype    # declared, but the profile keeps the requested dtype's tolerances
    downcast = policy.get("downcast") or {}
    name = str(dtype).replace("torch.", "")
    target = downcast.get(name)
    return getattr(torch, target) if target else dtype


def tolerances(dtype: torch.dtype) -> dict:
    """atol/rtol for comparing device results with CPU (None: assertEqual's defaults)."""
    cmp = comparison_dtype(dtype)
    if cmp != dtype:
        from torch.testing._comparison import default_tolerances
        rtol, atol = default_tolerances(cmp)
        return {"atol": atol, "rtol": rtol}
    return {}


def assert_close_to_cpu(test: unittest.TestCase, actual, expected, **kwargs) -> None:
    """``test.assertEqual(actual, expected, **kwargs)`` for a device result (already on CPU)
    against the CPU reference, its errors added to the test's outcome first
    (torchconform/core/numeric.py: the failing comparison's too); a failing comparison also
    records whether it was a near miss (its tolerance tier)."""
    with host_phase():   # both sides are on CPU: nothing here for the device observer
        numeric.record(actual, expected)
        try:
            test.assertEqual(actual, expected, **kwargs)
        except AssertionError:
            numeric.record_miss(missed_tier(test, actual, expected, kwargs))
            raise


def missed_tier(test: unittest.TestCase, actual, expected, kwargs: dict) -> str:
    """LOOSE when every compared pair lies within ``numeric.LOOSE_FACTOR`` times the
    tolerance this comparison was held to (given, or PyTorch's default for the dtypes,
    raised by the test's own precision overrides, as ``assertEqual`` does), else BEYOND."""
    from torch.testing._comparison import default_tolerances

    factor = numeric.LOOSE_FACTOR
    compared = False   # nothing numeric to compare (strings, structures that differ): not a near miss
    try:
        for a, e in numeric.pairs(actual, expected):
            compared = True
            a, e = torch.as_tensor(a), torch.as_tensor(e)
            rtol, atol = (kwargs["rtol"], kwargs["atol"]) if kwargs.get("atol") is not None \
                else default_tolerances(a, e)
            rtol = max(rtol, getattr(test, "rel_tol", 0.0) or 0.0)
            atol = max(atol, getattr(test, "precision", 0.0) or 0.0)
            torch.testing.assert_close(a, e, rtol=rtol * factor, atol=atol * factor, equal_nan=True,
                                       check_device=False, check_layout=False, check_stride=False)
    except Exception:  # noqa: BLE001 - further off, or not comparable: not a near miss
        return numeric.BEYOND
    return numeric.LOOSE if compared else numeric.BEYOND


def expecting_failure(test: unittest.TestCase) -> bool:
    outcome = getattr(test, "_outcome", None)
    return bool(getattr(outcome, "expecting_failure", False))


@contextmanager
def missing_op_guard(test: unittest.TestCase):
    """Inside an expected-failure test, a missing operator is still a missing
    operator: re-raise it as a skip carrying the dispatcher's text, so it is
    classified skip_backend/missing_op instead of disappearing as xfail."""
    try:
        yield
    except unittest.SkipTest:
        raise
    except Exception as exc:
        if expecting_failure(test) and classify_exception(exc, active_profile()).kind == MISSING_OP:
            raise unittest.SkipTest(render_chain(exc)) from exc
        raise


def check_executed(result, device: str) -> None:
    """Compile-only or placeholder outputs are never a pass: every tensor a
    compiled function returns must be a real tensor on the device under test."""
    for t in tensors_in(result):
        fake = type(t).__name__ in ("FakeTensor", "FunctionalTensor") or t.device.type == "meta"
        if fake or t.device.type != torch.device(device).type:
            raise unittest.SkipTest(
                f"{NOT_EXECUTED_PREFIX} compiled output is a {type(t).__name__} on {t.device}, not a computed "
                f"{device} tensor"
            )


def name_device_test_base() -> None:
    """Give PyTorch's PrivateUse1 test base its backend name before a suite
    instantiates its tests, so generated classes read ``TestCommonREFDEV`` /
    ``TestCommonNEURON`` (as upstream names them) rather than ``...PRIVATEUSE1``.

    PyTorch sets the name in ``PrivateUse1TestBase.setUpClass``, which runs only
    when a test first runs; doing it here keeps test ids identical whichever
    suite or file a process instantiates first.  A no-op without a renamed
    PrivateUse1 backend (CPU, CUDA runs)."""
    import torch.testing._internal.common_device_type as cdt

    if torch._C._get_privateuse1_backend_name() == "privateuse1":
        return
    for base in cdt.device_type_test_bases:
        if base.__name__ == "PrivateUse1TestBase" and base.device_type == "privateuse1":
            base.setUpClass()


@contextmanager
def fresh_compiles():
    """dynamo's caches and counters cleared before and after: each probe or timing
    counts only its own compiles, and no compiled graph keeps device memory past the test (the
    plugin's leak check would call that a leak)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    try:
        yield counters
    finally:
        torch._dynamo.reset()
        counters.clear()
