"""The backend profile format (``skiplists/<backend>/profile.yaml``), declared once.

:class:`BackendProfileFile` and its sections are the format: each field's kind, meaning
and the message for a wrong value.  :func:`check_profile` validates a document loaded with
positions (``yamlpos.load_yaml``) through them (``core/yamlschema.py``) and returns
``Problem``s with ``file:line``.  ``load_profile`` refuses a file with any error (first one,
one line); ``torchconform skiplist lint`` prints them all.  docs/profiles.md documents every
key (tests/test_backend_init.py checks that it names each one; ``KEYS`` and the section
tables are read from the models), and ``backend init`` writes the same keys.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Optional

from pydantic import AfterValidator, Field, field_validator, model_validator

from torchconform.core.claims import FEATURES
from torchconform.core.yamlpos import PosDict, Problem, suggest
from torchconform.core.yamlschema import Strict, check, fail, field, kinds, problems

_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_CALL = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# the words for a value of the wrong type, per kind
_TEXT = "{where} must be text, got {type} {value!r}"
_LIST = "{where} must be a list of text items (each on a `- ` line, or [a, b])"
_MAPPING = "{where} must be a mapping"
_BOOL = "{where} must be true or false, got {value!r}"
_NAME = "{where} must be a function name (an identifier such as get_fallback_ops), got {value!r}"
_COUNT = "{where} must be a whole number (0: the device count), got {value!r}"


def _module(value: str) -> str:
    if value and not _MODULE.match(value):
        raise fail(f"{{where}} {value!r} is not a module name (dotted identifiers, e.g. torch_mybackend)")
    return value


def _call(value: str) -> str:
    if value and not _CALL.match(value):
        raise fail(f"{{where}} {value!r} must be module:function, e.g. torch_mybackend:fallback_counts")
    return value


def _name(value: str) -> str:
    if not value.isidentifier():
        raise fail(f"{{where}} must be a function name (an identifier such as get_fallback_ops), got {value!r}")
    return value


def is_dtype(name) -> bool:
    import torch

    return isinstance(name, str) and isinstance(getattr(torch, name.removeprefix("torch."), None), torch.dtype)


def _dtype(value: str) -> str:
    if not is_dtype(value):
        raise fail(f"{{where}}: unknown dtype {value!r}; use torch names like float64, complex128")
    return value


def _feature(value: str) -> str:
    if value not in FEATURES:
        raise fail(f"{{where}}: unknown feature {value!r} ({suggest(value, list(FEATURES))}); "
                   f"use some of {', '.join(FEATURES)}")
    return value


def _pattern(value: str) -> str:
    if not value.strip() or " " in value or value.count("::") > 1:
        raise fail(f"{{where}}: {value!r} is not an operator pattern; write aten::add, aten::add.Tensor, "
                   "aten::linalg_* or an OpInfo name such as nn.functional.relu")
    return value


def _regex(group: str | None):
    """A regular expression; with ``group``, one that has a (?P<group>...) group (the classifier reads it)."""
    def check_regex(value: str) -> str:
        try:
            rx = re.compile(value)
        except re.error as exc:
            raise fail(f"bad regex in {{where}}: {value!r} ({exc}); fix the pattern") from None
        if group and group not in rx.groupindex:
            raise fail(f"{{where}} pattern {value!r} needs a (?P<{group}>...) group")
        return value
    return check_regex


Text = Optional[str]
Module = Optional[Annotated[str, AfterValidator(_module)]]
Call = Optional[Annotated[str, AfterValidator(_call)]]
FunctionName = Optional[Annotated[str, AfterValidator(_name)]]
Names = Optional[list[str]]
Dtypes = Optional[list[Annotated[str, AfterValidator(_dtype)]]]


def _regexes(group: str | None = None):
    return Optional[list[Annotated[str, AfterValidator(_regex(group))]]]


Regexes = _regexes()
OpRegexes = _regexes("op")
CollectiveRegexes = _regexes("collective")


def _env_name(name: Any) -> Any:
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise fail(f"{{parent}}: {name!r} is not an environment variable name")
    return name


def _env_value(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        raise fail("{where} must be a single value (text or number)")
    return value


EnvMapping = Optional[dict[Annotated[Any, AfterValidator(_env_name)], Annotated[Any, AfterValidator(_env_value)]]]
_ENV_BAD = "{where!r} must be a mapping {{VARIABLE: value}}"


class DtypePolicy(Strict):
    unsupported: Dtypes = field(kind="dtypes", bad=_LIST,
                                doc="dtypes the device refuses: their tests are skip_backend/unsupported_dtype")
    downcast: Optional[dict] = field(kind="mapping", bad=_MAPPING,
                                     doc="{dtype: dtype the device computes it in}, or {from: module:function} "
                                         "to ask the backend")
    downcast_tolerances: Optional[bool] = field(kind="bool", bad=_BOOL,
                                                doc="compare a downcast dtype at its downcast dtype's tolerances "
                                                    "(default true)")
    # written by load_profile when it resolves downcast.from; harmless in a file
    downcast_from: Call = field(kind="call", bad=_TEXT,
                                doc="where a derived downcast came from (set by torchconform, not written by hand)")

    @field_validator("downcast")
    @classmethod
    def _downcast(cls, downcast):
        if downcast is None:
            return downcast
        if "from" in downcast:
            if len(downcast) > 1:
                raise fail("dtype_policy.downcast: `from` derives the whole mapping; write no dtypes beside it")
            source = downcast["from"]
            if source is not None and not isinstance(source, str):
                raise fail(f"dtype_policy.downcast.from must be text, got {type(source).__name__} {source!r}",
                           at=("from",))
            if source and not _CALL.match(source):
                raise fail(f"dtype_policy.downcast.from {source!r} must be module:function, "
                           "e.g. torch_mybackend:fallback_counts", at=("from",))
            return downcast
        for source, target in downcast.items():
            for dtype in (source, target):
                if not is_dtype(dtype):
                    raise fail(f"dtype_policy.downcast: {dtype!r} is not a torch dtype "
                               "(write names like float64: float32)")
        return downcast


class Distributed(Strict):
    c10d_backend: Text = field(kind="str", bad=_TEXT, doc="c10d backend of the device type ('' : none known)")
    ranks_per_host: Optional[Annotated[int, Field(ge=0)]] = field(
        kind="count", bad=_COUNT, doc="ranks one host runs (0: the device module's device_count())")
    device_env: Text = field(kind="str", bad=_TEXT,
                             doc="variable pinning a rank to its device before the backend loads ('': set_device)")
    missing_collective_patterns: CollectiveRegexes = field(
        kind="regexes", bad=_LIST, doc="the backend's 'collective not implemented' messages; "
                                       "a (?P<collective>...) group")


# tracking: names of functions of ``module`` (default: the profile's backend_module; a run's
# --backend-module stands in for it), each optional; fallback_ops and executed_ops return
# operator names (a list or set, or {operator: count}), clear takes no argument.
class Tracking(Strict):
    module: Module = field(kind="module", bad=_TEXT, doc="module holding the functions (default: backend_module)")
    fallback_ops: FunctionName = field(kind="name", bad=_NAME,
                                       doc="function returning the operators run through the CPU fallback "
                                           "since the last clear")
    executed_ops: FunctionName = field(kind="name", bad=_NAME,
                                       doc="function returning the operators the device executed since the "
                                           "last clear")
    clear: FunctionName = field(kind="name", bad=_NAME, doc="function clearing both (called before each test's call)")

    @model_validator(mode="after")
    def _names_one(self):
        if not (self.fallback_ops or self.executed_ops):
            raise fail("tracking names no function; give fallback_ops and/or executed_ops "
                       "(e.g. fallback_ops: get_fallback_ops)")
        return self


# claims (torchconform/core/claims.py judges them against a build's results and census)
class Claims(Strict):
    operators: Optional[list[Annotated[str, AfterValidator(_pattern)]]] = field(
        kind="patterns", bad=_LIST, doc="fnmatch patterns: with :: ATen overloads (aten::add = every overload), "
                                        "without OpInfo names (nn.functional.*)")
    dtypes: Dtypes = field(kind="dtypes", bad=_LIST, doc="dtypes the backend claims (float32, bfloat16, ...)")
    features: Optional[list[Annotated[str, AfterValidator(_feature)]]] = field(
        kind="features", bad=_LIST, doc=f"features it claims: {', '.join(FEATURES)}")
    from_: Call = field(alias="from", kind="call", bad=_TEXT,
                        doc="module:function returning the claims as a mapping "
                            "(refdev: torchconform.refdev:declared_claims)")

    @model_validator(mode="before")
    @classmethod
    def _from_alone(cls, data):
        if isinstance(data, dict) and "from" in data and len(data) > 1:
            raise fail("claims: `from` asks the backend for every claim; write no operators, dtypes "
                       "or features beside it", at=("from",))
        return data


def _device(value):
    if not value:
        raise fail("missing 'device'; name the torch device type, e.g. device: refdev")
    return value


class BackendProfileFile(Strict):
    """A backend profile: how to load a backend and how to recognise its messages."""

    name: Text = field(kind="str", bad=_TEXT, doc="the profile's name: builds are <device>-<name>-<time>, "
                                                  "series group by it (default: device)")
    device: Annotated[Optional[str], AfterValidator(_device)] = field(
        kind="str", bad=_TEXT, validate_default=True,
        doc="torch device type under test (required): refdev, cuda, cpu, any PrivateUse1 name")
    description: Text = field(kind="str", bad=_TEXT, doc="free text shown with the profile")
    backend_module: Module = field(kind="module", bad=_TEXT, doc="module whose import registers the backend "
                                                                 "(empty: torch's autoload or in-tree)")
    setup: Call = field(kind="call", bad=_TEXT, doc="module:function called once per process after the import "
                                                    "(refdev: its load())")
    compile_backend: Text = field(kind="str", bad=_TEXT, doc="torch.compile backend of the compile variants "
                                                             "(default: inductor for cpu/cuda/xpu/mps, aot_eager "
                                                             "for any other device)")
    backend_names: Names = field(kind="names", bad=_LIST, doc="dispatch-key spellings of this backend "
                                                              "(PrivateUse1, ...); empty: any backend")
    missing_op_patterns: OpRegexes = field(kind="regexes", bad=_LIST, doc="the backend's own 'operator not "
                                                                              "implemented' messages; a (?P<op>...) group")
    fallback_patterns: OpRegexes = field(kind="regexes", bad=_LIST, doc="the backend's own 'fell back to CPU' "
                                                                            "warnings; a (?P<op>...) group")
    unsupported_dtype_patterns: Regexes = field(kind="regexes", bad=_LIST,
                                                  doc="messages saying the device refuses a dtype")
    not_executed_patterns: Regexes = field(kind="regexes", bad=_LIST, doc="messages saying a compiled function "
                                                                            "returned placeholders without running")
    fallback_counter: Call = field(kind="call", bad=_TEXT,
                                   doc="module:function returning {operator: count} of CPU fallbacks so far")
    fallback_reset: Call = field(kind="call", bad=_TEXT,
                                 doc="module:function resetting that count (called before each test)")
    dtype_policy: Optional[DtypePolicy] = field(
        kind="mapping", bad="{where!r} must be a mapping; keys: unsupported, downcast, downcast_tolerances, "
                            "downcast_from",
        doc="dtypes the device refuses (unsupported) or computes at lower precision (downcast)")
    worker_env: Text = field(kind="str", bad=_TEXT, doc="environment variable pinning an xdist worker to one "
                                                        "device index (CUDA_VISIBLE_DEVICES)")
    trait_off: Call = field(kind="call", bad=_TEXT, doc="module:function (trait, folder) -> {env: value} running "
                                                        "the backend with a trait off")
    env: EnvMapping = field(kind="mapping", bad=_ENV_BAD, doc="environment variables set (if unset) before the "
                                                              "backend loads; part of repro commands")
    distributed: Optional[Distributed] = field(
        kind="mapping", bad="{where!r} must be a mapping; keys: c10d_backend, ranks_per_host, device_env, "
                            "missing_collective_patterns",
        doc="how the distributed suite runs on the device (c10d backend, ranks per host, ...)")
    tracking: Optional[Tracking] = field(
        kind="mapping", bad="{where!r} must be a mapping; keys: module, fallback_ops, executed_ops, clear",
        doc="the backend's own operator-tracking functions (fallback_ops, executed_ops, clear): "
            "fallback and host_only evidence from the backend itself")
    no_fallback_env: EnvMapping = field(kind="mapping", bad=_ENV_BAD,
                                        doc="environment variables set before the backend loads under "
                                            "`run --no-fallback` (the backend's own strict switches)")
    claims: Optional[Claims] = field(
        kind="mapping", bad="{where!r} must be a mapping; keys: operators, dtypes, features, from",
        doc="what the backend claims to support: operators (patterns), dtypes, features; or "
            "{from: module:function} to ask the backend (the support manifest, `torchconform claims`)")


# key -> (kind, what it holds), read from the models (profile_init and the docs test use them)
KEYS = kinds(BackendProfileFile)
DTYPE_POLICY_KEYS = kinds(DtypePolicy)
DISTRIBUTED_KEYS = kinds(Distributed)
TRACKING_KEYS = kinds(Tracking)
CLAIMS_KEYS = kinds(Claims)
_SECTIONS = {"dtype_policy": DTYPE_POLICY_KEYS, "distributed": DISTRIBUTED_KEYS, "tracking": TRACKING_KEYS,
             "claims": CLAIMS_KEYS}


def _unknown(parent: str, key) -> str:
    if not parent:
        return f"unknown key {key!r} ({suggest(key, list(KEYS))}); every key: docs/profiles.md"
    keys = list(_SECTIONS.get(parent, {}))
    return f"unknown key {key!r} under {parent!r} ({suggest(key, keys)})"


def _missing(parent: str, key) -> str:
    return f"missing {key!r} under {parent!r}"


def validate_profile(data, path: str):
    """(BackendProfileFile or None, [Problem] by line) of one document (``load_yaml``'s result)."""
    if data is None:
        return None, [Problem(path, 1, "profile", "empty profile; write at least `device: <torch device type>` "
                                                  "(docs/profiles.md)")]
    if not isinstance(data, PosDict):
        return None, [Problem(path, getattr(data, "line", 1), "profile", "a profile must be a mapping of keys "
                                                                         "(top level must be a mapping); "
                                                                         "see docs/profiles.md")]
    model, failures = check(BackendProfileFile, data, unknown=_unknown, missing=_missing)
    return model, problems(failures, path, code="profile")


def check_profile(data, path: str) -> list[Problem]:
    """Every problem of one profile document (``yamlpos.load_yaml``'s result), by line."""
    return validate_profile(data, path)[1]


def is_profile_document(data) -> bool:
    """A loaded YAML document that is a backend profile rather than a skiplist (lint tells them apart)."""
    return isinstance(data, dict) and "entries" not in data and ("device" in data or "backend" not in data)
