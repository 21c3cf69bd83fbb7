"""``torchconform doctor``: is this machine ready?  torch, compiler, ninja, the database,
and every device it can bring up: cpu, cuda if available, refdev, and the PrivateUse1
backends installed here (torch's autoload entry points, shipped profiles' modules that are
importable, ``--backend-module``).  Each PrivateUse1 device comes up in its own child
process (skiplists/probe.py): one process holds one PrivateUse1 name, so a backend that
takes it does not make refdev "fail", it makes refdev run without torch's autoload (as
``torchconform run`` does)."""
import importlib.util
import json
import os
import platform
import subprocess

from torchconform import settings as tc_settings
from torchconform.cli.options import add_db, add_json


def _first_line(cmd) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _database(db) -> str:
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.config import db_url, mask_password

    url = db_url(db)
    shown = mask_password(url)
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if path and not os.path.exists(path):
            shown += " (no file yet: the first stored run creates it)"
    return shown


def _candidates(backend_module: str | None) -> list[tuple[str, str, str]]:
    """(device or "" for whichever it registers, module, setup) of the PrivateUse1 backends to try."""
    # (loaded when the command runs)
    from torchconform.core.backend_env import autoload_entry_points
    from torchconform.core.profile import PROFILE_DIR
    from torchconform.core.yamlpos import load_data

    out = []
    if backend_module:
        out.append(("", backend_module, ""))
    elif autoload_entry_points():
        out.append(("", "", ""))   # whatever torch's autoload registers
    for path in sorted(PROFILE_DIR.glob("*/profile.yaml")):
        data = load_data(str(path)) or {}
        module = data.get("backend_module") or ""
        if module and data.get("device") != "refdev" and importlib.util.find_spec(module.split(".")[0]):
            out.append((data["device"], module, data.get("setup") or ""))
    return out


def _bring_up(info, device, module, setup, env=None) -> dict | None:
    """Probe one device in a child; its facts, or None (the failure is a problem of ``info``)."""
    # (loaded when the command runs)
    from torchconform.skiplists.backend_setup import bring_up_message
    from torchconform.errors import UserError
    from torchconform.skiplists.probe import run_probe

    try:
        facts = run_probe(device, module, setup, full=False, env=env, timeout=300)
    except UserError as exc:
        info["problems"].append(str(exc))
        return None
    if facts.get("error"):
        error = facts["error"]
        name = device or module or "the autoloaded backend"
        info["problems"].append(bring_up_message(name, module, error["stage"], error["detail"],
                                                 [e["name"] for e in facts.get("autoload") or []]))
        return None
    if facts["round_trip"] != "ok":
        info["problems"].append(f"{facts['device']} computes x + x wrong ({facts['round_trip']}); check the backend")
    return facts


def checks(load_device: bool = True, db=None, backend_module=None) -> dict:
    """Facts about the environment; ``ok`` is False when something needed is missing."""
    # (loaded when the command runs)
    from torchconform.core.backend_env import AUTOLOAD_ENV

    # torch here without its autoload: an installed backend's code runs in the children that
    # bring it up, where a crash is a reported problem, not the end of the doctor
    saved = os.environ.get(AUTOLOAD_ENV)
    os.environ[AUTOLOAD_ENV] = "0"
    try:
        import torch
    finally:
        if saved is None:
            os.environ.pop(AUTOLOAD_ENV)
        else:
            os.environ[AUTOLOAD_ENV] = saved

    # (loaded when the command runs)
    from torchconform import __version__
    from torchconform.refdev import build
    from torchconform.core.backend_env import autoload_entry_points, distribution_of

    compiler = build.find_compiler()
    ninja = build.ninja_on_path()
    info = {
        "torchconform": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "compiler": compiler,
        "compiler_version": _first_line([compiler, "--version"]) if compiler else None,
        "ninja": ninja,
        "refdev_cache": build.cache_root(),
        "database": _database(db),
        "devices": {"cpu": 1},
        "backends": [],
        "notes": [],
        "problems": [],
    }
    if compiler is None:
        info["problems"].append(f"no C++ compiler ({os.environ.get('CXX', 'c++')}); install g++ or set $CXX")
    if ninja is None:
        info["problems"].append("ninja not found; pip install ninja")
    if torch.cuda.is_available():
        info["devices"]["cuda"] = torch.cuda.device_count()
    if not load_device:
        info["ok"] = not info["problems"]
        return info
    taken = None
    for device, module, setup in _candidates(backend_module):
        facts = _bring_up(info, device, module, setup)
        if facts is None:
            continue
        dist, version = facts.get("distribution") or distribution_of(module)
        info["devices"][facts["device"]] = facts["device_count"]
        info["backends"].append({"device": facts["device"], "module": module, "registered_by": facts["registered_by"],
                                 "distribution": dist, "version": version})
        if facts["registered_by"] == "autoload":
            taken = facts["device"]
    if compiler and ninja:
        # (loaded when the command runs)
        from torchconform.refdev import profiles

        env = dict(os.environ)
        if autoload_entry_points():
            # refdev needs PrivateUse1 for itself: `torchconform run --device refdev` turns autoload off too
            env[AUTOLOAD_ENV] = "0"
            if taken:
                info["notes"].append(f"PrivateUse1 is {taken!r} when torch loads (autoload); refdev runs with "
                                     f"{AUTOLOAD_ENV}=0, which `torchconform run --device refdev` sets")
        facts = _bring_up(info, "refdev", "torchconform.refdev", "torchconform.refdev:load", env)
        if facts is not None:
            info["devices"]["refdev"] = facts["device_count"]
            info["refdev_profile"] = profiles.load_profile(tc_settings.given("TORCHCONFORM_REFDEV_PROFILE")).name
    info["ok"] = not info["problems"]
    return info


def _run(args) -> int:
    info = checks(load_device=not args.no_device, db=args.db, backend_module=args.backend_module)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key in ("torchconform", "torch", "python", "compiler", "compiler_version", "ninja", "refdev_cache",
                    "refdev_profile", "database"):
            if key in info:
                print(f"{key:<17} {info[key] if info[key] is not None else 'NOT FOUND'}")
        print(f"{'devices':<17} {', '.join(f'{k} x{v}' for k, v in info['devices'].items())}")
        for b in info["backends"]:
            dist = f"{b['distribution']} {b['version']}" if b["distribution"] else "no installed distribution"
            print(f"{'backend':<17} {b['device']}: {b['module'] or '(autoload)'}, {dist}, registered by "
                  f"{b['registered_by']}")
        for note in info["notes"]:
            print(f"note: {note}")
        for problem in info["problems"]:
            print(f"problem: {problem}")
        print("ok" if info["ok"] else "NOT OK")
    return 0 if info["ok"] else 1


def register(sub):
    p = sub.add_parser("doctor", help="check torch, compiler, ninja, the database and every device that comes up")
    add_json(p)
    p.add_argument("--no-device", action="store_true", help="bring up no device (no refdev build, no backend)")
    add_db(p)
    p.add_argument("--backend-module", default=None, metavar="M",
                   help="also bring up the PrivateUse1 device this module registers")
    p.set_defaults(func=_run)
