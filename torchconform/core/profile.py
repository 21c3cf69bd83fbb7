"""Backend profiles: how to load a backend and how to recognise its messages.

One small YAML per backend lives in ``skiplists/<backend>/profile.yaml``.  The
plugin and the classifier read only the :class:`BackendProfile` built here, so a
new backend is a new YAML file, not new code.
"""
from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from torchconform.errors import UserError
from torchconform.core.yamlpos import YamlError, load_yaml



def _component_dir(package: str) -> Path:
    """A component folder's location, found without importing the component: the ground
    floor reads the data files shipped there (backend profiles, refdev's operator profiles)
    but imports none of the components' code."""
    spec = importlib.util.find_spec(f"torchconform.{package}")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


PROFILE_DIR = _component_dir("skiplists")
REFDEV_PROFILE_DIR = _component_dir("refdev") / "profiles"

# Messages every PyTorch backend shares: the dispatcher's "no kernel" error and
# the usual CPU-fallback warning.  A profile adds its own on top of these.
GENERIC_MISSING_OP = [
    r"Could not run '(?P<op>[\w:]+(?:\.\w+)?)' with arguments from the '(?P<backend>\w+)' backend",
    r"The operator '(?P<op>[\w:]+(?:\.\w+)?)' is not currently implemented for the (?P<backend>\w+) device",
    # ATen's hooks for out-of-tree backends (convolution on PrivateUse1 without a
    # registered kernel ends here); they name no backend, so they match any device.
    r"(?<![\w.])(?P<op>\w+_overrideable) not implemented\. You are likely triggering this with tensor backend other than",
]
GENERIC_FALLBACK = [
    r"The operator '(?P<op>[\w:]+(?:\.\w+)?)' is not currently supported on the (?P<backend>\w+) backend "
    r"and will fall back to run on the CPU",
]

# c10d's own words for a collective a backend lacks (ProcessGroup/Backend base classes:
# "Backend X does not support allgather"); the entry point named maps to the collective
# it implements.  A profile adds its backend's words (refdev: refccl's).
GENERIC_MISSING_COLLECTIVE = [
    r"\bBackend \S+ does not support (?P<collective>\w+)",
]
COLLECTIVE_OF_ENTRY = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce", "allgather": "all_gather",
    "_allgather_base": "all_gather", "all_gather_single": "all_gather", "allgather_coalesced": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather", "all_gather_single_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "reduce_scatter_single_coalesced": "reduce_scatter", "alltoall": "all_to_all", "alltoall_base": "all_to_all",
    "all_to_all_single": "all_to_all", "send": "send_recv", "recv": "send_recv", "recvAnysource": "send_recv",
}

# Devices inductor generates code for; any other (a PrivateUse1 device) compiles with
# aot_eager by default: inductor fails on a device it has no code generator for.
INDUCTOR_DEVICES = {"cpu", "cuda", "xpu", "mps"}


def default_compile_backend(device: str) -> str:
    """The compile backend of a profile that names none."""
    return "inductor" if not device or device in INDUCTOR_DEVICES else "aot_eager"

# How a device runs distributed (the distributed suite's launcher and classifier):
#   c10d_backend     the c10d backend of the device type ("cpu:gloo,<device>:<this>")
#   ranks_per_host   ranks one host runs (its device count; 0: the device module's count)
#   device_env       the variable that pins a rank to its device before the backend loads
#                    (CUDA_VISIBLE_DEVICES, NEURON_RT_VISIBLE_CORES); "": the rank calls
#                    torch.<device>.set_device(LOCAL_RANK % device_count()) instead
#   missing_collective_patterns  regexes with a (?P<collective>...) group for the
#                    backend's own "collective not implemented" messages
DISTRIBUTED_DEFAULTS = {"c10d_backend": "", "ranks_per_host": 0, "device_env": "",
                        "missing_collective_patterns": []}


