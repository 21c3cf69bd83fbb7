"""``torchconform refdev describe [--refdev-profile P] [--json]``: a profile's ground truth."""
import json

from torchconform.cli.options import add_json


def _trait_text(value) -> str:
    """Switches read on/off; list traits (unsupported dtypes, leaking ops...) show their values."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]" if value else "[]"
    return str(value)


def _describe(args) -> int:
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform import refdev

    info = refdev.describe(args.profile)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"profile     {info['profile']} ({info['profile_path']})")
    print(f"device      {info['device']}")
    if info.get("fallback_mode") == "boxed":
        print("mode        boxed: PyTorch's boxed CPU fallback serves every operator without a refdev kernel")
    print(f"implemented {len(info['implemented'])}")
    print(f"fallback    {len(info['fallback'])}: {', '.join(info['fallback']) or '-'}")
    print(f"missing     {len(info['missing'])}")
    traits = ", ".join(f"{k}={_trait_text(v)}" for k, v in info["traits"].items())
    print(f"traits      {traits}")
    if args.list:
        for key in ("implemented", "fallback", "missing"):
            for op in info[key]:
                print(f"{key}\t{op}")
    return 0


def _check(args) -> int:
    """Load the device and prove it works: round trip, views, autograd, a small OpInfo slice."""
    import time

    import torch

    # (loaded when the command runs)
    from torchconform import refdev
    from torchconform.suites.ops import opinfo_slice

    start = time.perf_counter()
    name = refdev.load()
    loaded = time.perf_counter() - start
    x = torch.arange(6.0, device=name).reshape(2, 3)
    x[0].add_(1)
    problems = []
    if x.cpu().tolist() != [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]]:
        problems.append("round trip / in-place on a view gave wrong values")
    a = torch.ones(3, device=name, requires_grad=True)
    (a * a).sum().backward()
    if a.grad.cpu().tolist() != [2.0, 2.0, 2.0]:
        problems.append("autograd gave wrong gradients")
    counts = {}
    if args.ops:
        results = opinfo_slice.run_slice(name, opinfo_slice.opinfos(limit=args.ops), max_samples=3)
        for r in results:
            counts[r.status] = counts.get(r.status, 0) + 1
    print(f"device   {name} x{getattr(torch, name).device_count()} (profile {refdev.describe()['profile']}, "
          f"loaded in {loaded:.1f}s)")
    if counts:
        print("opinfo   " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for p in problems:
        print(f"problem: {p}")
    print("ok" if not problems else "NOT OK")
    return 0 if not problems else 1


def register(sub):
    p = sub.add_parser("refdev", help="the reference PrivateUse1 device")
    rsub = p.add_subparsers(dest="refdev_command", metavar="SUBCOMMAND")
    rsub.required = True
    d = rsub.add_parser("describe", help="implemented / fallback / missing operators and traits of a profile")
    # --refdev-profile, as in `run`/`demo`/`rehearse` (--profile there is the backend profile);
    # --profile stays accepted for scripts written before
    d.add_argument("--refdev-profile", "--profile", dest="profile",
                   help="refdev operator profile (full, young-backend) or YAML path; "
                        "default $TORCHCONFORM_REFDEV_PROFILE or young-backend")
    add_json(d)
    d.add_argument("--list", action="store_true", help="also list every operator (text output)")
    d.set_defaults(func=_describe)
    c = rsub.add_parser("check", help="build/load the device and run a self-check")
    c.add_argument("--ops", type=int, default=20, metavar="N",
                   help="also compare the first N OpInfos on the device against CPU (0: skip; default 20)")
    c.set_defaults(func=_check)
