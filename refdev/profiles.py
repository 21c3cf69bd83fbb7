"""refdev profiles: which operators the reference device implements, runs
through a CPU fallback, or lacks.

A profile is a YAML file (shipped ones live in refdev/profiles/).  The operator
universe is every ``aten`` overload that has a CPU kernel and no composite
kernel (composite kernels already run on any backend by decomposing), plus the
operators that need a direct registration (convolution).  From that universe:

* ``missing``: operators whose *base name* (``aten::add`` for ``aten::add.out``)
  falls in the profile's hash share, plus explicitly listed ones.  The hash is
  sha1(salt + ":" + base name), so the choice is stable across runs, machines
  and torch versions, and all overloads of one operator go missing together,
  as they do on a real young backend.
* ``fallback``: listed operators; they compute but warn and are counted.
* operators producing non-strided tensors (sparse, quantized, mkldnn, nested)
  are missing in every profile (``NON_STRIDED``).
* all of this is about the PrivateUse1 dispatch key (strided device tensors); what
  refdev registers under its other keys (Autograd, Autocast, Sparse, Quantized...)
  is ``Resolved.dispatch_keys()``.
* precedence: non-strided > always_on > missing.ops > fallback.ops > the hash share.
* ``always_on``: never missing or fallback, whatever the hash says: what tensor
  creation, printing, copies and PyTorch's comparison helpers need.
* everything else is ``implemented``.
* exceptions: ``convolution_overrideable`` / ``convolution_backward_overrideable`` and
  ``mode.values`` share the class of ``convolution`` / ``convolution_backward`` / ``mode``
  (``PAIRED_OPS``), and overloads with both a CPU kernel and a CompositeExplicitAutograd
  kernel (``native_layer_norm``...) or with a composite that cannot run on a device
  (``DEVICE_BOUND_COMPOSITES``) are never missing: see ``cpu_over_composite_ops``.
* ``fallback.mode: boxed`` makes refdev a backend with PyTorch's standard boxed CPU
  fallback: the same rules pick the operators refdev has a kernel for (``implemented``);
  every other one reaches ``at::native::cpu_fallback`` (``Resolved.without_kernel``).

An entry without an overload (``aten::nonzero``) names every overload of that
operator; one with an overload (``aten::add.out``) names just that one.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass, field

from torchconform.errors import UserError
from torchconform import settings
from torchconform.core.claims import FEATURES
from torchconform.core.yamlpos import YamlError, load_data

PROFILE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles")
DEFAULT_PROFILE = "young-backend"

# Registered directly in C++ (csrc/aten/storage_kernels.cpp): always implemented, never hashed.
NATIVE_OPS = (
    "aten::empty.memory_format", "aten::empty_strided", "aten::as_strided", "aten::view",
    "aten::_reshape_alias", "aten::unfold", "aten::view_as_real", "aten::view_as_complex",
    "aten::resize_", "aten::set_.source_Storage_storage_offset", "aten::set_.source_Storage",
    "aten::set_.source_Tensor", "aten::set_", "aten::_copy_from", "aten::_copy_from_and_resize",
    "aten::_local_scalar_dense",
)
# Composite on CPU, but PrivateUse1 must compute them directly: their
# decompositions pick a backend-specific path that does not exist for PU1.
FORCED_OPS = ("aten::convolution", "aten::convolution_backward")
# ATen's hooks for out-of-tree backends: aten::_convolution (called directly by
# some models, TorchScript and decompositions) selects the "Overrideable"
# backend for PrivateUse1 tensors and calls these.  Each follows its partner's
# classification, so describe() stays true: both computed, or both missing (then
# PyTorch's own "convolution_overrideable not implemented" error names the op).
# The C++ side computes them through the CPU convolution (csrc/aten/compute.cpp).
PAIRED_OPS = {
    "aten::convolution_overrideable": "aten::convolution",
    "aten::convolution_backward_overrideable": "aten::convolution_backward",
    # mode.values has only a CompositeExplicitAutograd kernel, which refuses every
    # device but CPU, CUDA and XPU ("mode only supports CPU, CUDA and XPU device type"):
    # refdev computes it as the CPU does, with the class of torch.mode itself.
    "aten::mode.values": "aten::mode",
}
# Operators whose only kernel is a CompositeExplicitAutograd one that cannot run on a
# PrivateUse1 device: kaiser_window calls a DispatchStub with the tensor's device type
# ("DispatchStub: missing kernel for refdev"), _batch_norm_no_update calls batch_norm_cpu
# on device tensors, and ldexp calls ldexp_stub where its torch does not ask
# is_device_supported first.  refdev computes each on CPU aliases (the stub sees CPU), so
# it equals the CPU; like cpu_over_composite_ops they are never missing (fallback.ops
# applies).  Every overload of each base name.
DEVICE_BOUND_COMPOSITES = ("aten::kaiser_window", "aten::_batch_norm_no_update", "aten::ldexp")
# Operators that produce sparse, quantized, mkldnn or nested tensors: refdev
# holds strided tensors only, so these are missing in every profile (an honest
# dispatcher error instead of a confusing failure when wrapping the result).
# The quantized factories (_empty_affine_quantized, _empty_per_channel_affine_quantized)
# have a CPU kernel that only raises; with a quantized dtype they dispatch to
# Quantized<name>, where refdev has no kernel.
NON_STRIDED = re.compile(r"sparse|^aten::quantize_per|^aten::_make_per_|^aten::to_mkldnn|^aten::_nested_|^aten::dequantize"
                         r"|^aten::_empty_\w*_quantized$")
# What refdev registers under the PrivateUse1 dispatch keys other than PrivateUse1
# itself (mirrors csrc/aten/storage_kernels.cpp; tests/test_refdev_dispatch.py checks both against the
# dispatcher): AutocastPrivateUse1 kernels for these operators (default overloads)
# plus a fallthrough backend fallback; nothing else.
AUTOCAST_OPS = ("aten::addmm", "aten::baddbmm", "aten::bmm", "aten::conv1d", "aten::conv2d", "aten::conv3d",
                "aten::linear", "aten::matmul", "aten::mm")
FALLTHROUGH_KEYS = ("AutocastPrivateUse1",)
_KEYS = {"name", "description", "missing", "fallback", "always_on", "traits", "collectives", "slow_ops", "claims"}
# claims: what refdev running this profile claims (the backend profile's claims.from asks
# torchconform.refdev:declared_claims): operators as patterns, or ``kernels`` (every overload
# this profile gives a refdev kernel: describe's implemented + fallback) or {kernels_of: PROFILE}
# (those of another refdev profile: a test profile claiming what it then lacks); dtypes; features.
_CLAIMS_KEYS = {"operators", "dtypes", "features"}
# slow_ops: {operator: seconds} added to every call of the operator on refdev (after it computed), so a
# perf run sees a deliberately slowed operator (docs/perf.md); at most MAX_SLOW_S per call.
MAX_SLOW_S = 10.0
_COLLECTIVES_KEYS = {"missing", "synchronous"}
# Canonical collective names (the distributed suite's ``collective_<name>`` tests): what refccl
# (distributed.py) implements and a profile's ``collectives.missing`` may name.
COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all",
               "barrier", "send_recv", "gather", "scatter", "reduce")
_MISSING_KEYS = {"share_percent", "salt", "ops"}
_FALLBACK_KEYS = {"ops", "mode"}
# fallback.mode: "counted" (refdev's own warned, counted per-operator fallback kernels for
# fallback.ops; every other operator without a kernel is missing) or "boxed" (as a typical
# real backend: PyTorch's standard boxed CPU fallback, at::native::cpu_fallback, serves
# every operator refdev has no kernel for; no warning, no counter; see csrc/boxed_fallback.cpp).
FALLBACK_MODES = ("counted", "boxed")
# Boolean traits and list traits (defaults).  List traits:
#   unsupported_dtypes:      dtypes the device cannot hold; allocating one raises
#                            "<device> does not support dtype X (profile P)" in C++
#   compile_placeholder_ops: operators the "compiler" of torch.compile(backend="refdev")
#                            cannot lower: graphs with them compile without device
#                            execution and return zero-filled placeholders, with a warning
#   leaks_ops:               operators whose kernel retains one device allocation per call
TRAITS = {"float64_as_float32": False, "copies_noncontiguous": False,
          "unsupported_dtypes": [], "compile_placeholder_ops": [], "leaks_ops": []}
_LIST_TRAITS = tuple(k for k, v in TRAITS.items() if isinstance(v, list))
_OP_NAME = re.compile(r"^aten::[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?$")


def _default_traits() -> dict:
    """TRAITS with fresh list copies, so one profile's edits never leak into another's."""
    return {k: (list(v) if isinstance(v, list) else v) for k, v in TRAITS.items()}


@dataclass
class Profile:
    name: str
    path: str
    description: str = ""
    share_percent: float = 0.0
    salt: str = ""
    missing_ops: list[str] = field(default_factory=list)
    fallback_ops: list[str] = field(default_factory=list)
    always_on: list[str] = field(default_factory=list)
    traits: dict = field(default_factory=_default_traits)
    # refccl, refdev's c10d backend (refdev/distributed.py): collectives it lacks, and
    # whether a collective finishes before it returns (then nothing overlaps it)
    missing_collectives: list[str] = field(default_factory=list)
    synchronous_collectives: bool = False
    fallback_mode: str = "counted"     # FALLBACK_MODES
    # operator (aten::X or aten::X.overload) -> seconds added to each call (slow_ops)
    slow_ops: dict = field(default_factory=dict)
    # {operators: [patterns] | "kernels" | {"kernels_of": name}, dtypes: [...], features: [...]}
    claims: dict = field(default_factory=dict)

    @property
    def boxed(self) -> bool:
        return self.fallback_mode == "boxed"


def available() -> list[str]:
    return sorted(f[:-5] for f in os.listdir(PROFILE_DIR) if f.endswith(".yaml"))


def profile_path(name_or_path: str) -> str:
    """A shipped profile's file, or the given YAML path; UserError if neither."""
    if os.sep in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        if not os.path.isfile(name_or_path):
            raise UserError(f"refdev profile file {name_or_path} not found; pass an existing YAML file or one of: {', '.join(available())}")
        return os.path.abspath(name_or_path)
    path = os.path.join(PROFILE_DIR, name_or_path + ".yaml")
    if not os.path.isfile(path):
        raise UserError(f"unknown refdev profile {name_or_path!r}; use one of: {', '.join(available())} or a path to a YAML file")
    return path


