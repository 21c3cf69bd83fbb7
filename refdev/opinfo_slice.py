"""Run OpInfo sample inputs on a device and on CPU, and compare: a quick,
honest check of what the device computes (used by the overhead bench and for
checking that a profile's missing-op errors name the operator under test).
"""
from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass

_MISSING = re.compile(r"Could not run '(aten::[\w.]+)' with arguments from the '(\w+)' backend")


@dataclass
class SliceResult:
    op: str            # OpInfo name (with variant)
    status: str        # pass | fail | missing | error | no_samples
    missing_op: str = ""
    detail: str = ""
    seconds: float = 0.0


def opinfos(names=None, limit=None):
    """OpInfos from PyTorch's op_db, optionally restricted to ``names`` or the first ``limit``."""
    from torch.testing._internal.common_methods_invocations import op_db

    ops = [op for op in op_db if names is None or op.name in names or f"{op.name}.{op.variant_test_name}" in names]
    return ops[:limit] if limit else ops


def _to(value, device):
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, value)


def run_samples(op, device, dtype, compare_device=None, max_samples=None):
    """Run ``op``'s samples on ``device``; when compare_device is given, also there and compare."""
    import torch

    samples = list(op.sample_inputs(device, dtype, requires_grad=False))[:max_samples]
    for sample in samples:
        out = op(sample.input, *sample.args, **sample.kwargs)
        if compare_device is not None:
            ref_sample = _to(sample, compare_device)
            ref = op(ref_sample.input, *ref_sample.args, **ref_sample.kwargs)
            torch.testing.assert_close(_to(out, "cpu"), _to(ref, "cpu"), equal_nan=True, check_device=False,
                                       atol=1e-4, rtol=1e-4)
    return len(samples)


def label(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def run_slice(device: str, ops, dtype=None, compare: bool = True, max_samples=None) -> list[SliceResult]:
    import torch

    dtype = dtype or torch.float32
    results = []
    for op in ops:
        start = time.perf_counter()
        name = label(op)
        if dtype not in op.supported_dtypes("cpu"):
            results.append(SliceResult(name, "no_samples"))
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                n = run_samples(op, device, dtype, "cpu" if compare else None, max_samples)
            results.append(SliceResult(name, "pass" if n else "no_samples", seconds=time.perf_counter() - start))
        except NotImplementedError as exc:
            m = _MISSING.search(str(exc))
            status = "missing" if m else "error"
            results.append(SliceResult(name, status, m.group(1) if m else "", str(exc).splitlines()[0][:200],
                                       time.perf_counter() - start))
        except AssertionError as exc:
            results.append(SliceResult(name, "fail", detail=str(exc).splitlines()[0][:200],
                                       seconds=time.perf_counter() - start))
        except Exception as exc:  # noqa: BLE001 - every other error is a result too
            results.append(SliceResult(name, "error", detail=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                                       seconds=time.perf_counter() - start))
    return results
