"""The CLI's side of ``--device`` / ``--profile`` / ``--backend-module``: which profile a run
uses (given, shipped, or probed defaults written to ``.torchconform/profiles/<device>.yaml``
when the device has none), and a check that the device comes up, made in a child process
before pytest starts: a run whose backend cannot load stops with one line before anything
is stored.  Errors speak the CLI's flags (the plugin's are ``--tc-*``)."""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

from torchconform.errors import UserError
from torchconform import settings
from torchconform.core.backend_env import AUTOLOAD_ENV, autoload_enabled
from torchconform.core.profile import load_profile, shipped_profile_for
from torchconform.skiplists import profile_init
from torchconform.skiplists.probe import run_probe

GENERATED_DIR = os.path.join(".torchconform", "profiles")
# the plugin's option -> the CLI's (messages from pytest's child name the plugin's)
CLI_FLAGS = {"device": "device", "profile": "profile", "backend-module": "backend-module", "timeout": "timeout",
             "ops": "ops", "trait-reruns": "trait-reruns", "skiplist": "skiplist", "skiplist-audit": "skiplist-audit",
             "build": "build", "db": "db", "junit": "junit", "jsonl": "jsonl", "branch": "branch", "commit": "commit",
             "selection": "selection", "suite": "suite"}
_TC_FLAG = re.compile(r"--tc-([a-z][a-z-]*[a-z])")


def cli_wording(text: str) -> str:
    """``text`` with the plugin's ``--tc-X`` flags written as the CLI's ``--X``."""
    return _TC_FLAG.sub(lambda m: "--" + CLI_FLAGS[m.group(1)] if m.group(1) in CLI_FLAGS else m.group(0), text)


@dataclass
class Backend:
    profile: object                 # BackendProfile
    backend_module: str             # what --tc-backend-module gets ("": none)
    env: dict = field(default_factory=dict)   # what the run's processes need on top of ours
    checked: bool = False           # brought up in a child already


def run_env(args, profile, extra: dict | None = None) -> dict:
    """The environment the run's processes get (what the probe must see too)."""
    env = dict(os.environ)
    if getattr(args, "refdev_profile", None):
        env["TORCHCONFORM_REFDEV_PROFILE"] = args.refdev_profile
    for key, value in (profile.env if profile is not None else {}).items():
        env.setdefault(key, value)
    env.update(extra or {})
    return env


def resolve_backend(args, check: bool = True) -> Backend:
    """The run's backend (once per ``args``).  ``check``: bring the device up in a child now."""
    cached = getattr(args, "resolved_backend", None)
    if cached is not None and (cached.checked or not check):
        return cached

    device, module = args.device, args.backend_module or ""
    shipped = "" if args.profile else shipped_profile_for(device)
    if args.profile or shipped:
        profile = load_profile(args.profile or shipped)
        if profile.device != device:
            raise UserError(f"profile {profile.name!r} is for device {profile.device!r}, not {device!r}; "
                            "pick a matching --profile")
        backend = cached or Backend(profile, module)
        if check and device != "cpu":
            _check(args, backend)
    else:
        backend = _probed(args, device, module)
    args.resolved_backend = backend
    return backend


def _setup_for(profile, module: str) -> str:
    """The profile's setup runs when the module it belongs to is the one loaded (torchconform/core/device.py)."""
    return profile.setup if profile.setup and (not module or module == profile.backend_module) else ""


def _check(args, backend: Backend) -> None:
    profile = backend.profile
    module = backend.backend_module or profile.backend_module
    setup = _setup_for(profile, backend.backend_module)
    # an autoloaded backend_module is fine: torchconform/core/device.py brings the device up with
    # torch imported first and does not import a module whose device is registered already
    probe_backend(args, profile, profile.device, module, setup, False, backend)
    backend.checked = True


def _probed(args, device: str, module: str) -> Backend:
    if not re.match(r"^[a-z_][a-z0-9_]*$", device):
        raise UserError(f"--device {device!r} is not a device type; use the backend's lower-case PrivateUse1 name")
    backend = Backend(None, module)
    facts = probe_backend(args, None, device, module, profile_init.known_setup(module), True, backend)
    data, notes, header = profile_init.profile_from_probe(facts)
    os.makedirs(GENERATED_DIR, exist_ok=True)
    path = os.path.abspath(os.path.join(GENERATED_DIR, f"{device}.yaml"))
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(profile_init.render_profile(data, notes, header))
    init = f"torchconform backend init {device}" + (f" --module {module}" if module else "")
    print(f"torchconform: no profile for {device!r}: probed defaults ({profile_init.summary(data)}) in "
          f"{os.path.relpath(path)}; `{init}` writes one to keep", file=sys.stderr)
    backend.profile = load_profile(path)
    if facts.get("registered_by") == "autoload":
        backend.backend_module = ""
    backend.checked = True
    return backend


def probe_backend(args, profile, device: str, module: str, setup: str, full: bool, backend: Backend) -> dict:
    """Facts of a child that brought the device up; a failure is one line in the CLI's words.
    When torch's autoload gets in the way (another backend takes PrivateUse1, or fails), the
    device is tried without it, and the run goes without it if that works."""
    facts = run_probe(device, module, setup, full, env=run_env(args, profile, backend.env))
    error = facts.get("error")
    autoload = [e["name"] for e in facts.get("autoload") or []]
    if error and autoload and autoload_enabled() and error["stage"] != "import":
        without = run_env(args, profile, {**backend.env, AUTOLOAD_ENV: "0"})
        retry = run_probe(device, module, setup, full, env=without)
        if not retry.get("error"):
            backend.env[AUTOLOAD_ENV] = "0"
            print(f"torchconform: {AUTOLOAD_ENV}=0 for this run: torch's autoload of {', '.join(autoload)} keeps "
                  f"{device!r} from coming up ({error['stage']}: {error['detail'][:120]})", file=sys.stderr)
            return retry
    if error:
        raise UserError(bring_up_message(device, module, error["stage"], error["detail"], autoload))
    return facts


def bring_up_message(device: str, module: str, stage: str, detail: str, autoload=()) -> str:
    """One line: what failed bringing ``device`` up, and what to do (CLI flags)."""
    if stage == "torch":
        return (f"device {device!r}: importing torch failed: {detail}; torch's autoload runs installed backends "
                f"({', '.join(autoload) or 'entry points torch.backends'}): fix that backend or set {AUTOLOAD_ENV}=0")
    if stage == "import":
        return (f"device {device!r}: cannot import backend module {module} ({detail}); install it or pass "
                "--backend-module naming the module that registers the device")
    if stage == "setup":
        return (f"device {device!r}: backend set-up failed: {detail}; check that "
                f"`python -c 'import torch; import {module or 'torch'}'` works, then run `torchconform doctor`")
    if stage == "user":
        return detail
    if stage == "not_registered":
        how = f"importing {module} did not register it" if module else "no --backend-module was given"
        return (f"device {device!r} is not registered (PrivateUse1 is {detail!r}): {how}; pass --backend-module "
                "naming the module that registers it, or a --profile whose backend_module/setup do")
    if stage == "unavailable":
        return f"device {device!r} is not available in this torch build or machine; pick another --device"
    return f"device {device!r} is registered but reports no devices ({detail}); check the backend's runtime"


def profile_label(args) -> str:
    """The build name's profile part: refdev's operator profile, else the backend profile's name."""
    if args.device == "refdev" and (args.profile in (None, "refdev")):
        return os.path.splitext(os.path.basename(args.refdev_profile
                                                 or settings.get("TORCHCONFORM_REFDEV_PROFILE")))[0]
    return resolve_backend(args, check=False).profile.name
