"""Compare a model's results on the device under test with the CPU reference.

Tolerances per dtype live in ``data/tolerances.yaml`` (documented there);
gradients and compiled runs get the multipliers named in that file.
"""
from __future__ import annotations

import functools

from torchconform.suites.models.data_files import load_yaml


@functools.lru_cache(maxsize=None)
def _table() -> dict:
    return load_yaml("tolerances.yaml")


def tolerance(dtype, kind: str = "eval") -> tuple[float, float]:
    """(rtol, atol) for results of ``dtype`` from a run of ``kind`` (eval/train/compile)."""
    table = _table()
    name = str(dtype).replace("torch.", "")
    entry = table.get(name, table["float32"])
    scale = 1.0
    if kind == "train":
        scale *= table["grad_scale"]
    if kind == "compile":
        scale *= table["compile_scale"]
    return entry["rtol"] * scale, entry["atol"] * scale


def flatten(value, prefix: str = "out") -> dict:
    """Every tensor inside ``value`` (ModelOutput, dict, tuple, list) by a stable path."""
    import torch

    found: dict = {}
    if isinstance(value, torch.Tensor):
        found[prefix] = value
    elif isinstance(value, dict) or hasattr(value, "to_tuple") and hasattr(value, "keys"):
        for key in value.keys():
            found.update(flatten(value[key], f"{prefix}.{key}"))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found.update(flatten(item, f"{prefix}[{i}]"))
    return found


def assert_same(actual: dict, expected: dict, kind: str, tally=None) -> None:
    """Raise AssertionError naming the first tensor that differs beyond tolerance.
    ``tally`` (core.numeric.Tally): gets the errors of every tensor compared."""
    import torch

    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    if missing or extra:
        raise AssertionError(f"result structure differs from CPU: missing {missing[:3]}, extra {extra[:3]}")
    for key in expected:
        exp, act = expected[key], actual[key]
        if tally is not None:
            tally.add(act, exp)
        if not exp.is_floating_point() and not exp.is_complex():
            if not torch.equal(act.detach().cpu(), exp.detach().cpu()):
                raise AssertionError(f"{key}: integer result differs from CPU")
            continue
        rtol, atol = tolerance(exp.dtype, kind)
        try:
            torch.testing.assert_close(act.detach().cpu(), exp.detach().cpu(), rtol=rtol, atol=atol,
                                       equal_nan=True, check_device=False)
        except AssertionError as exc:
            detail = " ".join(str(exc).split())
            raise AssertionError(f"{key} differs from CPU (rtol={rtol:g}, atol={atol:g}): {detail}") from None
