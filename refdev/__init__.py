"""refdev: the reference PrivateUse1 device (memory in host RAM, real dispatcher).

    from torchconform import refdev
    name = refdev.load()            # "refdev" unless $TORCHCONFORM_REFDEV_NAME says otherwise
    x = torch.ones(3, device=name)

Environment (read once, by the first ``load()`` in a process):
  TORCHCONFORM_REFDEV_NAME     PrivateUse1 name (default ``refdev``; ``neuron`` works)
  TORCHCONFORM_REFDEV_PROFILE  profile name or YAML path (default ``young-backend``)
  TORCHCONFORM_REFDEV_DEVICES  number of devices (default 2)
  TORCHCONFORM_REFDEV_CACHE    build cache folder (default ~/.cache/torchconform/refdev)
  TORCHCONFORM_REFDEV_TRACE    1: count every computed operator (``call_counts()``)
"""
from __future__ import annotations

import os
import threading

from torchconform.core.traitnotes import EAGER_FALLBACK_OPS
from torchconform.errors import UserError
from torchconform import settings
from torchconform.refdev import profiles, state
from torchconform.core.yamlpos import load_data
from torchconform.core.dispatch import RAISING_STUBS, SPARSE_RESULT_COMPRESSED, SPARSE_RESULT_COO
from torchconform.refdev import build
from torchconform.refdev.distributed import BACKEND_NAME
from torchconform.refdev.profiles import COLLECTIVES
from torchconform.refdev import compile as refdev_compile, device as device_module, distributed

NAME_ENV = "TORCHCONFORM_REFDEV_NAME"
PROFILE_ENV = "TORCHCONFORM_REFDEV_PROFILE"
DEVICES_ENV = "TORCHCONFORM_REFDEV_DEVICES"
TRACE_ENV = "TORCHCONFORM_REFDEV_TRACE"
DEFAULT_NAME = "refdev"
DEFAULT_DEVICES = 2
MAX_DEVICES = 16


_lock = threading.Lock()
_TRACING = [False]   # whether this process's refdev counts its computed operators (TRACE_ENV at load)


def device_name() -> str:
    """The configured PrivateUse1 name (without loading anything)."""
    name = settings.get(NAME_ENV)
    if not name.isidentifier() or not name.islower():
        raise UserError(f"{NAME_ENV}={name!r} is not a valid device name; use a lower-case identifier such as refdev or neuron")
    return name


def _device_count() -> int:
    return settings.get_int(DEVICES_ENV, 1, MAX_DEVICES, what="a device count")


def load() -> str:
    """Build (cached), register the device once per process, return its name."""
    if state.current is not None:
        return state.current.name
    with _lock:
        if state.current is not None:
            return state.current.name
        import torch

        name = device_name()
        devices = _device_count()
        resolved = profiles.resolve(profiles.load_profile(settings.given(PROFILE_ENV)))
        slow = slow_op_delays(resolved) if resolved.profile.slow_ops else None   # a bad entry: said before set-up
        current = torch._C._get_privateuse1_backend_name()
        if current != name:
            if current != "privateuseone":
                raise UserError(
                    f"PrivateUse1 is already named {current!r} in this process, cannot load refdev as {name!r}; "
                    f"set {NAME_ENV}={current} or use a fresh process"
                )
            torch.utils.rename_privateuse1_backend(name)
        ext = build.load_extension(verbose=settings.is_on("TORCHCONFORM_REFDEV_VERBOSE"))
        traits = resolved.profile.traits
        _TRACING[0] = settings.is_on(TRACE_ENV)
        ext.init(devices, traits["float64_as_float32"], traits["copies_noncontiguous"], _TRACING[0])
        ext.register_ops(resolved.implemented_computed, resolved.fallback)
        if resolved.profile.boxed:
            ext.install_boxed_fallback()
        unsupported = traits["unsupported_dtypes"]
        ext.set_traits(resolved.profile.name, [torch.empty(0, dtype=getattr(torch, d)) for d in unsupported],
                       list(unsupported), resolved.overloads_of(traits["leaks_ops"]))
        if slow is not None:
            ext.set_slow_ops(*slow)
        torch._register_device_module(
            name, device_module.boxed_module() if resolved.profile.boxed else device_module)
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
        refdev_compile.register(resolved.profile.name, traits["compile_placeholder_ops"])
        distributed.register(name, resolved.profile.name, resolved.profile.missing_collectives,
                             resolved.profile.synchronous_collectives)
        state.current = state.Loaded(name, ext, resolved, devices)
        return name


