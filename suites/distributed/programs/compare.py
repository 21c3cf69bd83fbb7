"""Shared by the programs: per-rank data and the device-vs-CPU check."""
from __future__ import annotations

import torch


def data(ctx, shape, seed: int = 0, dtype=None, rank: int | None = None) -> torch.Tensor:
    """A CPU tensor that differs per rank (``rank``: another rank's), the same on every run
    (integers for integer dtypes)."""
    dtype = dtype or ctx.dtype
    g = torch.Generator().manual_seed(1000 * seed + (ctx.rank if rank is None else rank))
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


def same(ctx, device_result, cpu_result, what: str, dtype=None) -> None:
    """The device's result equals the CPU's (tolerances from the profile's dtype policy)."""
    if isinstance(device_result, (list, tuple)):
        assert len(device_result) == len(cpu_result), f"{what}: {len(device_result)} results on the device, " \
                                                      f"{len(cpu_result)} on CPU"
        for i, (d, c) in enumerate(zip(device_result, cpu_result)):
            same(ctx, d, c, f"{what}[{i}]", dtype)
        return
    actual = device_result.detach().cpu()
    try:
        torch.testing.assert_close(actual, cpu_result.detach(), **ctx.tolerances(dtype or cpu_result.dtype))
    except AssertionError as exc:
        raise AssertionError(f"rank {ctx.rank}: {what} on {ctx.device} differs from CPU (gloo): {exc}") from None


def model_seed(seed: int = 0) -> None:
    torch.manual_seed(seed)
