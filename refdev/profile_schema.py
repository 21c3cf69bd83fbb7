"""The refdev profile format (``refdev/profiles/*.yaml``), declared once as pydantic models.

:class:`RefdevProfileFile` and its sections say which keys a refdev operator profile holds,
their types and the message for a wrong value; ``profiles.load_profile`` validates a file
through them (``core/yamlschema.py``), so its first problem reads
``refdev profile FILE:LINE: what is wrong; fix the file``.  What the values mean (hash share,
precedence, boxed fallback, traits): the docstring of ``refdev/profiles.py``.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, Field, PlainValidator, field_validator, model_validator

from torchconform.core.claims import FEATURES
from torchconform.core.yamlschema import Strict, check, fail, field

# fallback.mode: "counted" (refdev's own warned, counted per-operator fallback kernels for
# fallback.ops; every other operator without a kernel is missing) or "boxed" (as a typical
# real backend: PyTorch's standard boxed CPU fallback, at::native::cpu_fallback, serves
# every operator refdev has no kernel for; no warning, no counter; see csrc/boxed_fallback.cpp).
FALLBACK_MODES = ("counted", "boxed")
# Canonical collective names (the distributed suite's ``collective_<name>`` tests): what refccl
# (distributed.py) implements and a profile's ``collectives.missing`` may name.
COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all",
               "barrier", "send_recv", "gather", "scatter", "reduce")
# slow_ops: {operator: seconds} added to every call of the operator on refdev (after it computed), so a
# perf run sees a deliberately slowed operator (docs/perf.md); at most MAX_SLOW_S per call.
MAX_SLOW_S = 10.0
OP_NAME = re.compile(r"^aten::[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?$")


# Dtype names every supported torch has: checked without importing torch (seconds of every
# CLI start-up that loads a profile); any other name is asked of torch itself.
_COMMON_DTYPES = frozenset(
    "bool uint8 int8 int16 int32 int64 float16 bfloat16 float32 float64 complex32 complex64 complex128 "
    "half float double cfloat cdouble chalf short int long".split())


def is_dtype_name(name: str) -> bool:
    """A torch dtype name (complex64, float16...)."""
    if name in _COMMON_DTYPES:
        return True
    import torch

    return isinstance(getattr(torch, name, None), torch.dtype)


def _names(valid, a_name: str):
    """A list of strings each passing ``valid`` (``a_name`` describes one in the error); the
    field's ``bad`` text (:func:`_list_of`) says what the list holds."""
    def check_item(value: str) -> str:
        if not valid(value):
            raise fail(f"'{{where}}' entry {value!r} is not {a_name}")
        return value
    return Optional[list[Annotated[str, AfterValidator(check_item)]]]


def _list_of(names: str) -> str:
    return f"'{{where}}' must be a list of {names}"


OpNames = _names(OP_NAME.match, "an operator name like aten::add or aten::add.out")
TraitDtypes = _names(is_dtype_name, "a torch dtype name like complex64")
CollectiveNames = _names(lambda n: n in COLLECTIVES, f"one of {', '.join(COLLECTIVES)}")
ClaimDtypes = _names(is_dtype_name, "a torch dtype name like float32")
ClaimFeatures = _names(lambda f: f in FEATURES, f"one of {', '.join(FEATURES)}")
_OPS = _list_of("operator names like aten::add.out")
_MISSING_BAD = "'missing' must be a mapping with keys ops, salt, share_percent"
_FALLBACK_BAD = "'fallback' must be a mapping with the keys ops and mode"
_COLLECTIVES_BAD = "'collectives' must be a mapping with 'missing' and 'synchronous'"
_CLAIMS_BAD = "'claims' must be a mapping with the keys dtypes, features, operators"


