"""``torchconform coverage``: the coverage audit of the suite itself: which backend-relevant ATen
overloads a build's tests reached on the device, against its census (docs/census.md,
"Coverage audit").

    torchconform coverage --build B                 the headline and the counts per census status
    torchconform coverage --build B --unreached     plus every measurable overload no test reached
    torchconform coverage --build B --json          everything, reached overloads with test counts

Read from what the runs stored (db/coverage.py); a build whose runs traced nothing says
"not measured", never 0 %.
"""
from __future__ import annotations

import json

from torchconform.cli.options import add_build, add_db, add_json


def register(sub):
    p = sub.add_parser("coverage", help="which backend-relevant ATen overloads a build's tests reached (coverage audit)",
                       description="The coverage audit: overloads a build's tests reached on the device, against "
                                   "every backend-relevant overload of the build's census, per census status, and "
                                   "the overloads no test reached.")
    add_build(p)
    p.add_argument("--unreached", action="store_true", help="list every measurable overload no test reached")
    add_json(p, help="print JSON: the counts, every reached overload (tests, an example test) and the unreached ones")
    add_db(p)
    p.set_defaults(func=_run)


def _run(args) -> int:
    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.db.coverage import build_coverage
    from torchconform.db.opening import open_store

    with open_store(args.db, create=False) as store:
        cov = build_coverage(store, args.build)
    if args.json:
        print(json.dumps(cov, indent=2))
        return 0
    for line in text_lines(cov, args.unreached):
        print(line)
    return 0


def text_lines(cov: dict, unreached: bool = False) -> list[str]:
    # (loaded when the command runs)
    from torchconform.db.coverage import headline

    lines = [f"build {cov['build']}: {headline(cov)}"]
    if cov["measured"]:
        lines.append("  traced by: " + ", ".join(f"{t} ({n} tests)" for t, n in cov["traces"].items()))
    if cov["statuses"]:
        lines.append("  by census status (reached / overloads):")
        for status, v in cov["statuses"].items():
            if not v["overloads"] and not v["reached"]:
                continue
            if v["measured"]:
                pct = f"{100.0 * v['reached'] / v['overloads']:6.2f} %" if v["overloads"] else ""
                lines.append(f"    {status:<10} {v['reached']:>6} / {v['overloads']:<6} {pct}")
            else:
                lines.append(f"    {status:<10} not measured ({v['overloads']} overloads)")
    if cov["outside_census"]:
        names = ", ".join(r["op"] for r in cov["outside_census"][:8])
        more = f", ... ({len(cov['outside_census'])} in all)" if len(cov["outside_census"]) > 8 else ""
        lines.append(f"  reached, not backend-relevant in the census: {names}{more}")
    if cov["measured"] and cov["has_census"]:
        if unreached:
            lines.append(f"  unreached ({len(cov['unreached'])}):")
            lines += [f"    {r['op']}  [{r['status']}]" for r in cov["unreached"]]
        else:
            lines.append(f"  unreached: {len(cov['unreached'])} (list them with --unreached)")
    return lines
