"""Probe a backend: bring its device up in a child process and report what it offers.

``run_probe`` (the CLI's side) starts ``python -m torchconform.skiplists.probe`` and reads
its one answer line; the child brings the device up (``backend_env.bring_up``) and, for a
full probe, measures what a profile is written from: device count, memory_stats, the
PrivateUse1 boxed fallback and kernel count, the compile backends that run a tiny function
on the device, the c10d backends claiming the device type, the dtypes it creates tensors
in, float64/complex128 precision, and op-tracking functions of the backend module.
A child, because a PrivateUse1 name is taken once per process and a backend's import
may crash: the caller survives to say so in one line.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from torchconform.errors import UserError
from torchconform.core.backend_env import (
    AUTOLOAD_ENV, BringUpError, autoload_entry_points, bring_up, distribution_of, one_line)
from torchconform.core.backend_env import privateuse1_name
from torchconform.procs import describe_exit

ANSWER = "TORCHCONFORM_PROBE "
TIMEOUT = 600.0
# Dynamo backends that need other hardware or packages than the device under test.
FOREIGN_COMPILE_BACKENDS = {"cudagraphs", "openxla", "openxla_eval", "tvm", "onnxrt", "tensorrt", "torch_tensorrt",
                            "ipex"}
CREATION_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8", "int16", "int32",
                   "int64", "uint8", "bool")
TRACKING = ("get_fallback_ops", "get_executed_ops", "clear_op_tracking")


def probe(device: str, module: str = "", setup: str = "", full: bool = True) -> dict:
    """What the child reports (JSON-able); ``error`` holds a failed bring-up."""
    facts = {"device": device, "module": module, "setup": setup, "autoload": autoload_entry_points(),
             "autoload_enabled": os.environ.get(AUTOLOAD_ENV, "1") == "1"}
    try:
        imported = False
        if not device:   # whichever device torch's autoload or the module registers (doctor)
            device, imported = _registered_name(module)
            facts["device"] = device
        how = bring_up(device, module, setup)
        facts["registered_by"] = "import" if imported else how
    except BringUpError as exc:
        facts["error"] = {"stage": exc.stage, "detail": exc.detail}
        return facts
    import torch

    facts["torch"] = torch.__version__
    facts["device_count"] = _count(torch, device)
    facts["distribution"] = distribution_of(_backend_module(facts))
    facts["round_trip"] = _round_trip(torch, device)
    if not full:
        return facts
    facts["memory_stats"] = _memory_stats(torch, device)
    if device not in ("cpu", "cuda", "xpu", "mps", "meta", "hpu"):
        key = torch._C.DispatchKey.PrivateUse1
        facts["boxed_fallback"] = bool(torch._C._dispatch_has_backend_fallback(key))
        facts["privateuse1_kernels"] = len(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"))
    facts["compile"] = _compile_backends(torch, device)
    facts["c10d"] = _c10d(device)
    facts["dtypes"] = _dtypes(torch, device)
    facts["downcast"] = _downcast(torch, device)
    facts["tracking"] = _tracking(torch, device, _backend_module(facts))
    return facts


def _registered_name(module: str) -> tuple[str, bool]:
    """The PrivateUse1 name after torch (its autoload) and ``module`` are imported, and
    whether ``module`` had to be imported for it."""
    import importlib

    try:
        import torch  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - torch's autoload runs backends' code
        raise BringUpError("torch", one_line(exc)) from None
    imported = bool(module) and privateuse1_name() == "privateuseone"
    if imported:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001
            raise BringUpError("import" if isinstance(exc, ImportError) else "setup", one_line(exc)) from None
    name = privateuse1_name()
    if name == "privateuseone":
        raise BringUpError("not_registered", name)
    return name, imported


def _round_trip(torch, device: str) -> str:
    """"ok" when the device computes x + x right (so "available" means "works")."""
    try:
        x = torch.arange(4.0, device=device)
        return "ok" if (x + x).cpu().tolist() == [0.0, 2.0, 4.0, 6.0] else "wrong result"
    except Exception as exc:  # noqa: BLE001
        return one_line(exc)[:200]


def _backend_module(facts: dict) -> str:
    if facts["module"]:
        return facts["module"]
    if facts.get("registered_by") == "autoload" and facts["autoload"]:
        return facts["autoload"][0]["value"].partition(":")[0]
    return ""


def _count(torch, device: str) -> int:
    mod = getattr(torch, device, None)
    try:
        return int(mod.device_count()) if device != "cpu" else 1
    except Exception:  # noqa: BLE001 - reported as 0
        return 0


def _memory_stats(torch, device: str) -> dict:
    fn = getattr(getattr(torch, device, None), "memory_stats", None)
    if not callable(fn):
        return {"present": False, "allocations": False}
    try:
        stats = fn(0) or {}
    except Exception as exc:  # noqa: BLE001
        return {"present": True, "allocations": False, "error": one_line(exc)}
    return {"present": True, "allocations": "allocation.all.allocated" in stats}


def _tiny(x):
    return x * 2 + 1


def _compile_backends(torch, device: str) -> dict:
    """{backend: "ok" or the first line of its error} for each backend worth trying."""
    import torch._dynamo

    listed = sorted(set(torch._dynamo.list_backends()) - FOREIGN_COMPILE_BACKENDS)
    tried = {}
    for backend in [b for b in listed if b != "inductor"] + ["aot_eager", "eager", "inductor"]:
        if backend in tried:
            continue
        torch._dynamo.reset()
        try:
            x = torch.arange(4.0, device=device)
            got = torch.compile(_tiny, backend=backend)(x)
            ok = got.device.type == device and got.cpu().tolist() == [1.0, 3.0, 5.0, 7.0]
            tried[backend] = "ok" if ok else "wrong result"
        except Exception as exc:  # noqa: BLE001 - a backend that cannot compile for the device
            tried[backend] = one_line(exc).split(" Set TORCHDYNAMO_VERBOSE")[0][:160]
    torch._dynamo.reset()
    return {"listed": listed, "tried": tried}


def _c10d(device: str) -> list[str]:
    try:
        import torch.distributed as dist

        if not dist.is_available():
            return []
        names = [dist.Backend.default_device_backend_map.get(device)]
        names += [n for n, devices in getattr(dist.Backend, "backend_capability", {}).items() if device in devices]
    except Exception:  # noqa: BLE001 - no distributed support at all
        return []
    return [n for n in dict.fromkeys(names) if n]


def _dtypes(torch, device: str) -> dict:
    refused = {}
    for name in CREATION_DTYPES:
        try:
            torch.zeros(2, dtype=getattr(torch, name), device=device).cpu()
        except Exception as exc:  # noqa: BLE001
            refused[name] = one_line(exc)[:160]
    return {"accepted": [d for d in CREATION_DTYPES if d not in refused], "refused": refused}


def _downcast(torch, device: str) -> dict:
    """{dtype: dtype it is computed in} where an addition loses what float32 cannot hold."""
    out = {}
    for wide, narrow, tiny in (("float64", "float32", 2.0 ** -40), ("complex128", "complex64", 2.0 ** -40)):
        try:
            x = torch.ones(1, dtype=getattr(torch, wide), device=device)
            if (x + tiny).cpu().item() == 1.0:
                out[wide] = narrow
        except Exception:  # noqa: BLE001 - the dtype or the addition is not there: nothing measured
            continue
    return out


def _tracking(torch, device: str, module: str) -> dict:
    """Op-tracking functions of the backend module: {name: "dict"/"list"/... (what it returned)}."""
    import importlib

    found = {}
    mod = None
    if module:
        try:
            mod = importlib.import_module(module)
        except Exception:  # noqa: BLE001
            mod = None
    for owner, where in ((mod, module), (getattr(torch, device, None), f"torch.{device}")):
        for name in TRACKING:
            fn = getattr(owner, name, None)
            if callable(fn) and name not in found:
                found[name] = {"where": where, "returns": ""}
    if "clear_op_tracking" in found:
        try:
            _call(found["clear_op_tracking"]["where"], "clear_op_tracking", torch)
        except Exception:  # noqa: BLE001
            pass
    try:
        (torch.ones(2, device=device) + 1).cpu()
    except Exception:  # noqa: BLE001
        pass
    for name in ("get_fallback_ops", "get_executed_ops"):
        if name in found:
            try:
                found[name]["returns"] = type(_call(found[name]["where"], name, torch)).__name__
            except Exception as exc:  # noqa: BLE001
                found[name]["returns"] = "error: " + one_line(exc)[:120]
    return found


def _call(where: str, name: str, torch):
    import importlib

    owner = getattr(torch, where[len("torch."):]) if where.startswith("torch.") else importlib.import_module(where)
    return getattr(owner, name)()


# -- the caller's side ------------------------------------------------------------------
def run_probe(device: str, module: str = "", setup: str = "", full: bool = True, env: dict | None = None,
              timeout: float = TIMEOUT) -> dict:
    """The child's facts; a child that ends without an answer is a one-line UserError."""
    request = json.dumps({"device": device, "module": module, "setup": setup, "full": full})
    try:
        proc = subprocess.run([sys.executable, "-m", "torchconform.skiplists.probe", request], capture_output=True,
                              text=True, errors="replace", timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise UserError(f"device {device!r}: bringing the backend up took over {timeout:g} s; check that "
                        f"`python -c 'import torch; import {module or 'torch'}'` finishes") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(ANSWER):
            return json.loads(line[len(ANSWER):])

    last = next((ln.strip() for ln in reversed(proc.stderr.splitlines()) if ln.strip()), "no output")
    raise UserError(f"device {device!r}: the process bringing the backend up ended without an answer "
                    f"({describe_exit(proc.returncode)}; last line: {last[:300]}); the backend's import fails "
                    f"outside torchconform too: try `python -c 'import torch; import {module or 'torch'}'`")


def main(argv=None) -> int:
    request = json.loads((argv or sys.argv[1:])[0])
    facts = probe(request["device"], request.get("module", ""), request.get("setup", ""), request.get("full", True))
    sys.stdout.flush()
    print(ANSWER + json.dumps(facts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
