"""``torchconform sweep``: the nightly sweep (models: own engines; ops/upstream: pytest)."""
from __future__ import annotations

import signal
import sys

from torchconform.cli.options import add_build, add_db, add_device, add_json
from torchconform.errors import UserError
from torchconform.sweep import engines

def register(subparsers):
    p = subparsers.add_parser("sweep", help="sweep a suite (model zoo, ops, upstream) into a build, "
                                            "crash-proof, sharded and resumable")
    p.add_argument("--suite", choices=("models", "ops", "upstream"), default="models")
    p.add_argument("--selection", default="quick",
                   help="quick, full, or (models) model ids such as hf/bert,hf/gpt2 or a file listing them")
    p.add_argument("--models", default="", metavar="FILE",
                   help="models: your own model list (model ids, Hugging Face config files or folders of them, "
                        "Python files building an nn.Module); see docs/zoo.md")
    add_build(p, help="build name the results belong to (shards share it)")
    p.add_argument("--shards", type=int, default=1, help="number of shards the selection is split into")
    p.add_argument("--shard", type=int, default=0, help="which shard this machine runs (0-based)")
    p.add_argument("--engine", choices=engines.names(), default="local",
                   help="where the models run: local worker processes or a Ray cluster (sweep/engines.py)")
    p.add_argument("--ray-address", default="", help="Ray cluster address for --engine ray (default: auto)")
    p.add_argument("--resume", action="store_true", help="skip what the build already has")
    add_device(p, default="", help="device type under test (default: the profile's)")
    p.add_argument("--profile", default="", help="backend profile name or path (default: named like the device)")
    p.add_argument("--workers", type=int, default=1, help="local worker processes, each pinned to one device")
    add_db(p)
    p.add_argument("--variants", default="eval,train,compile", help="models: runs per model (eval,train,compile)")
    p.add_argument("--compile-backend", default="", help="models: torch.compile backend (default: the profile's)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per model before it is a timeout")
    p.add_argument("--memory-limit-mb", type=int, default=0,
                   help="models: address space each worker may grow by (0: no limit)")
    p.add_argument("--threads", type=int, default=1, help="models: torch threads per worker")
    # One warm call by default: each costs a model run on the device and one on CPU, and
    # the nightly sweep is about coverage first (a CPU coverage sweep took 3x as long with 2).
    p.add_argument("--warm-calls", type=int, default=1,
                   help="models: calls after the first, on the device and on CPU, whose median is a passing "
                        "run's warm time (default 1; 0: cold time only; 5 or more for cost comparisons)")
    p.add_argument("--retrace", action="store_true",
                   help="models: trace each model's operator sets again even where the store has them "
                        "for these torch/library versions")
    add_json(p, help="print the breakdown as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.models and args.suite != "models":
        raise UserError(f"--models lists models for --suite models; drop it for --suite {args.suite}")
    if args.engine == "ray" and args.suite != "models":
        raise UserError(f"--engine ray runs the models suite only; drop --engine ray for --suite {args.suite}")
    if args.suite == "models":
        return _models(args)
    return _pytest_suite(args)


def _models(args) -> int:
    import json
    import os

    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.sweep.driver import SweepInterrupted, SweepOptions, run_sweep

    if args.warm_calls < 0:
        raise UserError(f"--warm-calls {args.warm_calls} is negative; pass 0 (cold time only) or more")
    if args.models:
        if args.selection != "quick":
            raise UserError("--models FILE and --selection both say which models run; pass one of them")
        if not os.path.isfile(args.models):
            raise UserError(f"model list {args.models} not found; pass --models PATH of an existing file")
        args.selection = args.models

    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    opts = SweepOptions(build=args.build, selection=args.selection, device=args.device, profile=args.profile,
                        shards=args.shards, shard=args.shard, engine=args.engine, ray_address=args.ray_address,
                        resume=args.resume, workers=args.workers, db=args.db, variants=variants,
                        compile_backend=args.compile_backend, timeout=args.timeout,
                        memory_limit_mb=args.memory_limit_mb, threads=args.threads, retrace=args.retrace,
                        warm_calls=args.warm_calls,
                        command=" ".join(["torchconform"] + sys.argv[1:]))
    try:
        report = run_sweep(opts)
    except SweepInterrupted as exc:
        print(f"torchconform: sweep interrupted ({signal.Signals(exc.signum).name}): the models that finished are "
              "stored; run the same command with --resume to finish the build", file=sys.stderr)
        return 128 + exc.signum  # the shell's convention for "ended by this signal"
    for note in opts.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.build_breakdown, indent=2))
    else:
        print(_render(report))
    return 0


def _render(report):
    # (loaded when the command runs)
    from torchconform.sweep.driver import render

    return render(report)


def _pytest_suite(args) -> int:
    """ops/upstream: the runner's path (``torchconform run``: pytest + plugin + store),
    with this shard (and, with --resume, only what the build lacks) kept by our plugin;
    ``sweep/pytest_driver.py`` locks the build around it."""
    # (loaded when the command runs)
    from torchconform.sweep import shards
    from torchconform.sweep.pytest_driver import run_pytest_sweep

    shards.check_shard(args.shards, args.shard)
    cmd = [sys.executable, "-m", "torchconform", "run", "--suite", args.suite, "--selection", args.selection,
           "--build", args.build, "--timeout", str(args.timeout), "-n", str(args.workers)]
    if args.device:
        cmd += ["--device", args.device]
    if args.profile:
        cmd += ["--profile", args.profile]
    if args.db:
        cmd += ["--db", args.db]
    if args.json:
        cmd += ["--json"]
    cmd += ["--", "-p", "torchconform.sweep.pytest_shard",
            "--tc-sweep-shards", str(args.shards), "--tc-sweep-shard", str(args.shard)]
    if args.shards > 1:
        cmd += ["--tc-shard", f"{args.shard}/{args.shards}"]
    if args.resume:
        cmd += ["--tc-sweep-resume"]
    return run_pytest_sweep(cmd, args.build, args.suite, args.shard, args.shards, args.resume, args.db)
