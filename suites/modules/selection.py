"""Which ModuleInfos and dtypes the modules suite instantiates.

``full``: every ModuleInfo of the wheel's ``module_db``, every dtype it supports
on the device.

``quick`` (the default): the modules in :data:`QUICK_MODULES`, one or two per
family of ``module_db`` (linear, convolution, pooling, normalisation,
activation, recurrent, attention/transformer, embedding, padding, loss),
``float32`` only.  Restrict further with ``--tc-ops nn.Linear,nn.GRU``
(``TORCHCONFORM_OPS``; ModuleInfo names).
"""
from __future__ import annotations

import torch

from torchconform import settings
from torchconform.errors import UserError

QUICK_MODULES = {
    "linear": ["nn.Linear", "nn.Bilinear"],
    "conv": ["nn.Conv1d", "nn.Conv2d", "nn.ConvTranspose2d"],
    "pool": ["nn.MaxPool2d", "nn.AvgPool2d", "nn.AdaptiveAvgPool2d"],
    "norm": ["nn.BatchNorm2d", "nn.LayerNorm", "nn.GroupNorm"],
    "activation": ["nn.ReLU", "nn.GELU", "nn.Softmax", "nn.Hardswish"],
    "recurrent": ["nn.GRUCell", "nn.LSTM"],
    "attention": ["nn.MultiheadAttention", "nn.TransformerEncoderLayer"],
    "embedding": ["nn.Embedding"],
    "padding": ["nn.ReflectionPad2d", "nn.ZeroPad2d"],
    "loss": ["nn.CrossEntropyLoss", "nn.MSELoss", "nn.CTCLoss"],
}
QUICK_DTYPES = (torch.float32,)


def selection_name() -> str:
    name = settings.get("TORCHCONFORM_SELECTION")
    if name not in ("quick", "full"):
        raise UserError(f"unknown modules selection {name!r}; use quick or full")
    return name


def quick_names() -> list[str]:
    return [n for names in QUICK_MODULES.values() for n in names]


def select_modules(module_db) -> list:
    """ModuleInfos of the active selection, restricted by TORCHCONFORM_OPS if set."""
    wanted = {n.strip() for n in (settings.given("TORCHCONFORM_OPS") or "").split(",") if n.strip()}
    if selection_name() == "quick":
        names = set(quick_names())
        infos = [m for m in module_db if m.name in names]
    else:
        infos = list(module_db)
    if wanted:
        infos = [m for m in infos if m.name in wanted or m.formatted_name in wanted]
    return infos


def allowed_dtypes():
    return None if selection_name() == "full" else QUICK_DTYPES
