"""``torchconform backend init NAME --module M``: probe a backend, write its profile.

The backend is brought up in a child process (skiplists/probe.py) and what it offers --
device count, memory_stats, boxed fallback and PrivateUse1 kernels, compile backends that
run on it, c10d backends, dtypes, op-tracking functions -- becomes a commented profile
(skiplists/profile_init.py) that ``torchconform run --profile PATH`` and
``torchconform skiplist lint PATH`` accept.  Every key: docs/profiles.md.
"""
from __future__ import annotations

import os
import re
import sys

from torchconform.errors import UserError


def register(subparsers):
    p = subparsers.add_parser("backend", help="onboard a device backend: probe it and write its profile")
    sub = p.add_subparsers(dest="backend_command", metavar="ACTION")
    sub.required = True
    init = sub.add_parser("init", help="probe a backend and write a commented profile YAML for it",
                          description="Bring the device up in a child process, measure what it supports and "
                                      "write a backend profile (docs/profiles.md) to edit and lint.")
    init.add_argument("name", metavar="NAME", help="the torch device type (the PrivateUse1 name), e.g. npu")
    init.add_argument("--module", default="", metavar="M",
                      help="module whose import registers the backend (not needed when torch's autoload does)")
    init.add_argument("--setup", default="", metavar="MODULE:FUNCTION",
                      help="call this after the import (default: the shipped profile's for that module, if any)")
    init.add_argument("-o", "--output", default=None, metavar="PATH",
                      help="where to write the profile (default ./<NAME>.profile.yaml)")
    init.add_argument("--force", action="store_true", help="overwrite PATH if it exists")
    init.set_defaults(func=run_init)


def run_init(args) -> int:
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.skiplists.backend_setup import Backend, probe_backend
    from torchconform.skiplists import profile_init
    from torchconform.core.profile import load_profile

    name = args.name
    if not re.match(r"^[a-z_][a-z0-9_]*$", name):
        raise UserError(f"{name!r} is not a device type; use the backend's lower-case PrivateUse1 name, e.g. npu")
    if args.setup and not re.match(r"^[\w.]+:\w+$", args.setup):
        raise UserError(f"--setup {args.setup!r} must be MODULE:FUNCTION, e.g. torch_mybackend:init")
    path = os.path.abspath(args.output or f"{name}.profile.yaml")
    if os.path.exists(path) and not args.force:
        raise UserError(f"{path} exists; pass --force to overwrite it or -o another path")
    backend = Backend(None, args.module)
    setup = args.setup or profile_init.known_setup(args.module)
    facts = probe_backend(_Args(), None, name, args.module, setup, True, backend)
    data, notes, header = profile_init.profile_from_probe(facts)
    if backend.env:
        data["env"] = dict(backend.env)   # this device comes up only with torch's autoload off
        notes["env"] = [f"{k}={v}: needed here (another backend's autoload gets in the way)"
                        for k, v in backend.env.items()]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(profile_init.render_profile(data, notes, header))
    load_profile(path)   # what was written is a valid profile
    print(f"wrote {path}: {profile_init.summary(data)}")
    print(f"next: torchconform skiplist lint {os.path.relpath(path)} && torchconform run --device {name} "
          f"--profile {os.path.relpath(path)}", file=sys.stderr)
    return 0


class _Args:
    """What the probe reads of `run`'s arguments (init has no refdev profile to pass)."""
    refdev_profile = None
