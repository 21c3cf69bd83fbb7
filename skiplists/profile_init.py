"""A backend profile from a probe (skiplists/probe.py): the values, and the commented YAML
``torchconform backend init`` writes (every key with its meaning from profile_schema.KEYS,
the probe's findings as comments above the keys they decided)."""
from __future__ import annotations

import json
import re

from torchconform.core.profile import INDUCTOR_DEVICES, PROFILE_DIR, default_compile_backend
from torchconform.core.profile_schema import DISTRIBUTED_KEYS, DTYPE_POLICY_KEYS, KEYS
from torchconform.core.yamlpos import load_data

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]*$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def known_setup(module: str) -> str:
    """The ``setup`` a shipped profile gives ``module`` (refdev: its ``load``), else ""."""
    for path in sorted(PROFILE_DIR.glob("*/profile.yaml")):
        data = load_data(str(path)) or {}
        if module and data.get("backend_module") == module and data.get("setup"):
            return str(data["setup"])
    return ""


def pick_compile_backend(device: str, tried: dict) -> str:
    """inductor where it runs on an in-tree device; else a backend named like the device,
    aot_eager, eager (the first that ran the probe's function); else the device's default."""
    ok = [b for b, result in tried.items() if result == "ok"]
    order = (["inductor"] if device in INDUCTOR_DEVICES else []) + [device, "aot_eager", "eager"]
    return next((b for b in order if b in ok), default_compile_backend(device))


def profile_from_probe(facts: dict) -> tuple[dict, dict, list[str]]:
    """(profile values, {key: comment lines}, header comment lines) from a full probe."""
    device, module = facts["device"], facts["module"]
    notes: dict[str, list[str]] = {}
    in_tree = facts.get("registered_by") == "in-tree"
    dist, version = facts.get("distribution") or ("", "")
    backend_module, loader = module, module or "torch"
    if facts.get("registered_by") == "autoload":
        backend_module = ""
        entry = next((e for e in facts["autoload"]), {})
        loader = module or str(entry.get("value", "")).partition(":")[0] or loader
        notes["backend_module"] = [f"not needed: torch's autoload (entry point {entry.get('name')!r} -> "
                                   f"{entry.get('value')}) registers {device} when torch is imported"]
    tried = (facts.get("compile") or {}).get("tried", {})
    compile_backend = pick_compile_backend(device, tried)
    ran = [b for b, r in tried.items() if r == "ok"]
    notes["compile_backend"] = [f"ran a tiny function on {device}: {', '.join(ran) or 'none'}"] + \
        [f"{b}: {r}" for b, r in tried.items() if r != "ok"]
    tracking = facts.get("tracking") or {}
    counter = reset = ""
    if (tracking.get("get_fallback_ops") or {}).get("returns") == "dict":
        counter = f"{tracking['get_fallback_ops']['where']}:get_fallback_ops"
        if "clear_op_tracking" in tracking:
            reset = f"{tracking['clear_op_tracking']['where']}:clear_op_tracking"
    notes["fallback_counter"] = [f"{name} ({info['where']}) returned {info['returns'] or 'nothing measured'}"
                                 for name, info in tracking.items()] or ["no get_fallback_ops/clear_op_tracking found"]
    if tracking.get("get_fallback_ops") and not counter:
        notes["fallback_counter"].append("fallback_counter needs {operator: count}: wrap get_fallback_ops to use it")
    dtypes = facts.get("dtypes") or {}
    downcast = facts.get("downcast") or {}
    notes["dtype_policy"] = [f"refused at tensor creation: {d}: {why}" for d, why in dtypes.get("refused", {}).items()]
    if downcast:
        notes["dtype_policy"].append("measured: 1 + 2**-40 comes back as 1 in " + ", ".join(downcast))
    c10d = facts.get("c10d") or []
    notes["distributed"] = [f"c10d backends claiming {device}: {', '.join(c10d) or 'none'}"]
    data = {
        "name": device,
        "device": device,
        "description": f"{device} via {loader}" + (f" ({dist} {version})" if dist else "")
                       + ", profile written by torchconform backend init",
        "backend_module": backend_module,
        "setup": facts.get("setup") or "",
        "compile_backend": compile_backend,
        "backend_names": [device.upper()] if in_tree else [device, "PrivateUse1"],
        "missing_op_patterns": [],
        "fallback_patterns": [],
        "unsupported_dtype_patterns": [],
        "not_executed_patterns": [],
        "fallback_counter": counter,
        "fallback_reset": reset,
        "dtype_policy": {"unsupported": sorted(dtypes.get("refused", {})),
                         **({"downcast": downcast} if downcast else {})},
        "worker_env": "",
        "trait_off": "",
        "env": {},
        "distributed": {"c10d_backend": c10d[0] if c10d else "", "ranks_per_host": 0, "device_env": "",
                        "missing_collective_patterns": []},
    }
    header = [f"Backend profile for {device!r}, written by `torchconform backend init` from what the backend",
              "showed when probed; edit it, then check it with `torchconform skiplist lint <this file>`.",
              "Every key: docs/profiles.md.", "",
              f"probed with torch {facts.get('torch')}: {facts.get('device_count')} device(s), registered by "
              f"{facts.get('registered_by')}" + (f"; {dist} {version}" if dist else "")]
    if "boxed_fallback" in facts:
        header.append(f"PrivateUse1: {facts['privateuse1_kernels']} kernels, boxed CPU fallback "
                      + ("registered" if facts["boxed_fallback"] else "not registered"))
    stats = facts.get("memory_stats") or {}
    header.append("memory_stats: " + ("absent" if not stats.get("present") else
                                      "with 'allocation.all.allocated' (device-touch checks use it)"
                                      if stats.get("allocations") else "present, without 'allocation.all.allocated'"))
    return data, notes, header


def summary(data: dict) -> str:
    """The values a run without a profile says it probed, in one line."""
    unsupported = data["dtype_policy"].get("unsupported") or []
    return (f"compile_backend {data['compile_backend']}, backend_module {data['backend_module'] or '(autoload)'}, "
            f"unsupported dtypes {', '.join(unsupported) or 'none'}, "
            f"c10d {data['distributed']['c10d_backend'] or 'none'}")


def _value(value) -> str:
    if isinstance(value, str):
        plain = _PLAIN.match(value) and value.lower() not in _YAML_WORDS and not re.match(r"^[\d.+-]", value)
        return value if plain else json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_value(k)}: {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(value)


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}".rstrip() for line in text.splitlines() or [""]]


def render_profile(data: dict, notes: dict, header: list[str]) -> str:
    """Commented YAML that loads back to ``data`` exactly."""
    lines = [f"# {h}".rstrip() for h in header] + [""]
    sections = {"dtype_policy": DTYPE_POLICY_KEYS, "distributed": DISTRIBUTED_KEYS}
    for key, value in data.items():
        lines += _comment(KEYS[key][1], "")
        for note in notes.get(key, []):
            lines += _comment("probe: " + note, "")
        if key in sections and isinstance(value, dict):
            lines.append(f"{key}:")
            for sub, sub_value in value.items():
                lines += _comment(sections[key][sub][1], "  ")
                lines.append(f"  {sub}: {_value(sub_value)}")
        else:
            lines.append(f"{key}: {_value(value)}")
    text = "\n".join(lines) + "\n"
    loaded = load_data("<profile>", text)
    if loaded != data:  # never write a file that says something else than was probed
        raise AssertionError(f"rendered profile does not load back: {loaded!r} != {data!r}")
    return text
