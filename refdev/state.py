"""This process's loaded refdev: set once by ``refdev.load()``, read by what load() registers
(the device module ``torch.<name>`` in device.py, the ``refccl`` collectives in
distributed.py).  Those run only after load(), so they read the state here instead of
importing the package that registers them."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Loaded:
    name: str
    ext: object
    resolved: object      # profiles.Resolved
    devices: int


current: Loaded | None = None


def extension():
    """The loaded C++ extension; a RuntimeError before ``refdev.load()``."""
    if current is None:
        raise RuntimeError("refdev is not loaded in this process; call torchconform.refdev.load() first")
    return current.ext


def leak_counts() -> dict[str, int]:
    """Workspaces retained (leaked) per operator since the process started ({} before load)."""
    return dict(current.ext.leak_counts()) if current else {}
