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
from torchconform.core.yamlpos import YamlError, load_yaml
from torchconform.refdev.profile_schema import COLLECTIVES, FALLBACK_MODES, MAX_SLOW_S, TRAITS, validate  # noqa: F401

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
# The file format (keys, types, defaults, messages): refdev/profile_schema.py.
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


def _bad(path: str, problem: str, line: int = 0) -> UserError:
    where = f"{path}:{line}" if line else path
    return UserError(f"refdev profile {where}: {problem}; fix the file (format: see {os.path.join(PROFILE_DIR, 'full.yaml')})")


def load_profile(name_or_path: str | None = None) -> Profile:
    """Read and validate a profile by shipped name or YAML path (its shape: refdev/profile_schema.py)."""
    path = profile_path(name_or_path or settings.get("TORCHCONFORM_REFDEV_PROFILE"))
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise UserError(f"cannot read refdev profile {path}: {exc.strerror}; check the path and permissions") from None
    try:
        data = load_yaml(path, text)
    except YamlError as exc:
        raise UserError(f"malformed YAML in refdev profile {exc}") from None
    model, failures = validate(data)
    if failures:
        _, line, message = failures[0]
        raise _bad(path, message, line)
    missing, fallback = model.missing, model.fallback
    traits = _default_traits()
    if model.traits is not None:
        traits.update({k: (list(v) if isinstance(v, list) else v)
                       for k, v in model.traits.model_dump(exclude_unset=True).items() if v is not None})
    collectives = model.collectives
    claims = {}
    if model.claims is not None:
        raw = model.claims
        if isinstance(raw.operators, dict):
            profile_path(raw.operators["kernels_of"])   # a UserError naming the choices when unknown
        claims = {k: v for k, v in (("operators", raw.operators), ("dtypes", raw.dtypes),
                                    ("features", raw.features)) if v}
    return Profile(
        name=str(model.name or os.path.splitext(os.path.basename(path))[0]),
        path=path,
        description=str(model.description or ""),
        share_percent=float(missing.share_percent if missing else 0),
        salt=str((missing.salt if missing else None) or ""),
        missing_ops=list((missing.ops if missing else None) or []),
        fallback_ops=list((fallback.ops if fallback else None) or []),
        always_on=list(model.always_on or []),
        traits=traits,
        missing_collectives=list((collectives.missing if collectives else None) or []),
        synchronous_collectives=collectives.synchronous if collectives else False,
        fallback_mode=fallback.mode if fallback else "counted",
        slow_ops=dict(model.slow_ops or {}),
        claims=claims,
    )


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