@dataclass
class BackendProfile:
    name: str
    device: str
    backend_module: str = ""
    setup: str = ""                    # "module:function" called once per process after import
    compile_backend: str = ""          # "": default_compile_backend(device)
    # Dispatch-key spellings that belong to this backend (``PrivateUse1``,
    # ``AutogradPrivateUse1``, ``refdev``...).  A dispatcher error naming any
    # other backend (e.g. ``CPU`` while computing the reference) is not this
    # backend's missing operator.  Empty means "any backend".
    backend_names: list[str] = field(default_factory=list)
    missing_op_patterns: list[str] = field(default_factory=list)
    fallback_patterns: list[str] = field(default_factory=list)
    unsupported_dtype_patterns: list[str] = field(default_factory=list)
    # Messages (warnings or errors) saying a compiled function returned placeholder
    # outputs without running on the device: skip_backend/not_executed, never a pass.
    not_executed_patterns: list[str] = field(default_factory=list)
    fallback_counter: str = ""         # "module:function" -> {op: count}
    fallback_reset: str = ""           # "module:function"
    # {"unsupported": [dtype, ...], "downcast": {from: to}, "downcast_tolerances": bool}:
    # unsupported dtypes are skipped at collection as skip_backend/unsupported_dtype;
    # downcast is what the device computes a dtype in (the precision trait; or
    # {"from": "module:function"} to derive it from the backend, see _dtype_policy);
    # downcast_tolerances (default true) compares at the downcast dtype's tolerances.
    dtype_policy: dict = field(default_factory=dict)
    worker_env: str = ""               # variable pinning an xdist worker to one device index
    # "module:function" (trait, folder) -> {env var: value} for a process in which the backend
    # runs with that trait switched off (refdev: a derived refdev profile); what verifies that
    # a declared trait explains a failure (collectors/traitfail.py).  Empty: attribution by rule.
    trait_off: str = ""
    env: dict = field(default_factory=dict)  # extra environment set before the backend loads
    # The backend's own operator tracking ({module, fallback_ops, executed_ops, clear}:
    # collectors/tracking.py) and the variables its strict no-fallback mode sets.
    tracking: dict = field(default_factory=dict)
    no_fallback_env: dict = field(default_factory=dict)
    distributed: dict = field(default_factory=lambda: dict(DISTRIBUTED_DEFAULTS))
    # What the backend claims to support ({operators, dtypes, features} or {from: module:function}):
    # declared_claims() resolves it; core/claims.py judges it against a build
    claims: dict = field(default_factory=dict)
    description: str = ""
    path: str = ""

    def __post_init__(self):
        self.compile_backend = self.compile_backend or default_compile_backend(self.device)
        self._missing = [re.compile(p) for p in GENERIC_MISSING_OP + list(self.missing_op_patterns)]
        self._fallback = [re.compile(p) for p in GENERIC_FALLBACK + list(self.fallback_patterns)]
        self._dtype = [re.compile(p) for p in self.unsupported_dtype_patterns]
        self._not_executed = [re.compile(p) for p in self.not_executed_patterns]
        self._names = {n.lower() for n in self.backend_names}
        self._collective = [re.compile(p) for p in GENERIC_MISSING_COLLECTIVE
                            + list(self.distributed.get("missing_collective_patterns") or [])]

    # -- recognisers -------------------------------------------------------
    def owns_backend(self, backend: str | None) -> bool:
        """Does a dispatcher message naming ``backend`` concern this device?"""
        if not self._names or not backend:
            return True
        b = backend.lower()
        for prefix in ("autograd", "sparse", "quantized", "nested"):
            if b.startswith(prefix) and b[len(prefix):] in self._names:
                return True
        return b in self._names

    def find_missing_ops(self, text: str) -> list[str]:
        """Operators the dispatcher says this backend lacks, in order of appearance."""
        found: list[tuple[int, str]] = []
        for rx in self._missing:
            for m in rx.finditer(text or ""):
                backend = m.groupdict().get("backend")
                if self.owns_backend(backend):
                    found.append((m.start(), _qualify(m.group("op"))))
        seen, out = set(), []
        for _, op in sorted(found):
            if op not in seen:
                seen.add(op)
                out.append(op)
        return out

    def find_fallback_ops(self, text: str) -> list[str]:
        ops = []
        for rx in self._fallback:
            for m in rx.finditer(text or ""):
                op = _qualify(m.group("op"))
                if op not in ops:
                    ops.append(op)
        return ops

    def find_missing_collective(self, text: str) -> str:
        """The first collective the text says the backend lacks (canonical name), or ""."""
        hits = [(m.start(), m.group("collective")) for rx in self._collective for m in rx.finditer(text or "")]
        if not hits:
            return ""
        name = min(hits)[1]
        return COLLECTIVE_OF_ENTRY.get(name, name)

    def matches_unsupported_dtype(self, text: str) -> bool:
        return any(rx.search(text or "") for rx in self._dtype)

    def matches_not_executed(self, text: str) -> bool:
        return any(rx.search(text or "") for rx in self._not_executed)

    def declared_claims(self) -> dict:
        """The claims as {operators, dtypes, features} (lists; {} when none), ``from`` resolved
        by calling the backend's function (refdev: from the active refdev profile)."""
        return resolve_claims(self.claims, self.path or self.name)

    @property
    def unsupported_dtypes(self) -> set[str]:
        return {str(d).replace("torch.", "") for d in self.dtype_policy.get("unsupported", []) or []}

    def to_dict(self) -> dict:
        # every key a profile may hold: torchconform/core/profile_schema.py declares and checks them
        # (imported here, not at the top: pydantic and the models cost ~0.15 s a process that reads no profile)
        from torchconform.core.profile_schema import KEYS

        return {k: getattr(self, k) for k in sorted(KEYS) if hasattr(self, k)} | {"path": self.path}