class Missing(Strict):
    share_percent: Annotated[float, Field(ge=0, le=100)] = field(
        0, bad="'missing.share_percent' must be a number from 0 to 100",
        doc="share of operator base names missing, picked by sha1(salt:name)")
    salt: Any = field(doc="salt of the hash (another salt: another choice of operators)")
    ops: OpNames = field(bad=_OPS, doc="operators missing whatever the hash says")


class Fallback(Strict):
    ops: OpNames = field(bad=_OPS, doc="operators computed through refdev's warned, counted CPU fallback")
    mode: Literal[FALLBACK_MODES] = field("counted", doc="counted (refdev's own) or boxed (PyTorch's boxed "
                                                          "CPU fallback for every operator without a kernel)")

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, mode):
        if mode not in FALLBACK_MODES:
            raise fail(f"'fallback.mode' must be one of {', '.join(FALLBACK_MODES)}, not {mode!r}")
        return mode

    @model_validator(mode="after")
    def _boxed_lists_none(self):
        if self.mode == "boxed" and self.ops:
            raise fail("'fallback.ops' has no meaning with 'fallback.mode: boxed' (PyTorch's boxed CPU fallback "
                       "serves every operator without a kernel); list those operators under 'missing.ops' instead")
        return self


_TRAIT_BOOL = "trait {key!r} must be true or false"


class Traits(Strict):
    """Boolean and list traits (their defaults are the ``TRAITS`` table)."""

    float64_as_float32: bool = field(False, bad=_TRAIT_BOOL, doc="float64 computed as float32")
    copies_noncontiguous: bool = field(False, bad=_TRAIT_BOOL, doc="non-contiguous inputs copied first")
    # dtypes the device cannot hold; allocating one raises "<device> does not support dtype X (profile P)"
    unsupported_dtypes: TraitDtypes = field(
        bad=_list_of("dtype names like complex64"), doc="dtypes the device cannot hold")
    # operators the "compiler" of torch.compile(backend="refdev") cannot lower: graphs with them
    # compile without device execution and return zero-filled placeholders, with a warning
    compile_placeholder_ops: OpNames = field(bad=_OPS, doc="operators torch.compile(backend='refdev') cannot lower")
    # operators whose kernel retains one device allocation per call
    leaks_ops: OpNames = field(bad=_OPS, doc="operators whose kernel retains one device allocation per call")


# Boolean traits and list traits (defaults)
TRAITS = {name: (info.default if info.default is not None else []) for name, info in Traits.model_fields.items()}


class Collectives(Strict):
    # refccl, refdev's c10d backend (refdev/distributed.py): collectives it lacks, and
    # whether a collective finishes before it returns (then nothing overlaps it)
    missing: CollectiveNames = field(
        bad=_list_of("collective names"), doc="collectives refccl lacks")
    synchronous: bool = field(False, bad="'collectives.synchronous' must be true or false",
                              doc="a collective finishes before it returns")


def _op_key(op: Any) -> Any:
    if not isinstance(op, str) or not OP_NAME.match(op):
        raise fail(f"'slow_ops' key {op!r} is not an operator name like aten::add or aten::add.Tensor")
    return op


def _seconds(seconds: Any) -> Any:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= MAX_SLOW_S:
        raise fail(f"'slow_ops' delay of {{key}} must be a number of seconds above 0 and at most "
                   f"{MAX_SLOW_S:g}, not {seconds!r}")
    return float(seconds)


class KernelsOf(Strict):
    kernels_of: str = field(..., doc="another refdev profile whose kernels are claimed")


_PATTERNS = "operator patterns like aten::add or nn.functional.*"


def _operators(value):
    """claims.operators: ``kernels``, {kernels_of: PROFILE} or a list of operator patterns."""
    if value is None or value == "kernels":
        return value
    if isinstance(value, dict):
        if set(value) != {"kernels_of"} or not isinstance(value["kernels_of"], str):
            raise fail("'claims.operators' as a mapping is {kernels_of: PROFILE}")
        return {"kernels_of": value["kernels_of"]}
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(f"'claims.operators' must be a list of {_PATTERNS}")
    for v in value:
        if not v.strip() or " " in v:
            raise fail(f"'claims.operators' entry {v!r} is not an operator pattern")
    return list(value)


