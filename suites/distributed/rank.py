"""One rank of a distributed test: ``python -m torchconform.suites.distributed.rank
PROGRAM PARAMS_JSON RESULT_PATH`` with PyTorch's launcher variables set (launch.py).

Sets the device up as the plugin does, joins the process group (gloo for CPU tensors,
the profile's c10d backend for the device's), runs ``PROGRAM(ctx)`` and writes
``{"status": "ok", "values": ...}`` or ``{"status": "error", "error": ...}`` (the
exception chain, for the classifier) to RESULT_PATH.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field

from torchconform import settings
from torchconform.core.classify import C10D_BACKEND_PREFIX, DEVICE_API_PREFIX


@dataclass
class Context:
    """What a program gets: its rank, the world, its device, and the profile's words."""
    rank: int
    world_size: int
    device_type: str
    device: str                      # "refdev:1", "cuda:0", "cpu"
    params: dict = field(default_factory=dict)
    profile: object = None

    @property
    def dtype(self):
        import torch
        return getattr(torch, self.params.get("dtype") or "float32")

    def module(self):
        """torch.<device> (the device module), None for cpu."""
        import torch
        return None if self.device_type == "cpu" else getattr(torch, self.device_type)

    def need(self, *attrs: str) -> None:
        """The device module must have ``attrs`` (a missing one is the device's gap, a backend skip)."""
        mod = self.module()
        if mod is None:
            return
        for attr in attrs:
            if not hasattr(mod, attr):
                raise RuntimeError(f"{DEVICE_API_PREFIX} torch.{self.device_type}.{attr} (the distributed APIs "
                                   f"need it; the device module of {self.device_type} has no {attr})")

    def tolerances(self, dtype=None) -> dict:
        # suites.common loads torch: kept out of this module's top (see _setup)
        from torchconform.suites.common import tolerances
        return tolerances(dtype or self.dtype)


def _write(path: str, report: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(report, fh)
    os.replace(tmp, path)


# c10d's words when the device's tensors reach a c10d backend that cannot take them (the
# profile names gloo for the device: "ProcessGroupGloo::allreduce: unsupported device type
# refdev"), or a group with no backend for the device type at all.
_UNSUPPORTED_DEVICE = re.compile(r"ProcessGroup\w*::\w+: unsupported device type (?P<device>\w+)"
                                 r"|No backend type associated with device type (?P<other>\w+)")


def c10d_backend_words(text: str, device_type: str) -> str:
    """The classifier's missing-c10d-backend line when ``text`` holds c10d's complaint that
    the backend cannot run ``device_type`` tensors; "" otherwise."""
    for m in _UNSUPPORTED_DEVICE.finditer(text):
        if (m.group("device") or m.group("other")) == device_type:
            line = text[m.start():].splitlines()[0].strip()
            return (f"{C10D_BACKEND_PREFIX} {device_type} (its c10d backend cannot run {device_type} "
                    f"tensors; c10d said: {line})")
    return ""


def backend_string(device_type: str, profile) -> str:
    """``init_process_group``'s backend for the device: gloo for CPU tensors beside the
    device's c10d backend.  Raises RuntimeError (``torchconform missing c10d backend: ...``)
    when no c10d backend is registered for the device type."""
    import torch.distributed as dist

    if device_type == "cpu":
        return "gloo"
    backend = profile.distributed.get("c10d_backend") or dist.Backend.default_device_backend_map.get(device_type, "")
    known = backend and (backend.lower() in dist.Backend.backend_list or backend.upper() in dist.Backend._plugins)
    if not known:
        said = f"the profile names {backend!r}, which is not registered" if backend else "none is registered"
        raise RuntimeError(f"{C10D_BACKEND_PREFIX} {device_type} (no c10d backend for this device type: {said}; "
                           f"register one with torch.distributed.Backend.register_backend(..., devices=[{device_type!r}]))")
    return f"cpu:gloo,{device_type}:{backend}"


def _setup() -> Context:
    # imported in the rank, not at module level: an import that fails is then the rank's reported error (main)
    from torchconform.core.device import setup_device
    from torchconform.core.profile import load_profile

    device_type = settings.get("TORCHCONFORM_DEVICE")
    profile = load_profile(settings.given("TORCHCONFORM_PROFILE") or device_type)
    setup_device(device_type, profile, settings.given("TORCHCONFORM_BACKEND_MODULE") or "")
    import torch

    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)  # ranks share the host's CPUs; one intra-op thread each
    device = "cpu"
    if device_type != "cpu":
        mod = getattr(torch, device_type)
        # a variable pinned the rank's device (index 0 of what it sees), or pick it by LOCAL_RANK
        index = 0 if profile.distributed.get("device_env") else int(os.environ["LOCAL_RANK"]) % mod.device_count()
        mod.set_device(index)
        device = f"{device_type}:{index}"
    return Context(rank, size, device_type, device, profile=profile)


def main(argv: list[str]) -> int:
    program, params, result = argv
    try:
        ctx = _setup()
        ctx.params = json.loads(params)
        # every import below may fail on a broken backend: inside the try, the failure is the rank's result
        import datetime

        import torch.distributed as dist

        from torchconform.collectors.devicecheck import DeviceCheck
        from torchconform.suites.distributed.launch import rank_timeout

        dist.init_process_group(backend=backend_string(ctx.device_type, ctx.profile),
                                timeout=datetime.timedelta(seconds=rank_timeout()))
        module, _, func = program.partition(":")
        check = DeviceCheck(ctx.device_type) if ctx.device_type != "cpu" else None
        with check.watch() if check else contextlib.nullcontext() as touch:
            values = getattr(importlib.import_module(module), func)(ctx) or {}
    except BaseException as exc:  # every failure is the test's result, reported whole
        from torchconform.core.classify import render_chain  # reached even when the imports above failed

        error = f"{type(exc).__name__}: {exc}\n{render_chain(exc)}"
        words = c10d_backend_words(error, settings.get("TORCHCONFORM_DEVICE"))
        # failed_at: the launcher reports the rank that failed first (the others' errors
        # are usually their collectives noticing it is gone)
        _write(result, {"status": "error", "type": type(exc).__name__, "failed_at": time.time(),
                        "error": f"{words}\n{error}" if words else error})
        sys.stderr.write(traceback.format_exc())
        sys.stderr.flush()
        os._exit(1)  # peers may be gone: no process-group teardown that could wait on them
    _write(result, {"status": "ok", "values": values, "touched": touch.touched if touch else None})
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
