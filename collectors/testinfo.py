"""Where a test came from: file, class, name, OpInfo name, variant, dtype, device.

On the worker the live item tells the truth (PyTorch's instantiated tests keep
their ``param_kwargs`` as a default argument).  From a bare test id (JUnit
ingest, crashed tests) :func:`parse_test_id` recovers what the naming
convention ``test_<variant>_<op>_<device>_<dtype>`` allows.
"""
from __future__ import annotations

import functools
import re

_DTYPES = (
    "float16 float32 float64 bfloat16 complex32 complex64 complex128 uint8 uint16 uint32 uint64 "
    "int8 int16 int32 int64 bool float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz"
).split()
_DTYPE_RX = re.compile(r"_(" + "|".join(sorted(_DTYPES, key=len, reverse=True)) + r")$")


def split_test_id(test_id: str) -> tuple[str, str, str]:
    """``path::Class::name[param]`` -> (file, class, name)."""
    parts = test_id.split("::")
    file = parts[0]
    if len(parts) >= 3:
        return file, parts[-2], parts[-1]
    if len(parts) == 2:
        return file, "", parts[1]
    return file, "", ""


def parse_test_id(test_id: str, device: str = "") -> dict:
    """Best-effort op/variant/dtype/device from a test id (the live item is better)."""
    file, cls, name = split_test_id(test_id)
    info = {"file": file, "cls": cls, "name": name, "op": "", "variant": "", "dtype": "", "device": device}
    base = re.sub(r"\[.*\]$", "", name)
    m = _DTYPE_RX.search(base)
    if m:
        info["dtype"] = m.group(1)
        base = base[: m.start()]
    if device and base.endswith("_" + device):
        base = base[: -len(device) - 1]
    else:
        dm = re.search(r"_(cpu|cuda|xpu|mps|meta|privateuse1|[a-z]+dev|neuron)$", base)
        if dm:
            info["device"] = dm.group(1)
            base = base[: dm.start()]
    info["variant"] = base[5:] if base.startswith("test_") else base
    return info


def _wrapped_chain(obj, limit: int = 32):
    """``obj`` and everything it wraps, outermost first.  Each step may be a bound
    method (a decorator that wrapped a method, or a test method bound to its
    instance), whose function is ``__func__``; decorators link the steps with
    ``__wrapped__`` (functools.wraps) or ``func`` (functools.partial)."""
    seen: set[int] = set()  # ids of functions, which live as long as the test (bound methods do not)
    while obj is not None and len(seen) < limit:
        func = getattr(obj, "__func__", obj)
        if id(func) in seen:
            return
        seen.add(id(func))
        yield func
        obj = getattr(func, "__wrapped__", None)
        if obj is None and isinstance(func, (functools.partial, functools.partialmethod)):
            obj = func.func


def _param_kwargs(obj) -> dict:
    """PyTorch's instantiated test keeps ``param_kwargs`` as a default argument;
    decorators may wrap it (and wrap bound methods), so walk the whole chain."""
    for func in _wrapped_chain(obj):
        for d in getattr(func, "__defaults__", None) or ():
            if isinstance(d, dict) and ("op" in d or "dtype" in d or "device" in d or "module_info" in d):
                return d
        for d in (getattr(func, "__kwdefaults__", None) or {}).values():
            if isinstance(d, dict) and ("op" in d or "dtype" in d or "device" in d or "module_info" in d):
                return d
    return {}


def _innermost_name(obj) -> str:
    name = ""
    for func in _wrapped_chain(obj):
        name = getattr(func, "__name__", "") or name
    return name


def item_info(item, device: str = "") -> dict:
    """File, class, name, op, variant, dtype, device of a live pytest item."""
    info = parse_test_id(item.nodeid, device)
    # pytest-parametrized suites (distributed) name the API and dtype as ``op``/``dtype`` strings
    params = getattr(getattr(item, "callspec", None), "params", None) or {}
    for key in ("op", "dtype"):
        if isinstance(params.get(key), str):
            info[key] = params[key]
    obj = getattr(item, "obj", None)
    if obj is None:
        return info
    pk = _param_kwargs(obj)
    fname = _innermost_name(obj)
    op = pk.get("op")
    if op is not None and hasattr(op, "name"):
        info["op"] = op.name + (f".{op.variant_test_name}" if getattr(op, "variant_test_name", "") else "")
    elif pk.get("module_info") is not None:
        mi = pk["module_info"]
        info["op"] = getattr(mi, "formatted_name", getattr(mi, "name", ""))
    if "dtype" in pk and pk["dtype"] is not None:
        info["dtype"] = str(pk["dtype"]).replace("torch.", "")
    if isinstance(pk.get("device"), str):
        info["device"] = pk["device"]
    if fname.startswith("test_") and (op is not None or pk):
        info["variant"] = fname[5:]
    return info
