"""refdev's own ``torch.compile`` backend, named ``refdev``: ``aot_eager`` underneath.

It emulates a young backend's graph compiler (Neuron's compiles a graph ahead of
time and can do so without an attached device).  For operators listed in the
profile trait ``compile_placeholder_ops`` the "compiler cannot lower" the
graph: the compiled function then never executes on the device, returns
zero-filled placeholder tensors of the right shape, dtype, stride and device,
and warns with :data:`PLACEHOLDER_WARNING` in its text.  Such a result must never
count as a pass; the runner recognises the warning through the backend
profile's ``not_executed_patterns`` (skip_backend/not_executed).  Graphs
without those operators run exactly as under ``aot_eager``.
"""
from __future__ import annotations

import warnings

from torchconform.refdev.profiles import base_name

BACKEND_NAME = "refdev"
# Fixed text the backend profile's not_executed_patterns recognise.
PLACEHOLDER_WARNING = "compiled without device execution; outputs are placeholders"

_state = {"profile": "", "ops": ()}


def _op_name(target) -> str:
    """``aten::atan2`` / ``aten::add.Tensor`` style name of an FX node target, or "" when
    the target is not an operator overload (or, defensively, its name has no namespace)."""
    import torch

    if isinstance(target, torch._ops.OpOverload):
        name = target.name()
        return name if "::" in name else ""
    return ""


def placeholder_ops_in(gm) -> list[str]:
    """Operators of ``gm`` (an aten-level FX graph) that the profile says cannot be lowered."""
    wanted = set(_state["ops"])
    found = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = _op_name(node.target)
        base = base_name(name)
        if name and (name in wanted or base in wanted) and base not in found:
            found.append(base)
    return found


def _placeholder(value):
    """A zero-filled tensor shaped like the fake output ``value`` (other values unchanged)."""
    import torch

    if isinstance(value, torch.Tensor):
        return torch.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype,
                                   device=value.device).zero_()
    return value


def _compiler(fx_g, example_inputs):
    from torch._dynamo.backends.debugging import boxed_nop

    ops = placeholder_ops_in(fx_g)
    if not ops:
        return boxed_nop(fx_g, example_inputs)
    output = next(n for n in fx_g.graph.nodes if n.op == "output")
    results = output.args[0]
    fakes = [r.meta.get("val") if hasattr(r, "meta") else r for r in results]
    message = (f"refdev (profile {_state['profile']}): graph with {', '.join(ops)} {PLACEHOLDER_WARNING} "
               "(zero-filled), not computed results")

    def run(args):
        args.clear()  # boxed calling convention: the callee owns and frees the inputs
        warnings.warn(message, UserWarning, stacklevel=2)
        return [_placeholder(v) for v in fakes]

    run._boxed_call = True
    return run


def refdev_backend(gm, example_inputs, **kwargs):
    """torch.compile backend: aot_eager, with placeholder outputs for graphs the profile cannot lower."""
    from torch._dynamo.backends.debugging import aot_eager

    return aot_eager(gm, example_inputs, fw_compiler=_compiler, bw_compiler=_compiler, **kwargs)


ENTRY_POINT_GROUP = "torch_dynamo_backends"


def _listed_as_entry_point() -> bool:
    """Whether the installed package names this backend to dynamo (pyproject.toml's
    ``torch_dynamo_backends`` entry point): then dynamo finds it when asked for it."""
    from importlib.metadata import entry_points

    return any(ep.name == BACKEND_NAME and ep.value == f"{__name__}:refdev_backend"
               for ep in entry_points(group=ENTRY_POINT_GROUP))


def register(profile: str, placeholder_ops) -> None:
    """Make the ``refdev`` backend known once per process (the profile may be set again).

    Importing torch._dynamo to register it costs seconds (most of ``refdev.load()``, paid
    by every rank and worker, most of which never compile), so where the installed
    package lists the backend as a dynamo entry point nothing is imported here: dynamo
    loads it on the first ``torch.compile(backend="refdev")``."""
    import sys

    _state["profile"] = profile
    _state["ops"] = tuple(placeholder_ops)
    if "torch._dynamo" not in sys.modules and _listed_as_entry_point():
        return
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if BACKEND_NAME not in _COMPILER_FNS:
        register_backend(compiler_fn=refdev_backend, name=BACKEND_NAME)
