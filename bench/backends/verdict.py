"""What a probe record (probe.py) shows about one operator, in the truth file's words.

``evidence``:
  native                  ran, no ``aten::_to_cpu`` under any operator, the strict switch (if
                          the backend has one) did not object
  fallback                ran, and the boxed CPU fallback served part of it (``aten::_to_cpu``
                          under the operator; torchvulkan's strict mode raises for it)
  fallback_no_cpu_kernel  reached the fallback, which raised "Could not run 'aten::X' with
                          arguments from the 'CPU' backend": the device lacks X and so does the CPU
  missing                 the dispatcher found no kernel on the device ("... from the '<dev>' backend",
                          or ATen's ``X_overrideable not implemented`` hook)
  error                   raised something else (the backend's own words)
  crash                   the probing process died

and the stored record the tool should make of the quick OpInfo's ``test_compare_cpu_<op>_<dev>_float32``
(``expect_ops_quick``), and the census status of each overload the case is about.
"""
from __future__ import annotations

import re

COULD_NOT_RUN = re.compile(r"Could not run '(?P<op>[\w:]+(?:\.\w+)?)' with arguments from the '(?P<backend>\w+)' backend")
OVERRIDEABLE = re.compile(r"(?<![\w.])(?P<op>\w+_overrideable) not implemented")
STRICT_FALLBACK = re.compile(r"Silent fallback detected for operation: (?P<op>[\w:.]+?)\.? Set")


def _owns(backend: str, device: str) -> bool:
    """A dispatcher backend name of the device: vulkan, PrivateUse1, Sparsevulkan, AutogradPrivateUse1..."""
    b = backend.lower()
    for prefix in ("autograd", "sparse", "quantized", "nested"):
        if b.startswith(prefix) and b[len(prefix):] in (device.lower(), "privateuse1"):
            return True
    return b in (device.lower(), "privateuse1")


def read_raise(message: str, device: str, fallback_parents: list[str]) -> dict:
    """The evidence of a raised message."""
    m = COULD_NOT_RUN.search(message or "")
    if m and _owns(m.group("backend"), device):
        out = {"evidence": "missing", "missing_op": m.group("op")}
        if fallback_parents:   # the fallback ran the operator on CPU; what it gave back has no kernel here
            out["fallback_ops"] = list(fallback_parents)
        return out
    if m and m.group("backend") == "CPU" and fallback_parents:
        return {"evidence": "fallback_no_cpu_kernel", "missing_op": m.group("op"), "fallback_ops": fallback_parents}
    m = OVERRIDEABLE.search(message or "")
    if m:
        return {"evidence": "missing", "missing_op": "aten::" + m.group("op")}
    return {"evidence": "error", "message": message}


def derive(record: dict) -> dict:
    """The evidence of one probe record, with ``consistent`` False where the sources disagree."""
    if "process" in record:
        return {"evidence": "crash", "message": record.get("process", "")}
    device, call = record["device"], record["call"]
    parents = call.get("fallback_parents") or []
    if call["outcome"] == "raised":
        out = read_raise(call.get("message", ""), device, parents)
    else:
        out = {"evidence": "fallback", "fallback_ops": parents} if parents else {"evidence": "native"}
        if call.get("correct") is not None:
            out["correct"] = call["correct"]
    strict = record.get("strict")
    if strict:
        said = STRICT_FALLBACK.search(strict.get("message", ""))
        strict_fell_back = strict.get("outcome") == "raised" and said is not None
        out["consistent"] = strict_fell_back == bool(parents) or (out["evidence"] == "missing" and not strict_fell_back)
        if said and said.group("op") not in out.get("fallback_ops", []):
            out.setdefault("fallback_ops", []).append(said.group("op"))
    return out


def expect_ops_quick(record: dict, samples_on: str = "device") -> dict | None:
    """The stored record the tool should make of the case's OpInfo (compare_cpu, float32),
    with the samples made on the device (the default) or on CPU (``--tc-samples-on cpu``;
    the probe made them there only when making them on the device failed, else the
    device's samples stand for both)."""
    info = record.get("opinfo_float32")
    if not info or "error" in info:
        return None
    device = record["device"]
    res = info.get(f"samples_on_{samples_on}") or info.get("samples_on_device") or {}
    parents = res.get("fallback_parents") or []
    if res.get("outcome") in ("creation raised", "raised"):
        said = read_raise(res.get("message", ""), device, parents)
        if said["evidence"] in ("missing", "fallback_no_cpu_kernel"):
            out = {"outcome": "skip_backend/missing_op", "missing_op": said["missing_op"]}
            if res["outcome"] == "creation raised":
                out["note"] = "sample creation"
            return out
        return {"outcome": "fail", "note": said.get("message", "")[:200]}
    if res.get("wrong_samples"):
        return {"outcome": "fail", "note": f"{res['wrong_samples']} of {res['samples']} samples not close (rtol 1e-4)"}
    if parents:
        return {"outcome": "pass_fallback", "fallback_ops": parents}
    return {"outcome": "pass"}


def census_status(slot: str, cpu_kernel: bool) -> str | None:
    """The census status a dispatcher slot (probe.slot_of) means on this device."""
    if slot == "kernel":
        return "native"
    if slot == "backend fallback":
        return "fallback" if cpu_kernel else "missing (fallback-without-cpu-kernel)"
    if slot in ("default backend kernel", "math kernel"):
        return "composite"
    if slot == "none":
        return "missing"
    return None
