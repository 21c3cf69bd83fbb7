"""A backend's registration facts, read from torch itself (no torchconform code).

Runs inside the backend's environment and prints one JSON object: the PrivateUse1
name, device_count, whether ``torch.<dev>.memory_stats`` exists (and whether it has
``allocation.all.allocated``), whether a boxed fallback serves PrivateUse1, the
operators registered on the PrivateUse1 key (less those torch registers itself:
the c10d ops of a bare torch), compile and c10d backends the backend added (a baseline
process with autoload off and no import gives torch's own), the dtypes a tensor can
be made in and copied back, and what float64 arithmetic runs in.

    python facts.py MODULE        (MODULE '' : the backend loads through torch's autoload)
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

DTYPES = ["float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int8", "uint8", "int16",
          "int32", "int64", "bool", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"]


def registry() -> dict:
    import torch
    import torch._dynamo
    import torch.distributed as dist

    return {"kernels": sorted(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")),
            "compile_backends": sorted(torch._dynamo.list_backends(exclude_tags=())),
            "c10d_backends": list(dist.Backend.backend_list) if dist.is_available() else [],
            "c10d_device_map": dict(dist.Backend.default_device_backend_map) if dist.is_available() else {}}


def dtype_check(dev: str) -> dict:
    import torch

    out = {}
    for name in DTYPES:
        dt = getattr(torch, name)
        try:
            torch.empty(3, dtype=dt, device=dev)
            back = torch.ones(3, dtype=dt).to(dev).cpu()
            out[name] = "ok" if bool(back.float().eq(1).all()) else "wrong after a round trip"
        except Exception as e:   # noqa: BLE001 - the failure is the fact
            out[name] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
    return out


def float64_runs_as(dev: str) -> str:
    """1 + 2**-30 added to 2**-30 is exact in float64 and rounds to 1 in float32."""
    import torch

    try:
        x = torch.full((4,), 1.0 + 2.0 ** -30, dtype=torch.float64).to(dev)
        y = (x + 2.0 ** -30).cpu()
    except Exception as e:   # noqa: BLE001
        return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
    if bool((y == 1.0 + 2.0 ** -29).all()):
        return "float64"
    return "float32" if bool((y == 1.0).all()) else f"neither: {y.tolist()}"


def main() -> int:
    if sys.argv[1:] == ["--baseline"]:
        print(json.dumps(registry()))
        return 0
    module = sys.argv[1] if len(sys.argv) > 1 else ""
    base = subprocess.run([sys.executable, __file__, "--baseline"], capture_output=True, text=True,
                          env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))
    baseline = json.loads(base.stdout.strip().splitlines()[-1])
    import torch

    if module:
        importlib.import_module(module)
    dev = torch._C._get_privateuse1_backend_name()
    mod = getattr(torch, dev, None)
    reg = registry()
    own = [k for k in reg["kernels"] if k not in baseline["kernels"]]
    stats = None
    if mod is not None and hasattr(mod, "memory_stats"):
        try:
            stats = sorted(mod.memory_stats(0))
        except Exception as e:   # noqa: BLE001
            stats = f"{type(e).__name__}: {e}"
    facts = {
        "torch": torch.__version__,
        "device": dev,
        "device_module": getattr(mod, "__name__", None),
        "device_count": mod.device_count() if mod is not None else None,
        "memory_stats": mod is not None and hasattr(mod, "memory_stats"),
        "memory_stats_keys": stats,
        "has_allocation_counter": isinstance(stats, list) and "allocation.all.allocated" in stats,
        "memory_allocated": mod is not None and hasattr(mod, "memory_allocated"),
        "boxed_fallback": torch._C._dispatch_has_backend_fallback(torch._C.DispatchKey.PrivateUse1),
        "own_kernels": len(own),
        "own_aten_kernels": len([k for k in own if k.startswith("aten::")]),
        "own_kernel_names": own,
        "torch_own_privateuse1_kernels": len(baseline["kernels"]),
        "autograd_privateuse1_kernels": len(torch._C._dispatch_get_registrations_for_dispatch_key("AutogradPrivateUse1")),
        "compile_backends_added": [b for b in reg["compile_backends"] if b not in baseline["compile_backends"]],
        "c10d_backends_added": [b for b in reg["c10d_backends"] if b not in baseline["c10d_backends"]],
        "c10d_backend_for_device": reg["c10d_device_map"].get(dev, ""),
        "dtypes": dtype_check(dev),
        "float64_runs_as": float64_runs_as(dev),
    }
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
