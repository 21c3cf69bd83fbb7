"""Failure clusters page per build: its failures grouped by message signature or user category.

Workers find each build's clusters (failures.py) while they render it; the
parent renders every build's page afterwards, oldest build first, because a
cluster's first build seen and whether it is new since the baseline depend on
the earlier builds.  A build kept from the last run gives its clusters back
from its own download (``builds/<slug>/clusters.json``), so no page needs the
store again.
"""
from __future__ import annotations

from collections import Counter

from torchconform.core.clusters import Cluster, Failure, order
from torchconform.core.outcome import CRASH, ERROR, FAIL, TIMEOUT
from torchconform.dashboard.tables import Table

OUTCOME_COLUMNS = (FAIL, ERROR, CRASH, TIMEOUT)
COLUMNS = ["cluster", "signature", "category", "tests", *OUTCOME_COLUMNS, "new since baseline", "first build seen",
           "operators", "dtypes", "example test", "example outcome", "example message", "example repro"]
SHOWN_NAMES = 12   # operators / dtypes named per cluster on the page (the downloads have all)


def ranked_names(counts: Counter) -> list[str]:
    """Names by the tests they have in a cluster, most first (the order the page and download show)."""
    return sorted(counts, key=lambda k: (-counts[k], k))


def table_of(stem: str, clusters: list[Cluster], ranks: dict[str, int]) -> Table:
    """The page's clusters as a download; ``ranks``: each cluster's index in the build's failure data."""
    t = Table(stem, COLUMNS, title="Failure clusters")
    for c in clusters:
        e = c.example
        t.rows.append([ranks[c.key], c.signature, c.category, c.tests, *(c.outcomes[o] for o in OUTCOME_COLUMNS),
                       c.new, c.first_build, ranked_names(c.ops), sorted(c.dtypes), e.test_id, e.outcome, e.message, e.repro])
    return t


def known_from_download(records: list[dict]) -> set[str]:
    """The keys a kept build's baseline had, as far as ``order`` needs them: those of its
    clusters not marked new (for a build whose baseline is past ``--full-builds``)."""
    return {c.key for c, r in zip(read_download(records), sorted(records, key=lambda r: r["cluster"]))
            if not r["new since baseline"]}


def read_download(records: list[dict]) -> list[Cluster]:
    """A kept build's clusters from its clusters.json, in the failure data's order."""
    out = []
    for r in sorted(records, key=lambda r: r["cluster"]):
        example = Failure(r["example test"], r["example outcome"], r["example message"], r["example repro"])
        out.append(Cluster(r["signature"], r["category"], r["tests"], _ranked_counter(r["operators"]),
                           Counter(dict.fromkeys(r["dtypes"], 1)),
                           Counter({o: r[o] for o in OUTCOME_COLUMNS if r[o]}), example))
    return out


def _with_keys(keys: set[str]) -> list[Cluster]:
    """Clusters with these keys and nothing else: all ``order`` reads of a baseline."""
    out = []
    for key in sorted(keys):
        kind, name = key.split(":", 1)
        out.append(Cluster(name, name if kind == "category" else ""))
    return out


def _ranked_counter(names: list[str]) -> Counter:
    """A Counter that ``ranked_names`` gives back in ``names``' order."""
    return Counter({name: len(names) - i for i, name in enumerate(names)})


def render_all(site, builds: list, found: dict[str, list[Cluster]], slugs: dict[str, str], generated: str,
               known: dict[str, set] | None = None) -> None:
    """Every build's clusters page; ``found``: build name -> its clusters in failure-data order;
    ``known``: build name -> its baseline's cluster keys, for a build whose baseline has no
    clusters in ``found`` (past ``--full-builds``).  A cluster's first build seen is the first
    of ``builds`` (oldest first) that has it."""
    first: dict[str, str] = {}
    known = known or {}
    for b in builds:                        # oldest first
        clusters = found.get(b.name, [])
        for c in clusters:
            first.setdefault(c.key, b.name)
            c.first_build = first[c.key]
        ranks = {c.key: i for i, c in enumerate(clusters)}
        if b.name in known:
            baseline = _with_keys(known[b.name])
        else:
            baseline = found.get(b.baseline.name, []) if b.baseline is not None else None
        shown = order(list(clusters), baseline)
        base = f"builds/{b.slug}/"
        table = table_of(base + "clusters", shown, ranks)
        rows = [{"c": c, "rank": ranks[c.key], "ops": ranked_names(c.ops),
                 "dtypes": sorted(c.dtypes), "first_slug": slugs.get(c.first_build, "")} for c in shown]
        site.page(base + "clusters.html", "clusters.html", title=f"Failure clusters · {b.name}", build=b,
                  rows=rows, n_new=sum(c.new for c in shown), n_tests=sum(c.tests for c in shown),
                  outcomes=OUTCOME_COLUMNS, shown_names=SHOWN_NAMES, table=table, downloads=[table],
                  generated=generated)
