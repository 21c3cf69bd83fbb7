"""The backend profile format (``skiplists/<backend>/profile.yaml``) and its checks.

One table, ``KEYS``, says what each key holds; :func:`check_profile` checks a document
loaded with positions (``yamlpos.load_yaml``) against it and returns ``Problem``s with
``file:line``.  ``load_profile`` refuses a file with any error (first one, one line);
``torchconform skiplist lint`` prints them all.  docs/profiles.md documents every key
(tests/test_backend_init.py checks that it names each one), and ``backend init``
writes the same keys.
"""
from __future__ import annotations

import re

from torchconform.core.claims import FEATURES
from torchconform.core.yamlpos import PosDict, PosList, Problem, suggest

# key -> (kind, what it holds).  Kinds: str, module (dotted module name), call
# ("module:function"), regexes (list of regular expressions), names (list of strings),
# mapping, bool.
KEYS = {
    "name": ("str", "the profile's name: builds are <device>-<name>-<time>, series group by it (default: device)"),
    "device": ("str", "torch device type under test (required): refdev, cuda, cpu, any PrivateUse1 name"),
    "description": ("str", "free text shown with the profile"),
    "backend_module": ("module", "module whose import registers the backend (empty: torch's autoload or in-tree)"),
    "setup": ("call", "module:function called once per process after the import (refdev: its load())"),
    "compile_backend": ("str", "torch.compile backend of the compile variants "
                               "(default: inductor for cpu/cuda/xpu/mps, aot_eager for any other device)"),
    "backend_names": ("names", "dispatch-key spellings of this backend (PrivateUse1, ...); empty: any backend"),
    "missing_op_patterns": ("regexes", "the backend's own 'operator not implemented' messages; a (?P<op>...) group"),
    "fallback_patterns": ("regexes", "the backend's own 'fell back to CPU' warnings; a (?P<op>...) group"),
    "unsupported_dtype_patterns": ("regexes", "messages saying the device refuses a dtype"),
    "not_executed_patterns": ("regexes", "messages saying a compiled function returned placeholders without running"),
    "fallback_counter": ("call", "module:function returning {operator: count} of CPU fallbacks so far"),
    "fallback_reset": ("call", "module:function resetting that count (called before each test)"),
    "dtype_policy": ("mapping", "dtypes the device refuses (unsupported) or computes at lower precision (downcast)"),
    "worker_env": ("str", "environment variable pinning an xdist worker to one device index (CUDA_VISIBLE_DEVICES)"),
    "trait_off": ("call", "module:function (trait, folder) -> {env: value} running the backend with a trait off"),
    "env": ("mapping", "environment variables set (if unset) before the backend loads; part of repro commands"),
    "distributed": ("mapping", "how the distributed suite runs on the device (c10d backend, ranks per host, ...)"),
    "tracking": ("mapping", "the backend's own operator-tracking functions (fallback_ops, executed_ops, clear): "
                            "fallback and host_only evidence from the backend itself"),
    "no_fallback_env": ("mapping", "environment variables set before the backend loads under `run --no-fallback` "
                                   "(the backend's own strict switches)"),
    "claims": ("mapping", "what the backend claims to support: operators (patterns), dtypes, features; or "
                          "{from: module:function} to ask the backend (the support manifest, `torchconform claims`)"),
}
REQUIRED = ("device",)

DTYPE_POLICY_KEYS = {
    "unsupported": ("dtypes", "dtypes the device refuses: their tests are skip_backend/unsupported_dtype"),
    "downcast": ("mapping", "{dtype: dtype the device computes it in}, or {from: module:function} to ask the backend"),
    "downcast_tolerances": ("bool", "compare a downcast dtype at its downcast dtype's tolerances (default true)"),
    # written by load_profile when it resolves downcast.from; harmless in a file
    "downcast_from": ("call", "where a derived downcast came from (set by torchconform, not written by hand)"),
}
DISTRIBUTED_KEYS = {
    "c10d_backend": ("str", "c10d backend of the device type ('' : none known)"),
    "ranks_per_host": ("count", "ranks one host runs (0: the device module's device_count())"),
    "device_env": ("str", "variable pinning a rank to its device before the backend loads ('': set_device)"),
    "missing_collective_patterns": ("regexes", "the backend's 'collective not implemented' messages; "
                                               "a (?P<collective>...) group"),
}