def slow_op_delays(resolved: profiles.Resolved) -> tuple[list[str], list[int]]:
    """The profile's ``slow_ops`` as (overloads, microseconds) for the C++ side: an entry
    without an overload delays every overload refdev computes (implemented or fallback)."""
    names, micros = [], []
    for entry, seconds in resolved.profile.slow_ops.items():
        matched = resolved.overloads_of([entry])
        if not matched:
            same = [op for op in resolved.implemented + resolved.fallback if profiles.base_name(op) == profiles.base_name(entry)]
            hint = (f"name one refdev computes ({', '.join(sorted(same)[:6])}) or {profiles.base_name(entry)} for all"
                    if same else "name an operator the profile implements or falls back on")
            raise UserError(f"refdev profile {resolved.profile.path}: slow_ops entry {entry} names no operator refdev "
                            f"computes itself; {hint}")
        for op in matched:
            if op not in names:
                names.append(op)
                micros.append(max(1, round(seconds * 1e6)))
    return names, micros


def _extension():
    if state.current is None:
        load()
    return state.current.ext


def is_loaded() -> bool:
    return state.current is not None


def active_profile() -> profiles.Resolved | None:
    """The resolved profile of the loaded device (None before ``load()``)."""
    return state.current.resolved if state.current else None


def describe(profile: str | None = None) -> dict:
    """Ground truth of a profile: implemented / fallback / missing overloads and traits.

    implemented / fallback / missing are about the PrivateUse1 key (strided tensors);
    ``dispatch_keys`` says, for every PrivateUse1 dispatch key (Autograd, Autocast,
    Sparse, SparseCsr, Quantized, NestedTensor...), which kernels refdev registers there
    and what serves the rest (``profiles.Resolved.dispatch_keys``).

    ``profile`` is a shipped name or a YAML path; None means the active one
    (the loaded device's, else $TORCHCONFORM_REFDEV_PROFILE, else young-backend).
    """
    if profile is None and state.current is not None:
        resolved = state.current.resolved
    else:
        resolved = profiles.resolve(profiles.load_profile(profile))
    fallback, missing = list(resolved.fallback), list(resolved.missing)
    if resolved.profile.boxed:
        fallback, missing = boxed_truth(resolved)
    fallback, missing = _cannot_run(resolved, fallback, missing)
    return {
        "profile": resolved.profile.name,
        "profile_path": resolved.profile.path,
        "device": state.current.name if state.current else device_name(),
        "fallback_mode": resolved.profile.fallback_mode,
        "implemented": list(resolved.implemented),
        "fallback": fallback,
        "missing": missing,
        "traits": dict(resolved.profile.traits),
        "collectives": collectives(resolved.profile),
        "dispatch_keys": resolved.dispatch_keys(),
        "expected_traits": expected_traits(resolved, fallback),
    }


def boxed_truth(resolved: profiles.Resolved) -> tuple[list[str], list[str]]:
    """A boxed profile's (fallback, missing), computed by refdev's C++ from the dispatcher:
    every aten overload without a refdev kernel, an AutogradPrivateUse1 kernel or a
    composite reaches PyTorch's boxed CPU fallback; "fallback" are those with a CPU kernel
    (everything else a CPU kernel serves), "missing" those without (cpu_fallback fails:
    "Could not run 'aten::X' with arguments from the 'CPU' backend").  For the loaded
    profile the kernels are the registered ones; for another, the ones it would register.
    Needs refdev's build (compiled on first use), not load()."""
    if state.current is not None and resolved is state.current.resolved:
        ext, planned, registered = state.current.ext, [], True
    else:
        ext = build.load_extension(verbose=settings.is_on("TORCHCONFORM_REFDEV_VERBOSE"))
        planned, registered = resolved.implemented, False
    fallback, missing = ext.boxed_dispatch_truth(list(planned), registered)
    return list(fallback), list(missing)


