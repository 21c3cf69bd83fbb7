"""Which operators and dtypes the perf suite times.

The operators are the ops suite's selection (suites/ops/selection.py): ``quick`` its fixed
quick set, ``full`` every OpInfo of ``op_db``, ``--tc-ops`` names; the dtypes: ``float32``
for ``quick`` (one dtype keeps the run short and comparable from build to build), every dtype
the operator supports on the device for ``full``.
"""
from __future__ import annotations

import torch

from torchconform.suites.ops.selection import selection_name

QUICK_DTYPES = (torch.float32,)


def perf_dtypes():
    """None (every supported dtype) for full; :data:`QUICK_DTYPES` otherwise."""
    return None if selection_name() == "full" else QUICK_DTYPES