def _bad(path: str, problem: str) -> UserError:
    return UserError(f"refdev profile {path}: {problem}; fix the file (format: see {os.path.join(PROFILE_DIR, 'full.yaml')})")


def _name_list(path: str, value, where: str, valid, names: str, a_name: str) -> list[str]:
    """A list of strings each passing ``valid``; ``names``/``a_name`` describe the
    expected form in the error ("operator names like ..." / "an operator name like ...")."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(path, f"'{where}' must be a list of {names}")
    for v in value:
        if not valid(v):
            raise _bad(path, f"'{where}' entry {v!r} is not {a_name}")
    return list(value)


def _op_list(path: str, value, where: str) -> list[str]:
    return _name_list(path, value, where, _OP_NAME.match, "operator names like aten::add.out",
                      "an operator name like aten::add or aten::add.out")


def _is_dtype_name(name: str) -> bool:
    """A torch dtype name (complex64, float16...)."""
    import torch

    return isinstance(getattr(torch, name, None), torch.dtype)


def load_profile(name_or_path: str | None = None) -> Profile:
    """Read and validate a profile by shipped name or YAML path."""
    path = profile_path(name_or_path or settings.get("TORCHCONFORM_REFDEV_PROFILE"))
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise UserError(f"cannot read refdev profile {path}: {exc.strerror}; check the path and permissions") from None
    try:
        data = load_data(path, text)
    except YamlError as exc:
        raise UserError(f"malformed YAML in refdev profile {exc}") from None
    if not isinstance(data, dict):
        raise _bad(path, "top level must be a mapping with keys " + ", ".join(sorted(_KEYS)))
    unknown = set(data) - _KEYS
    if unknown:
        raise _bad(path, f"unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(_KEYS))}")
    missing = data.get("missing") or {}
    fallback = data.get("fallback") or {}
    if not isinstance(missing, dict) or set(missing) - _MISSING_KEYS:
        raise _bad(path, f"'missing' must be a mapping with keys {', '.join(sorted(_MISSING_KEYS))}")
    if not isinstance(fallback, dict) or set(fallback) - _FALLBACK_KEYS:
        raise _bad(path, "'fallback' must be a mapping with the keys ops and mode")
    mode = fallback.get("mode", "counted")
    if mode not in FALLBACK_MODES:
        raise _bad(path, f"'fallback.mode' must be one of {', '.join(FALLBACK_MODES)}, not {mode!r}")
    if mode == "boxed" and fallback.get("ops"):
        raise _bad(path, "'fallback.ops' has no meaning with 'fallback.mode: boxed' (PyTorch's boxed CPU fallback "
                         "serves every operator without a kernel); list those operators under 'missing.ops' instead")
    share = missing.get("share_percent", 0)
    if not isinstance(share, (int, float)) or isinstance(share, bool) or not 0 <= share <= 100:
        raise _bad(path, "'missing.share_percent' must be a number from 0 to 100")
    traits = _default_traits()
    raw_traits = data.get("traits") or {}
    if not isinstance(raw_traits, dict):
        raise _bad(path, "'traits' must be a mapping")
    for key, value in raw_traits.items():
        if key not in TRAITS:
            raise _bad(path, f"unknown trait {key!r}; known: {', '.join(TRAITS)}")
        if key == "unsupported_dtypes":
            traits[key] = _name_list(path, value, f"traits.{key}", _is_dtype_name,
                                     "dtype names like complex64", "a torch dtype name like complex64")
        elif key in _LIST_TRAITS:
            traits[key] = _op_list(path, value, f"traits.{key}")
        elif not isinstance(value, bool):
            raise _bad(path, f"trait {key!r} must be true or false")
        else:
            traits[key] = value
    missing_collectives, synchronous = _collectives(path, data.get("collectives"))
    return Profile(
        name=str(data.get("name") or os.path.splitext(os.path.basename(path))[0]),
        path=path,
        description=str(data.get("description") or ""),
        share_percent=float(share),
        salt=str(missing.get("salt") or ""),
        missing_ops=_op_list(path, missing.get("ops"), "missing.ops"),
        fallback_ops=_op_list(path, fallback.get("ops"), "fallback.ops"),
        always_on=_op_list(path, data.get("always_on"), "always_on"),
        traits=traits,
        missing_collectives=missing_collectives,
        synchronous_collectives=synchronous,
        fallback_mode=mode,
        slow_ops=_slow_ops(path, data.get("slow_ops")),
        claims=_claims(path, data.get("claims")),
    )


def _claims(path: str, raw) -> dict:
    """The ``claims`` section (see _CLAIMS_KEYS)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) - _CLAIMS_KEYS:
        raise _bad(path, f"'claims' must be a mapping with the keys {', '.join(sorted(_CLAIMS_KEYS))}")
    out = {}
    ops = raw.get("operators")
    if ops == "kernels":
        out["operators"] = "kernels"
    elif isinstance(ops, dict):
        if set(ops) != {"kernels_of"} or not isinstance(ops["kernels_of"], str):
            raise _bad(path, "'claims.operators' as a mapping is {kernels_of: PROFILE}")
        profile_path(ops["kernels_of"])   # a UserError naming the choices when unknown
        out["operators"] = {"kernels_of": ops["kernels_of"]}
    elif ops is not None:
        out["operators"] = _name_list(path, ops, "claims.operators", lambda p: bool(p.strip()) and " " not in p,
                                      "operator patterns like aten::add or nn.functional.*", "an operator pattern")
    out["dtypes"] = _name_list(path, raw.get("dtypes"), "claims.dtypes", _is_dtype_name, "dtype names like float32",
                               "a torch dtype name like float32")
    out["features"] = _name_list(path, raw.get("features"), "claims.features", lambda f: f in FEATURES,
                                 "feature names", f"one of {', '.join(FEATURES)}")
    return {k: v for k, v in out.items() if v}