def _cannot_run(resolved: profiles.Resolved, fallback: list, missing: list) -> tuple[list, list]:
    """Operators without a refdev kernel that cannot run although the dispatcher offers
    something: ATen's raising composite stubs (convolution_overrideable...), and, in a
    boxed profile, CPU kernels whose sparse result the fallback cannot move to refdev
    (refdev has no sparse keys).  tests/test_census_stubs.py calls them on refdev."""
    ours = set(resolved.implemented)
    gone = {op for op in RAISING_STUBS if op not in ours}
    if resolved.profile.boxed:
        gone |= {op for op in SPARSE_RESULT_COO | SPARSE_RESULT_COMPRESSED if op in fallback}
    return [op for op in fallback if op not in gone], sorted(set(missing) | gone)


def collectives(profile: profiles.Profile) -> dict:
    """refccl's ground truth for a profile: the c10d backend, each collective's status,
    and whether collectives overlap computation (refdev/distributed.py)."""
    return {"c10d_backend": BACKEND_NAME,
            "status": {c: ("missing" if c in profile.missing_collectives else "implemented") for c in COLLECTIVES},
            "synchronous": profile.synchronous_collectives}


def _base(op: str) -> str:
    return op.split(".", 1)[0]


def expected_traits(resolved: profiles.Resolved, fallback=None) -> dict:
    """What the traits suite (suites/traits) must measure on this profile, in the
    dotted keys of ``summary --json``'s ``traits``: the profile's traits said as
    measurements, so the suite is checked against refdev's ground truth.  ``fallback``:
    the fallback overloads when not ``resolved.fallback`` (a boxed profile's, describe())."""
    traits = resolved.profile.traits
    fallback = resolved.fallback if fallback is None else fallback
    return {
        "precision.float64.executes_as": "float32" if traits["float64_as_float32"] else "float64",
        "noncontiguous_copy.copies": bool(traits["copies_noncontiguous"]),
        # refdev's compile backend is aot_eager underneath, which accepts symbolic
        # shapes: once dynamo has marked a varying size dynamic, new shapes hit.
        "static_shapes.recompiles_per_new_shape": 0.0,
        # the fallback operators the traits suite's eager probe calls (its workload): a
        # boxed profile's fallback serves ~100 operators, the probe sees those it calls
        "fallback.eager_ops": sorted({_base(op) for op in fallback} & set(EAGER_FALLBACK_OPS)),
        # refdev never turns on dynamo's suppress_errors: a failed compile raises.
        "fallback.compile_fallback": False,
        "placeholder_outputs.ops": sorted(_base(op) for op in traits["compile_placeholder_ops"]),
        # every kernel runs synchronously on the host: the counters never lag.
        "memory_stats.lags_without_sync": False,
        # the distributed suite's overlap test: synchronous collectives overlap nothing
        "overlap.overlaps": not resolved.profile.synchronous_collectives,
    }


def declared_downcast() -> dict:
    """The backend profile's ``dtype_policy.downcast`` for refdev, derived from the active
    refdev profile's ``float64_as_float32`` trait (describe's ``traits``): one source of truth.
    Reads the profile file only (no build, no torch import)."""
    profile = state.current.resolved.profile if state.current else profiles.load_profile(settings.given(PROFILE_ENV))
    if profile.traits["float64_as_float32"]:
        return {"float64": "float32", "complex128": "complex64"}
    return {}


def declared_claims() -> dict:
    """The backend profile's ``claims`` for refdev (``claims: {from: torchconform.refdev:declared_claims}``):
    the active refdev profile's (``profile_claims``).  Needs torch (the operator universe), not a build."""
    if state.current:
        return profile_claims(state.current.resolved.profile, state.current.resolved)
    return profile_claims(profiles.load_profile(settings.given(PROFILE_ENV)))


def profile_claims(profile: profiles.Profile, resolved: profiles.Resolved | None = None) -> dict:
    """A refdev profile's own ``claims`` section, ``kernels`` expanded to every overload that
    profile gives a refdev kernel (implemented + fallback, describe's PrivateUse1 kernels) and
    ``{kernels_of: P}`` to those of refdev profile P."""
    claims = dict(profile.claims)
    ops = claims.get("operators")
    if ops == "kernels" or isinstance(ops, dict):
        if isinstance(ops, dict):
            resolved = profiles.resolve(profiles.load_profile(ops["kernels_of"]))
        elif resolved is None:
            resolved = profiles.resolve(profile)
        claims["operators"] = sorted(resolved.implemented + resolved.fallback)
    return claims


