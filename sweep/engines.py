"""The sweep engines by name: ``--engine NAME`` picks one here and nowhere else.

Each entry is a factory ``(opts, profile, device) -> Engine`` (sweep/protocol.py); the
engine's own module is imported only when it is chosen (Ray's import costs seconds and is
optional).  Another engine registers itself with :func:`register` before the sweep starts,
the way pytest-xdist lets a plugin supply its scheduler."""
from __future__ import annotations

from typing import Callable

from torchconform.errors import UserError
from torchconform.sweep.protocol import Engine
from torchconform.suites.models import backend

_FACTORIES: dict[str, Callable[..., Engine]] = {}


def register(name: str, factory: Callable[..., Engine]) -> None:
    """Make ``--engine name`` build its engine with ``factory(opts, profile, device)``."""
    _FACTORIES[name] = factory


def names() -> list[str]:
    return sorted(_FACTORIES)


def make(name: str, opts, profile, device: str) -> Engine:
    """The engine ``name`` for this sweep; a UserError naming the known ones otherwise."""
    factory = _FACTORIES.get(name)
    if factory is None:
        choices = " or ".join(f"--engine {n}" for n in names())
        raise UserError(f"unknown engine {name!r}; use {choices}")
    return factory(opts, profile, device)


def device_count(profile, device: str) -> int:
    """How many devices the local workers can be pinned to (1 for cpu)."""
    if device == "cpu":
        return 1
    import torch

    backend.prepare(profile)
    module = getattr(torch, device, None)
    try:
        return max(1, int(module.device_count()))
    except Exception:
        return 1


def _local(opts, profile, device: str) -> Engine:
    from torchconform.sweep.local import LocalEngine   # imported when chosen (start-up time)

    return LocalEngine(workers=opts.workers, devices=opts.devices or device_count(profile, device))


def _ray(opts, profile, device: str) -> Engine:
    from torchconform.sweep.ray_engine import RayEngine   # Ray is optional and slow to import

    return RayEngine(address=opts.ray_address, device=device, max_in_flight=max(opts.workers, 1))


register("local", _local)
register("ray", _ray)
