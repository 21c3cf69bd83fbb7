"""What a backend needs around it: how it is brought up, what it is called as installed,
and the environment a command that loads it must carry.

* :func:`bring_up` registers a device the way every process should: torch first (its
  autoload, the ``torch.backends`` entry-point group, may register the backend itself,
  and importing the backend's module before torch re-enters that module half-initialised:
  "Failed to load the backend extension"), the backend module only when the device is not
  registered yet, then the profile's ``setup``.
* :func:`distribution_of` names the installed distribution of a module
  (``importlib.metadata.packages_distributions``) and its version.
* :func:`repro_command` writes a repro command another machine can run: the ``VAR=value``
  prefix the backend needs (:func:`repro_environment`: the profile's ``env``, PYTHONPATH
  entries relative to the checkout or as ``$VAR/...``), ``python -m pytest``, the test and
  the run's options that decide collection (:func:`collection_options`: the upstream suite's
  ``-c``/``--rootdir``/``-p``/``--noconftest``), without this machine's paths.
"""
from __future__ import annotations

import importlib
import os
import re
import shlex
import sys

from torchconform.errors import UserError

IN_TREE = {"cpu", "cuda", "xpu", "mps", "meta", "hpu"}
AUTOLOAD_GROUP = "torch.backends"
AUTOLOAD_ENV = "TORCH_DEVICE_BACKEND_AUTOLOAD"


class BringUpError(Exception):
    """Bringing a device up failed at ``stage``: torch (its autoload), import, setup,
    user (the set-up's own UserError), not_registered, unavailable, no_devices.  ``detail`` is one line."""

    def __init__(self, stage: str, detail: str):
        super().__init__(f"{stage}: {detail}")
        self.stage, self.detail = stage, detail


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line; an exception raised from another names its cause too."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause) and str(cause) not in text:
        text += " (caused by " + " ".join(f"{type(cause).__name__}: {cause}".split()) + ")"
    return text[:400]


def autoload_entry_points() -> list[dict]:
    """torch's autoload entry points installed here (read without importing torch)."""
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=AUTOLOAD_GROUP):
        dist = getattr(ep, "dist", None)
        out.append({"name": ep.name, "value": ep.value, "distribution": dist.name if dist is not None else ""})
    return out


def autoload_enabled(environ=None) -> bool:
    return (os.environ if environ is None else environ).get(AUTOLOAD_ENV, "1") == "1"


def privateuse1_name() -> str:
    import torch

    return torch._C._get_privateuse1_backend_name()


def bring_up(device: str, module: str = "", setup: str = "") -> str:
    """Register ``device`` in this process; how it got registered: in-tree, autoload,
    import or setup.  Raises BringUpError."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - torch's autoload runs backends' code at import
        raise BringUpError("torch", one_line(exc)) from None
    # an in-tree device type may still need its module (hpu: habana_frameworks.torch)
    how = "autoload" if device not in IN_TREE and privateuse1_name() == device else ""
    if not how and module:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise BringUpError("import", one_line(exc)) from None
        except Exception as exc:  # noqa: BLE001 - the backend's own import failing
            raise BringUpError("setup", one_line(exc)) from None
        how = "import"
    if setup:
        mod_name, _, func = setup.partition(":")
        try:
            getattr(importlib.import_module(mod_name), func)()
        except UserError as exc:  # the set-up's own one-line words (refdev: a bad operator profile)
            raise BringUpError("user", str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a backend failing to load is the user's environment
            raise BringUpError("setup", one_line(exc)) from None
        how = how or "setup"
    if device in IN_TREE:
        mod = getattr(torch, device, None)
        if device != "cpu" and not (mod is not None and hasattr(mod, "is_available") and mod.is_available()):
            raise BringUpError("unavailable", f"{device} is not available in this torch build or machine")
        return "in-tree"
    name = privateuse1_name()
    if name != device:
        raise BringUpError("not_registered", name)
    mod = getattr(torch, device, None)
    try:
        count = mod.device_count() if mod is not None and hasattr(mod, "device_count") else 1
    except Exception as exc:  # noqa: BLE001
        raise BringUpError("no_devices", one_line(exc)) from None
    if mod is None or (hasattr(mod, "is_available") and not mod.is_available()) or count < 1:
        raise BringUpError("no_devices", f"torch.{device} reports {count} devices")
    return how


def distribution_of(module: str) -> tuple[str, str]:
    """(distribution, version) of the installed package providing ``module``; ("", "") if none."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    if not module:
        return "", ""
    top = module.split(".")[0]
    for name in packages_distributions().get(top, []) + [top]:
        try:
            return name, version(name)
        except PackageNotFoundError:
            continue
    found = getattr(sys.modules.get(module) or sys.modules.get(top), "__version__", "")
    return "", str(found or "")