def _qualify(op: str) -> str:
    return op if "::" in op else "aten::" + op


def available_profiles() -> list[str]:
    return sorted(p.parent.name for p in PROFILE_DIR.glob("*/profile.yaml"))


def shipped_profile_for(device: str) -> str:
    """The shipped profile of ``device``: skiplists/<device>/, else the one whose ``device``
    key names it (skiplists/torchvulkan/ is device vulkan); "" when none is shipped."""
    if device in available_profiles():
        return device
    for path in sorted(PROFILE_DIR.glob("*/profile.yaml")):
        try:
            data = load_yaml(str(path))
        except YamlError:
            continue
        if isinstance(data, dict) and data.get("device") == device:
            return path.parent.name
    return ""


def generic_profile() -> BackendProfile:
    """A profile that recognises the shared messages for any backend (used by ingest without a profile)."""
    return BackendProfile(name="generic", device="")


def load_profile(name_or_path: str | os.PathLike) -> BackendProfile:
    """Load ``skiplists/<name>/profile.yaml`` or a YAML file given by path."""
    text = str(name_or_path)
    if os.sep in text or text.endswith((".yaml", ".yml")) or os.path.isfile(text):
        path = Path(text)
    else:
        path = PROFILE_DIR / text / "profile.yaml"
    if not path.is_file():
        if (REFDEV_PROFILE_DIR / f"{text}.yaml").is_file():
            # two kinds of profile: the backend's (--profile) and refdev's operators (--refdev-profile)
            raise UserError(f"{text!r} is a refdev operator profile, not a backend profile; pass it as "
                            f"--refdev-profile {text} (--profile names skiplists/<backend>/profile.yaml: "
                            f"{', '.join(available_profiles())})")
        raise UserError(
            f"backend profile {text!r} not found ({path}); use one of {', '.join(available_profiles())} "
            "or a path to a profile.yaml"
        )
    try:
        data = load_yaml(str(path))
    except YamlError as exc:
        raise UserError(f"malformed backend profile {exc}") from None
    from torchconform.core.profile_schema import validate_profile   # see to_dict

    model, errors = validate_profile(data, str(path))
    if errors:
        more = f" (and {len(errors) - 1} more: `torchconform skiplist lint {path}`)" if len(errors) > 1 else ""
        first = errors[0]
        raise UserError(f"backend profile {first.path}:{first.line}: {first.message}{more}")
    # the keys the file holds, as the declared schema read them (plain dicts and lists)
    data = {k: v for k, v in model.model_dump(by_alias=True, exclude_unset=True).items() if v is not None}
    # Named by its keys, never by its file: a profile.yaml anywhere is not "profile"
    # (builds are <device>-<name>-<time>, and the site's series go by the name).
    data.setdefault("name", data["device"])
    for key in ("missing_op_patterns", "fallback_patterns", "unsupported_dtype_patterns", "not_executed_patterns",
                "backend_names"):
        data[key] = [str(x) for x in data.get(key) or []]
    data["dtype_policy"] = _dtype_policy(path, {k: v for k, v in (data.get("dtype_policy") or {}).items()
                                                if v is not None})
    data["env"] = {str(k): _env_text(v) for k, v in (data.get("env") or {}).items()}
    data["no_fallback_env"] = {str(k): _env_text(v) for k, v in (data.get("no_fallback_env") or {}).items()}
    data["tracking"] = {str(k): str(v) for k, v in (data.get("tracking") or {}).items() if v}
    data["claims"] = {str(k): v for k, v in (data.get("claims") or {}).items() if v is not None}
    # an empty value means the default, in a section as at the top
    data["distributed"] = dict(DISTRIBUTED_DEFAULTS, **{k: v for k, v in (data.get("distributed") or {}).items()
                                                        if v is not None})
    data["distributed"]["missing_collective_patterns"] = list(data["distributed"]["missing_collective_patterns"] or [])
    for key in ("c10d_backend", "device_env"):
        data["distributed"][key] = str(data["distributed"][key] or "")
    return BackendProfile(path=str(path), **{k: v for k, v in data.items() if v is not None})