# claims (torchconform/core/claims.py judges them against a build's results and census)
CLAIMS_KEYS = {
    "operators": ("patterns", "fnmatch patterns: with :: ATen overloads (aten::add = every overload), "
                              "without OpInfo names (nn.functional.*)"),
    "dtypes": ("dtypes", "dtypes the backend claims (float32, bfloat16, ...)"),
    "features": ("features", f"features it claims: {', '.join(FEATURES)}"),
    "from": ("call", "module:function returning the claims as a mapping (refdev: torchconform.refdev:declared_claims)"),
}

# tracking: names of functions of ``module`` (default: the profile's backend_module; a run's
# --backend-module stands in for it), each optional; fallback_ops and executed_ops return
# operator names (a list or set, or {operator: count}), clear takes no argument.
TRACKING_KEYS = {
    "module": ("module", "module holding the functions (default: backend_module)"),
    "fallback_ops": ("name", "function returning the operators run through the CPU fallback since the last clear"),
    "executed_ops": ("name", "function returning the operators the device executed since the last clear"),
    "clear": ("name", "function clearing both (called before each test's call)"),
}

_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_CALL = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# the group each pattern list needs (the classifier reads it)
_GROUP = {"missing_op_patterns": "op", "fallback_patterns": "op", "missing_collective_patterns": "collective"}


def check_profile(data, path: str) -> list[Problem]:
    """Every problem of one profile document (``yamlpos.load_yaml``'s result)."""
    problems: list[Problem] = []

    def err(line, message):
        problems.append(Problem(path, line, "profile", message))

    if data is None:
        err(1, "empty profile; write at least `device: <torch device type>` (docs/profiles.md)")
        return problems
    if not isinstance(data, PosDict):
        err(getattr(data, "line", 1), "a profile must be a mapping of keys (top level must be a mapping); "
                                      "see docs/profiles.md")
        return problems
    for key in data:
        if key not in KEYS:
            err(data.line_of(key), f"unknown key {key!r} ({suggest(key, list(KEYS))}); every key: docs/profiles.md")
    for key in REQUIRED:
        if not data.get(key):
            err(data.line, f"missing {key!r}; name the torch device type, e.g. device: refdev")
    for key, (kind, _) in KEYS.items():
        if key in data and key not in ("dtype_policy", "env", "distributed", "tracking", "no_fallback_env", "claims"):
            _check_value(data[key], kind, key, data.line_of(key), err)
    if "dtype_policy" in data:
        _check_section(data, "dtype_policy", DTYPE_POLICY_KEYS, err)
        policy = data["dtype_policy"]
        if isinstance(policy, PosDict) and isinstance(policy.get("downcast"), PosDict):
            _check_downcast(policy["downcast"], policy.line_of("downcast"), err)
    if "distributed" in data:
        _check_section(data, "distributed", DISTRIBUTED_KEYS, err)
    if "tracking" in data:
        _check_section(data, "tracking", TRACKING_KEYS, err)
        tracking = data["tracking"]
        if isinstance(tracking, PosDict) and not any(tracking.get(k) for k in ("fallback_ops", "executed_ops")):
            err(data.line_of("tracking"), "tracking names no function; give fallback_ops and/or executed_ops "
                                          "(e.g. fallback_ops: get_fallback_ops)")
    if "claims" in data:
        _check_section(data, "claims", CLAIMS_KEYS, err)
        claims = data["claims"]
        if isinstance(claims, PosDict) and "from" in claims and len(claims) > 1:
            err(claims.line_of("from"), "claims: `from` asks the backend for every claim; write no operators, dtypes "
                                        "or features beside it")
    for key in ("env", "no_fallback_env"):
        if key not in data:
            continue
        env = data[key]
        if env is not None and not isinstance(env, PosDict):
            err(data.line_of(key), f"{key!r} must be a mapping {{VARIABLE: value}}")
        for name, value in (env or {}).items():
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                err(env.line_of(name), f"{key}: {name!r} is not an environment variable name")
            elif isinstance(value, (dict, list)):
                err(env.line_of(name), f"{key}.{name} must be a single value (text or number)")
    return sorted(problems, key=lambda p: p.line)


