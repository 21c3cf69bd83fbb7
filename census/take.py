"""Take the census of a device: set it up like the plugin does, classify, trace."""
from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass, field

from torchconform.census import trace
from torchconform.core import dispatch
from torchconform.errors import UserError
from torchconform import refdev
from torchconform.core.device import setup_device
from torchconform.core.profile import available_profiles, load_profile, shipped_profile_for


@dataclass
class Census:
    device: str
    backend_key: str
    torch_version: str
    rows: list[dispatch.Row]
    profile: str = ""               # backend profile (skiplists/<name>/profile.yaml)
    refdev_profile: str = ""        # refdev's operator profile, when the device is refdev
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in dispatch.STATUSES}
        for r in self.rows:
            out[r.status] += 1
        return out

    def by_op(self) -> dict[str, dispatch.Row]:
        return {r.op: r for r in self.rows}


def backend_profile(device: str, profile: str = ""):
    """The backend profile the plugin would pick for ``device`` (collectors/settings.py's rule);
    the CLI passes what ``run`` would use (cmd_census.py), probed defaults included."""
    name = profile or shipped_profile_for(device)
    if not name:
        raise UserError(f"no backend profile for device {device!r}; pass --profile with one of "
                        f"{', '.join(available_profiles())} or a path to a profile.yaml")
    loaded = load_profile(name)
    if loaded.device != device:
        raise UserError(f"profile {loaded.name!r} is for device {loaded.device!r}, not {device!r}; "
                        "pick a matching --profile")
    return loaded


def _refdev_fallback(device: str) -> tuple[list[str], str]:
    """refdev's fallback operators (describe()) when the device under test is refdev."""
    if not refdev.is_loaded() or refdev.device_name() != device:
        return [], ""
    info = refdev.describe()
    return info["fallback"], info["profile"]


@contextlib.contextmanager
def quiet_output():
    """Made-up calls talk on fds 1 and 2 directly (C++ deprecation and resize warnings,
    ``aten::_print``): thousands of lines would bury the census, or break its JSON."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(devnull)


def take_census(device: str, profile: str = "", backend_module: str = "", do_trace: bool = True,
                observed_fallback=()) -> Census:
    """Every aten overload's status on ``device``; composites traced on meta tensors.
    ``observed_fallback``: operators the build's passing tests ran through the CPU fallback
    (census/agreement.py ``findings``): one whose registered kernel the dispatcher shows is
    ``fallback`` (via observed-in-tests), since the kernel calls the fallback itself."""
    start = time.perf_counter()
    loaded = backend_profile(device, profile)
    setup_device(device, loaded, backend_module)
    import torch

    keys = dispatch.device_keys(device)
    fallback_ops, refdev_profile = _refdev_fallback(device)
    rows = dispatch.classify(dispatch.aten_ops(), keys, fallback_ops=fallback_ops,
                             python_decomps=dispatch.python_decompositions(), observed=observed_fallback)
    if do_trace:
        with quiet_output():
            for row in rows:
                if row.status == dispatch.COMPOSITE:
                    row.reached = trace.trace_composite(row.op, dispatch.trace_key(row.op, keys))
    dispatch.resolve_coverage(rows)
    return Census(device=device, backend_key=keys.backend, torch_version=torch.__version__, rows=rows,
                  profile=loaded.name, refdev_profile=refdev_profile, seconds=time.perf_counter() - start,
                  extra={"backend_fallback": keys.backend_fallback, "autograd_key": keys.autograd})