class Claims(Strict):
    # what refdev running this profile claims (the backend profile's claims.from asks
    # torchconform.refdev:declared_claims): operators as patterns, or ``kernels`` (every overload
    # this profile gives a refdev kernel: describe's implemented + fallback) or {kernels_of: PROFILE}
    # (those of another refdev profile: a test profile claiming what it then lacks); dtypes; features.
    operators: Annotated[Any, PlainValidator(_operators, json_schema_input_type=Optional[
        Union[Literal["kernels"], KernelsOf, list[str]]])] = field(
        doc="kernels, {kernels_of: PROFILE} or a list of " + _PATTERNS)
    dtypes: ClaimDtypes = field(
        bad=_list_of("dtype names like float32"), doc="dtypes claimed")
    features: ClaimFeatures = field(
        bad=_list_of("feature names"), doc=f"features claimed: {', '.join(FEATURES)}")


class RefdevProfileFile(Strict):
    """A refdev operator profile."""

    name: Any = field(doc="the profile's name (default: the file's name)")
    description: Any = field(doc="free text")
    missing: Optional[Missing] = field(bad=_MISSING_BAD, doc="operators refdev lacks")
    fallback: Optional[Fallback] = field(bad=_FALLBACK_BAD, doc="operators refdev runs through a CPU fallback")
    always_on: OpNames = field(bad=_OPS, doc="operators never missing nor fallback")
    traits: Optional[Traits] = field(bad="'traits' must be a mapping", doc="how the device misbehaves")
    collectives: Optional[Collectives] = field(bad=_COLLECTIVES_BAD, doc="what refccl lacks")
    slow_ops: Optional[dict[Annotated[Any, AfterValidator(_op_key)], Annotated[Any, AfterValidator(_seconds)]]] = \
        field(bad="'slow_ops' must be a mapping of operator names to seconds, e.g. {{aten::add.Tensor: 0.002}}",
              doc="operator -> seconds added to each call")
    claims: Optional[Claims] = field(bad=_CLAIMS_BAD, doc="what refdev running this profile claims")


KEYS = tuple(RefdevProfileFile.model_fields)


def _unknown(parent: str, key) -> str:
    if parent == "traits":
        return f"unknown trait {key!r}; known: {', '.join(TRAITS)}"
    if parent == "collectives":
        return f"unknown key(s) {key} under 'collectives'; known: missing, synchronous"
    said = {"missing": _MISSING_BAD, "fallback": _FALLBACK_BAD, "claims": _CLAIMS_BAD}
    if parent in said:
        return said[parent]
    return f"unknown key(s) {key}; allowed: {', '.join(sorted(KEYS))}"


def _missing_key(parent: str, key) -> str:
    return f"missing {key!r} under {parent!r}"


def validate(data):
    """(RefdevProfileFile or None, [Failure] by line) of one document (``yamlpos.load_yaml``'s)."""
    if not isinstance(data, dict):
        return None, [("top", getattr(data, "line", 1),
                       "top level must be a mapping with keys " + ", ".join(sorted(KEYS)))]
    model, failures = check(RefdevProfileFile, data, unknown=_unknown, missing=_missing_key)
    out = [("schema", f.line, f.message) for f in failures]
    unknown = [f for f in failures if len(f.loc) == 1 and f.message.startswith("unknown key(s) ")]
    if len(unknown) > 1:   # every unknown top-level key in one line, as the allowed ones are
        names = ", ".join(sorted(str(f.loc[0]) for f in unknown))
        out = [("schema", unknown[0].line, _unknown("", names))] + [o for o in out if not o[2].startswith("unknown key(s) ")]
    return model, out