def resolve_claims(claims: dict, where: str) -> dict:
    """A profile's ``claims`` section as {operators, dtypes, features}: ``{from: module:function}``
    is called (it returns the same mapping); empty lists are dropped."""
    claims = dict(claims or {})
    if "from" in claims:
        source = str(claims["from"])
        module, _, func = source.partition(":")
        try:
            claims = getattr(importlib.import_module(module), func)() if module and func else None
        except (ImportError, AttributeError) as exc:
            raise UserError(f"backend profile {where}: claims.from {source!r} cannot be called ({exc}); "
                            "name an importable module:function") from None
        if not isinstance(claims, dict) or set(claims) - {"operators", "dtypes", "features"}:
            raise UserError(f"backend profile {where}: claims.from {source!r} must return a mapping with "
                            "operators, dtypes and/or features")
    return {k: [str(x) for x in claims[k]] for k in ("operators", "dtypes", "features") if claims.get(k)}


def _env_text(value) -> str:
    """An env value as the environment holds it (YAML's true is "1", as a shell writes it)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return "" if value is None else str(value)


def _dtype_policy(path: Path, policy) -> dict:
    """The profile's dtype policy with a derived downcast resolved.

    ``downcast: {from: "module:function"}`` asks the backend what it computes each
    dtype in (refdev: ``torchconform.refdev:declared_downcast``, from the active refdev
    profile's traits), so the backend profile cannot disagree with the backend's own
    description; ``downcast_from`` keeps where it came from."""
    downcast = policy.get("downcast") or {}   # its shape: profile_schema.DtypePolicy
    if "from" not in downcast:
        return dict(policy)
    source = downcast["from"]
    module, _, func = str(source).partition(":")
    try:
        derived = getattr(importlib.import_module(module), func)() if module and func else None
    except (ImportError, AttributeError) as exc:
        raise UserError(f"backend profile {path}: dtype_policy.downcast.from {source!r} cannot be called ({exc}); "
                        "name an importable module:function") from None
    if not isinstance(derived, dict):
        raise UserError(f"backend profile {path}: dtype_policy.downcast.from {source!r} must name a module:function "
                        "returning a mapping {dtype: dtype}")
    return dict(policy, downcast={str(k): str(v) for k, v in derived.items()}, downcast_from=str(source))