def _check_section(data, key, keys, err) -> None:
    section = data[key]
    if section is None:
        return
    if not isinstance(section, PosDict):
        err(data.line_of(key), f"{key!r} must be a mapping; keys: {', '.join(keys)}")
        return
    for sub, value in section.items():
        if sub not in keys:
            err(section.line_of(sub), f"unknown key {sub!r} under {key!r} ({suggest(sub, list(keys))})")
        elif not (sub == "downcast" and isinstance(value, PosDict)):
            _check_value(value, keys[sub][0], f"{key}.{sub}", section.line_of(sub), err)


def _check_downcast(downcast, line, err) -> None:
    if "from" in downcast:
        if len(downcast) > 1:
            err(line, "dtype_policy.downcast: `from` derives the whole mapping; write no dtypes beside it")
        _check_value(downcast["from"], "call", "dtype_policy.downcast.from", downcast.line_of("from"), err)
        return
    for source, target in downcast.items():
        for dtype in (source, target):
            if not _is_dtype(dtype):
                err(downcast.line_of(source), f"dtype_policy.downcast: {dtype!r} is not a torch dtype "
                                              "(write names like float64: float32)")
                break


def _check_value(value, kind, key, line, err) -> None:
    if value is None:
        return  # an empty value means the default
    if kind in ("str", "module", "call"):
        if not isinstance(value, str):
            err(line, f"{key} must be text, got {type(value).__name__} {value!r}")
        elif value and kind == "module" and not _MODULE.match(value):
            err(line, f"{key} {value!r} is not a module name (dotted identifiers, e.g. torch_mybackend)")
        elif value and kind == "call" and not _CALL.match(value):
            err(line, f"{key} {value!r} must be module:function, e.g. torch_mybackend:fallback_counts")
    elif kind == "name":
        if not isinstance(value, str) or not value.isidentifier():
            err(line, f"{key} must be a function name (an identifier such as get_fallback_ops), got {value!r}")
    elif kind == "bool":
        if not isinstance(value, bool):
            err(line, f"{key} must be true or false, got {value!r}")
    elif kind == "count":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            err(line, f"{key} must be a whole number (0: the device count), got {value!r}")
    elif kind == "mapping":
        if not isinstance(value, dict):
            err(line, f"{key} must be a mapping")
    elif kind in ("names", "regexes", "dtypes", "patterns", "features"):
        if not isinstance(value, PosList) or not all(isinstance(x, str) for x in value):
            err(line, f"{key} must be a list of text items (each on a `- ` line, or [a, b])")
            return
        for item, item_line in zip(value, value.item_lines):
            if kind == "regexes":
                _check_regex(item, key, item_line, err)
            elif kind == "dtypes" and not _is_dtype(item):
                err(item_line, f"{key}: unknown dtype {item!r}; use torch names like float64, complex128")
            elif kind == "features" and item not in FEATURES:
                err(item_line, f"{key}: unknown feature {item!r} ({suggest(item, list(FEATURES))}); "
                               f"use some of {', '.join(FEATURES)}")
            elif kind == "patterns" and (not item.strip() or " " in item or item.count("::") > 1):
                err(item_line, f"{key}: {item!r} is not an operator pattern; write aten::add, aten::add.Tensor, "
                               "aten::linalg_* or an OpInfo name such as nn.functional.relu")


def _check_regex(pattern, key, line, err) -> None:
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        err(line, f"bad regex in {key}: {pattern!r} ({exc}); fix the pattern")
        return
    group = _GROUP.get(key.rpartition(".")[2])
    if group and group not in rx.groupindex:
        err(line, f"{key} pattern {pattern!r} needs a (?P<{group}>...) group")


def _is_dtype(name) -> bool:
    import torch

    return isinstance(name, str) and isinstance(getattr(torch, name.removeprefix("torch."), None), torch.dtype)


def is_profile_document(data) -> bool:
    """A loaded YAML document that is a backend profile rather than a skiplist (lint tells them apart)."""
    return isinstance(data, dict) and "entries" not in data and ("device" in data or "backend" not in data)
