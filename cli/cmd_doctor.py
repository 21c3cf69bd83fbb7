"""``torchconform doctor``: is this machine ready? torch, compiler, ninja, devices, database."""
import json
import os
import platform
import subprocess


def _first_line(cmd) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def checks(load_device: bool = True) -> dict:
    """Facts about the environment; ``ok`` is False when something needed is missing."""
    import torch

    from torchconform import __version__, refdev
    from torchconform.config import db_url, mask_password
    from torchconform.refdev import build

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
        "database": mask_password(db_url()),
        "devices": {"cpu": 1},
        "problems": [],
    }
    if compiler is None:
        info["problems"].append(f"no C++ compiler ({os.environ.get('CXX', 'c++')}); install g++ or set $CXX")
    if ninja is None:
        info["problems"].append("ninja not found; pip install ninja")
    if torch.cuda.is_available():
        info["devices"]["cuda"] = torch.cuda.device_count()
    if load_device and compiler and ninja:
        try:
            name = refdev.load()
            module = getattr(torch, name)
            info["devices"][name] = module.device_count()
            info["refdev_profile"] = refdev.describe()["profile"]
            # a real round trip, so "available" means "works"
            x = torch.arange(4.0, device=name)
            if (x + x).cpu().tolist() != [0.0, 2.0, 4.0, 6.0]:
                info["problems"].append(f"{name} computes wrong results; rebuild (delete {build.cache_root()})")
        except Exception as exc:  # noqa: BLE001 - doctor reports, it does not crash
            info["problems"].append(f"refdev failed to load: {' '.join(str(exc).split())[:300]}")
    info["ok"] = not info["problems"]
    return info


def _run(args) -> int:
    info = checks(load_device=not args.no_device)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key in ("torchconform", "torch", "python", "compiler", "compiler_version", "ninja", "refdev_cache",
                    "refdev_profile", "database"):
            if key in info:
                print(f"{key:<17} {info[key] if info[key] is not None else 'NOT FOUND'}")
        print(f"{'devices':<17} {', '.join(f'{k} x{v}' for k, v in info['devices'].items())}")
        for problem in info["problems"]:
            print(f"problem: {problem}")
        print("ok" if info["ok"] else "NOT OK")
    return 0 if info["ok"] else 1


def register(sub):
    p = sub.add_parser("doctor", help="check torch, compiler, ninja, devices and the database URL")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--no-device", action="store_true", help="do not build/load the reference device")
    p.set_defaults(func=_run)
