"""``torchconform version``: tool, torch and git versions."""
import json
import platform

from torchconform import __version__
from torchconform.cli.options import add_json


def versions() -> dict:
    import torch

    return {
        "torchconform": __version__,
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "python": platform.python_version(),
    }


def _run(args) -> int:
    info = versions()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            print(f"{key:<13} {value}")
    return 0


def register(sub):
    p = sub.add_parser("version", help="print tool, torch and git versions")
    add_json(p)
    p.set_defaults(func=_run)
