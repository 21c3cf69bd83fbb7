"""refdev standing in for a backend that is not installed: ``--backend-module
torchconform.refdev.standin`` brings refdev up under the device under test's name
(``run --device neuron`` -> PrivateUse1 ``neuron``, ``torch.neuron``), so that backend's
profile -- its message patterns, compile backend name, dtype policy and worker pinning --
is exercised end to end before anyone has the hardware (``torchconform rehearse``).

The operators, traits and collectives are refdev's (``$TORCHCONFORM_REFDEV_PROFILE``),
so a rehearsal build's missing operators are refdev's ground truth (``refdev describe``).

It also offers torch_neuronx's operator-tracking API (``get_fallback_ops()``,
``get_executed_ops()``, ``clear_op_tracking()``: lists of operator names, each once, until
cleared), backed by refdev's own counters, so a profile's ``tracking:`` section
(collectors/tracking.py) is exercised as on the hardware: a run that loads this module
in place of the backend module finds the functions here.
"""
from __future__ import annotations

import os

from torchconform import refdev
from torchconform.core.device import IN_TREE
from torchconform.errors import UserError
from torchconform import settings
from torchconform.core.profile import load_profile
from torchconform.refdev.compile import refdev_backend

_device = settings.given("TORCHCONFORM_DEVICE") or refdev.DEFAULT_NAME   # not the suites' cpu
if _device in IN_TREE:
    raise UserError(f"refdev cannot stand in for the in-tree device {_device!r}; rehearse a PrivateUse1 "
                    "backend (e.g. --device neuron)")
os.environ.setdefault(refdev.NAME_ENV, _device)
# refdev counts the operators it computes only when tracing: get_executed_ops() reads them
os.environ.setdefault(refdev.TRACE_ENV, "1")
DEVICE = refdev.load()
# how many times each tracking function was called, for tests proving the path was taken
TRACKING_CALLS = {"get_fallback_ops": 0, "get_executed_ops": 0, "clear_op_tracking": 0}


def _fallback_counts() -> dict:
    # a boxed profile's fallback is PyTorch's own, which counts nothing: what it received
    # stands in for the backend's own fallback tracker, as torch_neuronx marks an operator
    # before its CPU fallback runs
    counts = refdev.fallback_counts()
    return refdev.boxed_fallback_served() if counts is None else counts


def get_fallback_ops() -> list:
    """Operators run through the CPU fallback since the last clear_op_tracking()."""
    TRACKING_CALLS["get_fallback_ops"] += 1
    return sorted(op for op, n in _fallback_counts().items() if n)


def get_executed_ops() -> list:
    """Operators the device computed itself since the last clear_op_tracking()."""
    TRACKING_CALLS["get_executed_ops"] += 1
    fallback = set(_fallback_counts())
    return sorted(op for op, n in refdev.call_counts().items() if n and op not in fallback)


def clear_op_tracking() -> None:
    """Clear both."""
    TRACKING_CALLS["clear_op_tracking"] += 1
    refdev.reset_fallback_counts()
    refdev.boxed_fallback_served(reset=True)
    refdev.call_counts(reset=True)


def _compile_alias() -> None:
    """refdev's compile backend under the name the backend profile gives its compiler
    (neuron: ``neuron``), so compiled tests ask for it as they would on the real device."""
    name = load_profile(settings.given("TORCHCONFORM_PROFILE") or DEVICE).compile_backend
    if name in ("", "refdev", "inductor", "aot_eager", "eager"):
        return
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if name not in _COMPILER_FNS:
        register_backend(compiler_fn=refdev_backend, name=name)


_compile_alias()
