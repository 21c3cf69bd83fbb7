"""``torchconform plan --build B [--top K] [--json]``: the K operators to implement next.

The operators whose implementation unblocks the most models of the build (fully:
every operator of a model's blocking set), then the most tests, with the models
each step unblocks (census/plan.py: exact for small K, greedy past a size limit,
which the output says).  Needs the build's census (`torchconform census`) and the
models' operator sets (`torchconform sweep --suite models`); tests count without them.
"""
import json

from torchconform.cli.options import add_build, add_db, add_json
from torchconform.db.opening import open_store
from torchconform.errors import UserError


def _run(args) -> int:
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.census import impact, plan

    if args.top < 1:
        raise UserError(f"--top {args.top}: a plan needs at least one step; pass --top 1 or more")
    with open_store(args.db, create=False) as store:
        found = impact.load_impact(store, args.build)
    p = plan.plan(found.sets(), found.tests, args.top, build=args.build,
                  through={op: e["through"] for op, e in impact.op_models(found.blocks).items()},
                  untraced=found.untraced)
    print(json.dumps(p.to_dict(), indent=2) if args.json else plan.format_plan(p))
    return 0


def register(sub):
    p = sub.add_parser("plan", help="the operators whose implementation unblocks the most models and tests")
    add_build(p, help="build name (see `torchconform builds`); needs its census")
    p.add_argument("--top", type=int, default=10, help="operators to plan (default 10)")
    add_json(p, help="print the plan as JSON")
    add_db(p)
    p.set_defaults(func=_run)
