"""``torchconform builds [--json]``: the builds in the store, oldest first (``--json`` also
names each build's series: device, backend profile, branch, suite set; db/series.py)."""
import json

from torchconform.cli.options import add_db, add_json
from torchconform.db import read_builds
from torchconform.db.opening import open_store


COLUMNS = (("build", "name", "<"), ("created", "created", "<"), ("branch", "branch", "<"),
           ("device", "device", "<"), ("runs", "runs", ">"), ("tests", "tests", ">"),
           ("stored results", "results", ">"), ("state", "state", "<"))
FOOTNOTE = ("tests: tests with a result (what `summary` counts, each test's latest attempt); stored results: "
            "every result row kept, reruns and `ingest --append` included; state census: a census without test runs")


def _run(args) -> int:
    with open_store(args.db, create=False) as store:
        rows = read_builds.list_builds(store, series=True)
        tests = read_builds.test_counts(store)
    for r in rows:
        r["tests"] = tests.get(r["name"], 0)
        r["state"] = "complete" if r["complete"] else "incomplete"
        if not r["runs"] and "census" in r["metadata"]:
            r["state"] = "census"      # a census taken alone (`torchconform census`): no test runs to finish
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no builds stored yet; `torchconform run` or `torchconform ingest` adds one")
        return 0
    # every column as wide as its widest value: build names are long (<device>-<profile>-<time>-<pid>)
    widths = [max(len(title), *(len(str(r[key])) for r in rows)) for title, key, _ in COLUMNS]
    line = lambda values: "  ".join(f"{v:{align}{w}}" for v, (_, _, align), w in zip(values, COLUMNS, widths))
    print(line([title for title, _, _ in COLUMNS]).rstrip())
    for r in rows:
        print(line([str(r[key]) for _, key, _ in COLUMNS]).rstrip())
    print(FOOTNOTE)
    return 0


def register(sub):
    p = sub.add_parser("builds", help="list the stored builds")
    add_json(p)
    add_db(p)
    p.set_defaults(func=_run)
