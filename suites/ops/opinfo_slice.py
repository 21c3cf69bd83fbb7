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


def _on_cpu(result):
    """A result (a tensor, or tuples and lists of them) with every tensor on CPU."""
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, result)


def run_samples(op, device, dtype, compare_cpu=False, max_samples=None):
    """Run ``op``'s samples on ``device``; with ``compare_cpu``, also each sample's CPU
    copy on CPU, and compare.  The copy is made before the device runs (an in-place op
    changes its sample), and is on CPU entirely: tensors copied, every argument naming
    the device renamed ``cpu`` (samples.cpu_copy), so the reference never runs on the
    device and compares the device with itself."""
    # torch and the samples module load when samples run, not when this module is imported
    import torch

    from torchconform.suites.ops.samples import check_reference_on_cpu, cpu_copy

    samples = list(op.sample_inputs(device, dtype, requires_grad=False))[:max_samples]
    for sample in samples:
        ref_sample = cpu_copy(sample, device) if compare_cpu else None
        out = op(sample.input, *sample.args, **sample.kwargs)
        if ref_sample is not None:
            ref = op(ref_sample.input, *ref_sample.args, **ref_sample.kwargs)
            check_reference_on_cpu(ref, label(op))
            torch.testing.assert_close(_on_cpu(out), ref, equal_nan=True, check_device=False,
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
                n = run_samples(op, device, dtype, compare, max_samples)
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
