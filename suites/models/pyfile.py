"""Models defined by a Python file: ``py/<path>.py::<function>``.

The function returns ``(module, inputs_dict)``.  Used for fixture models
(ones that segfault, hang or exhaust memory) and for project-specific models
that are not in any zoo.
"""
from __future__ import annotations

import importlib.util
import os

from torchconform.suites.models.spec import Built, Unbuildable


def build(name: str, seed: int = 0) -> Built:
    import torch

    path, sep, func = name.rpartition("::")
    if not sep or not path.endswith(".py"):
        raise Unbuildable(f"py model {name!r} is not PATH.py::FUNCTION")
    if not os.path.isfile(path):
        raise Unbuildable(f"py model file {path} not found")
    spec = importlib.util.spec_from_file_location(f"tc_zoo_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(seed)
    try:
        model, inputs = getattr(module, func)()
    except Unbuildable:
        raise
    except Exception as exc:
        raise Unbuildable(f"construct: {type(exc).__name__}: {exc}") from exc
    return Built(model=model, inputs=dict(inputs), parameters=sum(p.numel() for p in model.parameters()))
