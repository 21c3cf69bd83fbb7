"""``torchconform skiplist lint|propose``: check skiplist files; derive entries from a build."""
from __future__ import annotations

import datetime as _dt
import glob
import os
import sys

from torchconform.cli.options import add_build, add_db
from torchconform.errors import UserError


def register(subparsers):
    p = subparsers.add_parser("skiplist", help="lint skiplist files, propose entries from a build")
    sub = p.add_subparsers(dest="skiplist_command", metavar="ACTION")
    sub.required = True

    lint = sub.add_parser("lint", help="check skiplist files (schema, regexes, duplicates, overlaps, expiry, stale entries) "
                                           "and backend profiles (keys and types, docs/profiles.md)",
                          description="Check skiplist YAML files. With --collect 'ARGS', also collect the tests that "
                                      "`pytest ARGS` would run and report entries that match none.")
    lint.add_argument("paths", nargs="+", metavar="PATH", help="skiplist YAML file, backend profile (profile.yaml) or a backend folder (skiplists/refdev)")
    lint.add_argument("--collect", metavar="'PYTEST ARGS'",
                      help="collect the tests these pytest arguments select (one quoted string, e.g. "
                           "'suites/ops --tc-device refdev') and report entries matching none of them")
    lint.add_argument("--today", metavar="YYYY-MM-DD", help="date used for expiry checks (default: today)")
    lint.add_argument("--strict", action="store_true", help="warnings fail too")
    lint.set_defaults(func=run_lint)

    prop = sub.add_parser("propose", help="candidate entries from a build's failures; --prune proposes removals")
    add_build(prop, metavar="NAME", help="stored build to read")
    add_db(prop)
    prop.add_argument("--skiplist", action="append", default=[], metavar="PATH",
                      help="existing skiplist files (default: skiplists/<backend>/*.yaml of the build's device)")
    prop.add_argument("--write", metavar="PATH", help="append the candidates to this file (and apply --prune removals)")
    prop.add_argument("--prune", action="store_true", help="propose removing entries whose tests all pass in the build")
    prop.add_argument("--issue", metavar="URL", help="tracking issue URL to put in the candidates")
    prop.add_argument("--baseline", metavar="NAME",
                      help="only failures that are new since this stored build (it passed or did not exist there)")
    prop.set_defaults(func=run_propose)

    # loaded when the command runs: every cmd_* module is imported at start-up to register its parser (cli/main.py)
    from torchconform.cli.skiplist_spec import register as register_spec

    register_spec(sub)   # import / export of torch-neuronx specs


def _expand(paths) -> list[str]:
    out: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            # the backend's profile.yaml too: lint checks it against the profile format
            found = sorted(glob.glob(os.path.join(path, "*.y*ml")))
            if not found:
                raise UserError(f"{path} holds no skiplist YAML files; name the files or the right folder")
            out.extend(found)
        elif not os.path.exists(path):
            raise UserError(f"{path}: no such file; check the path")
        else:
            out.append(path)
    return out


def _date(value: str | None):
    if not value:
        return None
    try:
        return _dt.date.fromisoformat(value)
    except ValueError:
        raise UserError(f"--today {value!r} is not a date; write YYYY-MM-DD") from None


def run_lint(args) -> int:
    # (loaded when the command runs)
    from torchconform.skiplists.lint import lint
    from torchconform.skiplists.schema import parse_skiplist

    paths = _expand(args.paths)
    today = _date(args.today)
    for path in paths:
        # A file that is not YAML at all is an input error, not a finding: stop
        # before collecting anything.
        unreadable = [p for p in parse_skiplist(path)[1] if p.code == "yaml"]
        if unreadable:
            raise UserError(f"{unreadable[0].path}:{unreadable[0].line}: {unreadable[0].message}")
    collected = None
    if args.collect is not None:
        import shlex

        # (loaded when the command runs)
        from torchconform.skiplists.collect import collect

        try:
            extra = shlex.split(args.collect)
        except ValueError as exc:
            raise UserError(f"--collect {args.collect!r}: {exc}; quote the pytest arguments as one string") from None
        if not extra:
            raise UserError("--collect needs pytest arguments, e.g. --collect 'suites/ops --tc-device refdev'")

        collected = collect(extra)
        print(f"collected {len(collected)} tests", file=sys.stderr)
    problems = lint(paths, collected=collected, today=today)
    for p in problems:
        print(p)
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    print(f"{len(paths)} file(s): {errors} error(s), {warnings} warning(s)", file=sys.stderr)
    return 1 if errors or (args.strict and warnings) else 0


def default_skiplists(backend: str) -> list[str]:
    # (loaded when the command runs)
    import torchconform.skiplists as pkg

    folder = os.path.join(os.path.dirname(pkg.__file__), backend)
    return sorted(p for p in glob.glob(os.path.join(folder, "*.yaml")) if os.path.basename(p) != "profile.yaml")


def run_propose(args) -> int:
    # (loaded when the command runs)
    from torchconform.db import read_rows
    from torchconform.db.opening import open_store
    from torchconform.skiplists import propose as pr
    from torchconform.skiplists.schema import load_entries

    if args.issue and not args.issue.startswith(("http://", "https://")):
        raise UserError(f"--issue {args.issue!r} is not a URL; pass the tracking issue's http(s) URL")
    if args.write and not args.issue:
        raise UserError("--write needs --issue URL: written entries must name a real tracking issue")
    store = open_store(args.db, create=False)
    try:
        store.build_row(args.build)
        outcomes = list(read_rows.iter_outcomes(store, args.build))
        old_failures = None
        if args.baseline:
            store.build_row(args.baseline)
            old_failures = {o.test_id for o in read_rows.iter_outcomes(store, args.baseline) if o.outcome in pr.FAILING}
    finally:
        store.close()
    backend = next((pr._device_base(o.device) for o in outcomes if o.device), "") or "unknown"
    paths = _expand(args.skiplist) if args.skiplist else default_skiplists(backend)
    if args.write and os.path.exists(args.write) and os.path.abspath(args.write) not in map(os.path.abspath, paths):
        paths.append(args.write)
    if args.write and any(p.endswith(".json") for p in paths):
        raise UserError("--write edits skiplist YAML, not a torch-neuronx spec; `skiplist import` it first "
                        "and propose against the YAML (docs/neuron.md)")
    existing = load_entries(paths, backend)   # a torch-neuronx spec names its tests for the build's device
    new_failures = outcomes if old_failures is None else [o for o in outcomes if o.test_id not in old_failures]
    candidates = pr.propose_entries(new_failures, existing, args.build, issue=args.issue)
    removals = pr.propose_removals(outcomes, existing) if args.prune else []
    print(pr.render_report(args.build, candidates, removals, backend, pr.covered(new_failures, existing)), end="")
    if args.write:
        if removals:
            pr.remove_entries(removals)
        if candidates:
            pr.append_entries(args.write, candidates, backend)
        print(f"wrote {len(candidates)} entries to {args.write}, removed {len(removals)}", file=sys.stderr)
    return 0
