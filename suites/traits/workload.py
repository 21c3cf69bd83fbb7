"""The eager fallback probe's workload: operators young backends commonly run on the
CPU, each called once on the device (the operators: ``core.traitnotes.EAGER_FALLBACK_OPS``,
which refdev's ground truth, ``refdev.expected_traits``, reads too)."""
from __future__ import annotations

from torchconform.core.traitnotes import EAGER_FALLBACK_OPS


def eager_fallback_workload(dev: str) -> dict:
    """{operator: a call of it on ``dev``}, one per EAGER_FALLBACK_OPS."""
    import torch

    x = torch.tensor([3.0, -1.0, 2.0, 5.0, 0.5, -4.0], device=dev)
    calls = {
        "aten::nonzero": lambda: torch.nonzero(x > 0),
        "aten::cumsum": lambda: torch.cumsum(x, 0),
        "aten::cumprod": lambda: torch.cumprod(x, 0),
        "aten::sort": lambda: torch.sort(x),
        "aten::topk": lambda: torch.topk(x, 2),
        "aten::median": lambda: torch.median(x),
        "aten::kthvalue": lambda: torch.kthvalue(x, 2),
        "aten::_unique2": lambda: torch.unique(x),
        "aten::masked_select": lambda: torch.masked_select(x, x > 1),
    }
    assert tuple(calls) == EAGER_FALLBACK_OPS
    return calls