def _slow_ops(path: str, raw) -> dict:
    """The ``slow_ops`` mapping: operator name -> seconds (a number above 0, at most MAX_SLOW_S)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _bad(path, "'slow_ops' must be a mapping of operator names to seconds, e.g. {aten::add.Tensor: 0.002}")
    out = {}
    for op, seconds in raw.items():
        if not isinstance(op, str) or not _OP_NAME.match(op):
            raise _bad(path, f"'slow_ops' key {op!r} is not an operator name like aten::add or aten::add.Tensor")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= MAX_SLOW_S:
            raise _bad(path, f"'slow_ops' delay of {op} must be a number of seconds above 0 and at most "
                             f"{MAX_SLOW_S:g}, not {seconds!r}")
        out[op] = float(seconds)
    return out


def _collectives(path: str, raw) -> tuple[list[str], bool]:
    """The ``collectives`` section: ``missing`` (names of COLLECTIVES)
    and ``synchronous`` (true or false)."""
    raw = raw or {}
    if not isinstance(raw, dict):
        raise _bad(path, "'collectives' must be a mapping with 'missing' and 'synchronous'")
    unknown = set(raw) - _COLLECTIVES_KEYS
    if unknown:
        raise _bad(path, f"unknown key(s) {', '.join(sorted(unknown))} under 'collectives'; known: missing, synchronous")
    missing = _name_list(path, raw.get("missing"), "collectives.missing", lambda n: n in COLLECTIVES,
                         "collective names", f"one of {', '.join(COLLECTIVES)}")
    synchronous = raw.get("synchronous", False)
    if not isinstance(synchronous, bool):
        raise _bad(path, "'collectives.synchronous' must be true or false")
    return missing, synchronous


@functools.lru_cache(maxsize=1)
def op_universe() -> tuple[str, ...]:
    """aten overloads that need a PrivateUse1 kernel to run on refdev (see module doc)."""
    import torch

    has = torch._C._dispatch_has_kernel_for_dispatch_key
    out = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::") or name in NATIVE_OPS:
            continue
        # A CompositeExplicitAutograd kernel alone does not exclude an op: with
        # a CPU kernel too it is one of cpu_over_composite_ops().
        if (name in FORCED_OPS or name in PAIRED_OPS or base_name(name) in DEVICE_BOUND_COMPOSITES
                or (has(name, "CPU") and not has(name, "CompositeExplicitAutogradNonFunctional")
                    and not has(name, "CompositeImplicitAutograd"))):
            out.append(name)
    return tuple(sorted(out))


@functools.lru_cache(maxsize=1)
def cpu_over_composite_ops() -> tuple[str, ...]:
    """Overloads with both a CPU kernel and a plain CompositeExplicitAutograd kernel
    (``native_layer_norm``, ``native_group_norm``, ``addr``, ``_stack``, ...).

    Without a PrivateUse1 kernel, PyTorch runs their composite decomposition on
    refdev (``native_layer_norm`` becomes ``native_batch_norm`` + ``addcmul``),
    which rounds differently from the fused CPU kernel, so refdev would not
    compute like the CPU.  They get the CPU-compute kernel; and since a backend
    without that kernel still runs the composite, they can never be missing
    (the hash share and ``missing.ops`` do not apply; ``fallback.ops`` does).
    Their autograd formula is an Autograd kernel, which a PrivateUse1 kernel
    does not displace (unlike CompositeImplicitAutograd ops, never registered).
    """
    import torch

    has = torch._C._dispatch_has_kernel_for_dispatch_key
    out = []
    for name in torch._C._dispatch_get_all_op_names():
        if (name.startswith("aten::") and name not in NATIVE_OPS and name not in FORCED_OPS
                and has(name, "CPU") and has(name, "CompositeExplicitAutograd")
                and not has(name, "CompositeExplicitAutogradNonFunctional")
                and not has(name, "CompositeImplicitAutograd")):
            out.append(name)
    return tuple(sorted(out))


def base_name(op: str) -> str:
    return op.split(".", 1)[0]


def _matches(op: str, entries: set[str]) -> bool:
    return op in entries or base_name(op) in entries


def in_hash_share(op: str, salt: str, share_percent: float) -> bool:
    """The deterministic rule: sha1(salt:base name) lands in the first share_percent of 10000 buckets."""
    digest = hashlib.sha1(f"{salt}:{base_name(op)}".encode()).hexdigest()
    return int(digest[:8], 16) % 10000 < share_percent * 100


@dataclass
class Resolved:
    profile: Profile
    implemented: list[str]
    fallback: list[str]
    missing: list[str]
    # boxed profiles only: universe operators refdev registers no kernel for (fallback and
    # missing stay empty here; describe() asks the dispatcher which the boxed fallback serves)
    without_kernel: list[str] = field(default_factory=list)

    def overloads_of(self, entries) -> list[str]:
        """Implemented or fallback overloads named by ``entries`` (aten::X = every overload)."""
        wanted = set(entries)
        return [op for op in self.implemented + self.fallback if _matches(op, wanted)]

    def dispatch_keys(self) -> dict:
        """Per dispatch key the device answers to (every ``*PrivateUse1`` key of this
        torch): ``kernels``, the operators refdev registers a kernel for under that key
        (PrivateUse1: implemented + fallback), and ``backend_fallback``, what serves
        every other operator there: ``"fallthrough"`` (refdev's: the key is skipped),
        ``"pytorch"`` (PyTorch's own, e.g. autograd's), ``"cpu_fallback"`` (a boxed profile's
        PrivateUse1 key: PyTorch's at::native::cpu_fallback, registered by refdev as a real
        backend does) or None (nothing: the dispatcher
        raises unless a PyTorch alias kernel, Autograd or CompositeExplicitAutograd, fills
        the key).  Sparse, quantized and nested keys get no refdev kernel: refdev holds
        strided tensors only."""
        import torch

        out = {}
        for key in torch._C.DispatchKey.__members__:
            if "PrivateUse1" not in key:
                continue
            if key == "PrivateUse1":
                kernels = sorted(self.implemented + self.fallback)
            elif key == "AutocastPrivateUse1":
                kernels = list(AUTOCAST_OPS)
            else:
                kernels = []
            if key in FALLTHROUGH_KEYS:
                fallback = "fallthrough"
            elif key == "PrivateUse1" and self.profile.boxed:
                fallback = "cpu_fallback"  # refdev registers PyTorch's at::native::cpu_fallback
            elif torch._C._dispatch_has_backend_fallback(getattr(torch._C.DispatchKey, key)):
                fallback = "pytorch"
            else:
                fallback = None
            out[key] = {"kernels": kernels, "backend_fallback": fallback}
        return out

    @property
    def implemented_computed(self) -> list[str]:
        """Implemented operators that get the boxed CPU-compute kernel (not the C++ native ones)."""
        native = set(NATIVE_OPS)
        return [op for op in self.implemented if op not in native]


def resolve(profile: Profile) -> Resolved:
    """Split the operator universe into implemented / fallback / missing for ``profile``."""
    always = set(profile.always_on)
    explicit_missing = set(profile.missing_ops)
    fallback_entries = set(profile.fallback_ops)
    implemented, fallback, missing = [], [], []
    cpu_over_composite = set(cpu_over_composite_ops())
    paired = []
    for op in op_universe():
        if op in PAIRED_OPS:
            paired.append(op)  # classified with its partner below
            continue
        if NON_STRIDED.search(op):
            missing.append(op)
        elif op in cpu_over_composite or base_name(op) in DEVICE_BOUND_COMPOSITES:
            (fallback if _matches(op, fallback_entries) else implemented).append(op)
        elif _matches(op, always):
            implemented.append(op)
        elif _matches(op, explicit_missing):
            missing.append(op)
        elif _matches(op, fallback_entries):
            fallback.append(op)
        elif profile.share_percent and in_hash_share(op, profile.salt, profile.share_percent):
            missing.append(op)
        else:
            implemented.append(op)
    for op in paired:
        for bucket in (implemented, fallback, missing):
            if PAIRED_OPS[op] in bucket:
                bucket.append(op)
    implemented = sorted(set(implemented) | set(NATIVE_OPS))
    if profile.boxed:
        # No refdev kernel for the rest: PyTorch's boxed CPU fallback serves each (or
        # fails inside it); which is which is the dispatcher's answer (describe()).
        return Resolved(profile, implemented, [], [], without_kernel=sorted(missing))
    return Resolved(profile, implemented, sorted(fallback), sorted(missing))