# Variables a path may be written under on another machine, most specific first.
PORTABLE_VARS = ("TORCHCONFORM_PYTORCH_SRC", "VIRTUAL_ENV", "HOME")


def portable_path(path: str, root: str, environ=None) -> str:
    """``path`` as another machine can read it: relative to ``root`` (the checkout the
    command runs in), else under one of PORTABLE_VARS as ``$VAR/...``; "" when neither applies."""
    environ = os.environ if environ is None else environ
    path, root = os.path.abspath(path), os.path.abspath(root)
    if path == root or path.startswith(root + os.sep):
        return os.path.relpath(path, root)
    for var in PORTABLE_VARS:
        base = os.path.abspath(environ[var]) if environ.get(var) else ""
        if base and (path == base or path.startswith(base + os.sep)):
            rest = os.path.relpath(path, base)
            return f"${var}" + ("" if rest == "." else "/" + rest)
    return ""


def _shell_word(text: str) -> str:
    """Shell-quoted, but a leading ``$VAR`` left for the shell to expand."""
    m = re.match(r"^(\$[A-Z_][A-Z0-9_]*)(.*)$", text)
    if m and (not m.group(2) or shlex.quote(m.group(2)) == m.group(2)):
        return text
    if m:
        return m.group(1) + shlex.quote(m.group(2))
    return shlex.quote(text)


def repro_environment(profile_env: dict, root: str, environ=None) -> list[str]:
    """``VAR=value`` words a repro command must start with: the profile's ``env`` (set
    before the backend loads) and PYTHONPATH's entries that other machines can have
    (relative to ``root`` or under a PORTABLE_VARS variable); an entry that is neither is
    this machine's own and left out."""
    environ = os.environ if environ is None else environ
    words = [f"{name}={shlex.quote(str(value))}" for name, value in sorted(profile_env.items())]
    entries = [portable_path(p, root, environ) for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    entries = [e for e in dict.fromkeys(entries) if e]
    if entries:
        words.append("PYTHONPATH=" + os.pathsep.join(_shell_word(e) for e in entries))
    return words


# pytest options of a run that decide which tests exist and how they are named (the
# upstream suite's ini, rootdir, plugin and --noconftest): a repro keeps them, or its
# test is collected under another name (...PRIVATEUSE1) or not at all.
_KEPT_WITH_VALUE = ("-c", "--rootdir", "-p")
_KEPT_FLAGS = ("--noconftest",)
_NOT_KEPT_PLUGINS = ("no:cacheprovider", "torchconform.sweep.pytest_shard")


def collection_options(args) -> list[str]:
    """The options of a pytest command line (``config.invocation_params.args``) a repro keeps."""
    out, args = [], [str(a) for a in args]
    for i, arg in enumerate(args):
        if arg in _KEPT_FLAGS:
            out.append(arg)
        elif arg in _KEPT_WITH_VALUE and i + 1 < len(args) and args[i + 1] not in _NOT_KEPT_PLUGINS:
            out += [arg, args[i + 1]]
        elif arg.startswith(tuple(f"{o}=" for o in _KEPT_WITH_VALUE if o.startswith("--"))):
            out.append(arg)
    return out


def repro_command(node_path: str, options: list[str], profile_env: dict, root: str, environ=None) -> str:
    """A repro command another machine can run from its own checkout: the environment the
    backend needs, ``python -m pytest``, the test and ``options`` (collection_options plus
    the plugin's --tc-*), every path in them written with portable_path (kept as is when
    it has no portable form)."""
    environ = os.environ if environ is None else environ

    def portable(word: str) -> str:
        file, sep, rest = word.partition("::")
        if not os.path.isabs(file):
            return shlex.quote(word)
        short = portable_path(file, root, environ)
        return _shell_word(short + sep + rest) if short else shlex.quote(word)

    words = repro_environment(profile_env, root, environ) + ["python", "-m", "pytest", portable(node_path)]
    return " ".join(words + [portable(o) for o in options])
