"""refdev standing in for a backend that is not installed: ``--backend-module
torchconform.refdev.standin`` brings refdev up under the device under test's name
(``run --device neuron`` -> PrivateUse1 ``neuron``, ``torch.neuron``), so that backend's
profile -- its message patterns, compile backend name, dtype policy and worker pinning --
is exercised end to end before anyone has the hardware (``torchconform rehearse``).

The operators, traits and collectives are refdev's (``$TORCHCONFORM_REFDEV_PROFILE``),
so a rehearsal build's missing operators are refdev's ground truth (``refdev describe``).
"""
from __future__ import annotations

import os

from torchconform import refdev
from torchconform.collectors.device import IN_TREE
from torchconform.errors import UserError

_device = os.environ.get("TORCHCONFORM_DEVICE") or refdev.DEFAULT_NAME
if _device in IN_TREE:
    raise UserError(f"refdev cannot stand in for the in-tree device {_device!r}; rehearse a PrivateUse1 "
                    "backend (e.g. --device neuron)")
os.environ.setdefault(refdev.NAME_ENV, _device)
DEVICE = refdev.load()


def _compile_alias() -> None:
    """refdev's compile backend under the name the backend profile gives its compiler
    (neuron: ``neuron``), so compiled tests ask for it as they would on the real device."""
    from torchconform.skiplists.profile import load_profile

    name = load_profile(os.environ.get("TORCHCONFORM_PROFILE") or DEVICE).compile_backend
    if name in ("", "refdev", "inductor", "aot_eager", "eager"):
        return
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    from torchconform.refdev.compile import refdev_backend

    if name not in _COMPILER_FNS:
        register_backend(compiler_fn=refdev_backend, name=name)


_compile_alias()
