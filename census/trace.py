"""What a composite operator's decomposition reaches, traced on meta tensors.

A composite kernel (CompositeImplicitAutograd / CompositeExplicitAutograd) is
device-generic C++: calling the device's computed kernel with meta tensors runs
the same decomposition the device would run, and a TorchDispatchMode records
the operators it reaches (CompositeImplicitAutograd sub-operators are decomposed
further before the mode sees them, so what it records is what the device key
is really asked for).  Arguments are made up from the schema; an operator whose
made-up arguments it rejects is "not traced" (reached = None), never guessed.
"""
from __future__ import annotations

import warnings

# Small shapes that most shape checks accept; tried in order until one traces.
SHAPES = ((2, 3), (3,), (2, 3, 4, 4))

# Name-based choices for required arguments the schema types alone cannot pick.
_STR_BY_NAME = {"reduce": "sum", "approximate": "none", "reduction": "mean", "mode": "reflect",
                "padding_mode": "zeros", "interpolation_mode": "bilinear", "indexing": "ij",
                "rounding_mode": "trunc", "side": "left", "padding": "same"}
_INTLIST_BY_NAME = {"size": [2, 3], "shape": [2, 3], "stride": [3, 1], "dims": [0], "dim": [0],
                    "output_size": [2, 2], "kernel_size": [1, 1], "normalized_shape": [3], "sizes": [2, 3]}


# Operators whose only effect is outside the tensors (printing, asserting on data):
# nothing to learn from a made-up call.
NOT_TRACED = frozenset({"aten::_print"})


class _Unsupported(Exception):
    """The schema asks for an argument we do not make up (Dimname, Storage...)."""


def _overload(name: str):
    import torch

    base, _, overload = name[len("aten::"):].partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _value(arg, shape):
    import torch

    text = str(arg.real_type)   # "Tensor", "Optional[Tensor]", "List[int]", "SymInt", "ScalarType"...
    if text.startswith("Optional["):
        return None
    if text == "Tensor":
        return torch.empty(shape, device="meta")
    if text in ("List[Tensor]", "List[Optional[Tensor]]"):
        return [torch.empty(shape, device="meta"), torch.empty(shape, device="meta")]
    if text in ("int", "SymInt"):
        return 0 if "dim" in arg.name else 1
    if text in ("List[int]", "List[SymInt]"):
        return list(_INTLIST_BY_NAME.get(arg.name, [1]))
    simple = {"float": 1.0, "List[float]": [1.0], "bool": False, "List[bool]": [False], "Scalar": 1,
              "number": 1, "ScalarType": torch.float32, "Layout": torch.strided,
              "Device": torch.device("meta"), "MemoryFormat": torch.contiguous_format}
    if text in simple:
        return simple[text]
    if text == "str":
        return _STR_BY_NAME.get(arg.name, "none")
    raise _Unsupported(text)


def _arguments(schema, shape):
    args, kwargs = [], {}
    for arg in schema.arguments:
        # Defaults keep the common path; a device argument is pinned to meta so that
        # factories never allocate real memory.
        if arg.name == "device" and "Device" in str(arg.real_type):
            value = __import__("torch").device("meta")
        elif arg.has_default_value():
            continue
        else:
            value = _value(arg, shape)
        if arg.kwarg_only:
            kwargs[arg.name] = value
        else:
            args.append(value)
    return args, kwargs


def _recorder():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.add(func.name())
            return func(*args, **(kwargs or {}))

    return Recorder


def trace_composite(name: str, backend_key: str) -> list[str] | None:
    """Operators the device's composite kernel for ``name`` reaches (sorted), or None
    when no made-up argument set runs it."""
    import torch

    if name in NOT_TRACED:
        return None
    try:
        op = _overload(name)
    except (AttributeError, RuntimeError):
        return None
    keyset = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, backend_key))
    recorder = _recorder()
    for shape in SHAPES:
        try:
            args, kwargs = _arguments(op._schema, shape)
        except _Unsupported:
            return None
        mode = recorder()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with mode:
                    op.redispatch(keyset, *args, **kwargs)
        except Exception:  # made-up arguments rejected: try the next shape
            continue
        return sorted(mode.seen - {name})
    return None
