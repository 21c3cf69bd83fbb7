"""What a builder returns, and the error for a model that cannot be built."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class Unbuildable(Exception):
    """The builder cannot construct the model (or its inputs) on CPU.

    The model is recorded as ``skip_eligibility`` with this message, never
    dropped: the set of unbuildable models is itself a coverage figure.
    """


@dataclass
class Built:
    model: Any                     # torch.nn.Module on CPU, seeded random weights
    inputs: dict                   # keyword arguments for model(**inputs), CPU tensors
    parameters: int = 0
    dtype: str = "float32"
    extra: dict = field(default_factory=dict)


def split_model_id(model_id: str) -> tuple[str, str]:
    """``hf/bert`` -> (``hf``, ``bert``); the family picks the builder."""
    family, sep, name = model_id.partition("/")
    if not sep or not family or not name:
        raise ValueError(f"model id {model_id!r} is not FAMILY/NAME (e.g. hf/bert, tv/resnet18)")
    return family, name