def trait_off_env(trait: str, folder: str) -> dict | None:
    """The environment of a process whose refdev runs with boolean ``trait`` switched off:
    ``$TORCHCONFORM_REFDEV_PROFILE`` naming a copy of the active profile (written into
    ``folder``) that differs only in that trait (the backend profile's ``trait_off`` hook,
    which verifies that a declared trait explains a failure).  None for a trait refdev
    cannot switch off (a list trait, an unknown name)."""
    import yaml

    profile = state.current.resolved.profile if state.current else profiles.load_profile(settings.given(PROFILE_ENV))
    if not isinstance(profiles.TRAITS.get(trait), bool):
        return None
    data = load_data(profile.path) or {}
    # Same name (a missing share's salt, messages), same operators: only the trait differs.
    data.setdefault("name", profile.name)
    data["traits"] = dict(data.get("traits") or {}, **{trait: False})
    path = os.path.join(folder, os.path.basename(profile.path))
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(data, fh, sort_keys=False)
    return {PROFILE_ENV: path}


def _boxed() -> bool:
    return state.current is not None and state.current.resolved.profile.boxed


def fallback_counts() -> dict[str, int] | None:
    """Calls per operator that ran through the CPU fallback since the last reset; None
    with a boxed profile, whose fallback (PyTorch's own) counts nothing, as on a real
    backend (the plugin reads None as "no counter")."""
    if _boxed():
        return None
    return dict(_extension().fallback_counts(False)) if state.current else {}


def reset_fallback_counts() -> None:
    if state.current and not _boxed():
        state.current.ext.fallback_counts(True)


def boxed_fallback_served(reset: bool = False) -> dict[str, int]:
    """GROUND TRUTH FOR TESTS ONLY (the plugin and the collectors must never read it: a real
    backend has no such table).  With a boxed profile: calls the PrivateUse1 backend
    fallback (PyTorch's cpu_fallback) received per operator since the last reset,
    including calls that then failed inside it for want of a CPU kernel; {} otherwise."""
    return dict(state.current.ext.boxed_fallback_served(reset)) if _boxed() else {}


def copy_counts() -> dict[str, int]:
    """copies_noncontiguous trait: contiguous copies made per operator since the last reset."""
    return dict(_extension().copy_counts(False)) if state.current else {}


def reset_copy_counts() -> None:
    if state.current:
        state.current.ext.copy_counts(True)


def leak_counts() -> dict[str, int]:
    """leaks_ops trait: workspaces retained per operator (never reset: a leak stays)."""
    return dict(_extension().leak_counts()) if state.current else {}


def call_counts(reset: bool = False) -> dict[str, int]:
    """With TORCHCONFORM_REFDEV_TRACE=1: calls per computed operator."""
    return dict(_extension().call_counts(reset)) if state.current else {}


def load_traced() -> str:
    """The refdev backend profile's set-up (skiplists/refdev/profile.yaml): ``load()`` with
    the kernel trace on unless $TORCHCONFORM_REFDEV_TRACE says otherwise, so that
    ``executed_ops()`` can tell the runner which operators each test ran on the device
    (the coverage audit, torchconform/core/coverage.py)."""
    if settings.given(TRACE_ENV) is None:
        os.environ[TRACE_ENV] = "1"
    return load()


def executed_ops() -> list[str]:
    """The profile's ``tracking.executed_ops``: the operators refdev computed itself since the
    last ``clear_executed_ops()`` (its fallback operators are the fallback counter's).
    Raises RuntimeError when refdev is not tracing: the runner then records the test as
    not measured rather than as having reached nothing."""
    if not _TRACING[0]:
        raise RuntimeError(f"refdev was loaded without its kernel trace ({TRACE_ENV}=1)")
    fallback = fallback_counts() or {}
    return sorted(op for op, n in _extension().call_counts(False).items() if n and not fallback.get(op))


def clear_executed_ops() -> None:
    """The profile's ``tracking.clear``: forget the computed operators counted so far."""
    if _TRACING[0] and state.current:
        state.current.ext.call_counts(True)
