"""Which builds keep every page: ``torchconform site --full-builds N`` (default 30).

A build's per-test pages and data (operator matrix, diff, failure messages, search data,
evaluation, clusters, census, its own leaderboard page) are ~1.5 MB; a year of nightly
builds would be half a gigabyte of pages nobody opens.  So only the ``N`` most recent
builds of the store keep them, and the latest build of every series too (its home card
links its matrix and diff; without that rule a series that stopped a while ago would lose
the pages of its only current build).  An older build keeps what stays small: its row in
the home page's table and its point in its series' trend, its breakdown (a small build page
with its per-suite, per-file and top missing operator tables and a note saying its detail
pages were retired, and how to get them back), and its place in the leaderboard's history
(first build seen: from the store, whatever is rendered).

Pages of younger builds link a few of an older build's pages: a build's evaluation page
its baseline's, a failure cluster its first build's clusters page, a census chart every
earlier census of its series.  A retired build gets a small stub at those paths (``STUBS``)
saying what happened, so a page kept from an earlier run never links a file that is gone
and never has to be rendered again because another build retired.
"""
from __future__ import annotations

from torchconform.dashboard.model import BuildInfo, groups_of
from torchconform.errors import UserError

DEFAULT = 30
# (file, what it was): the pages other builds' pages may link, stubbed for a retired build
STUBS = (("evaluation.html", "evaluation"), ("clusters.html", "failure clusters"))
CENSUS_STUB = ("census.html", "operator census")


def checked(value) -> int:
    """``--full-builds`` as a positive integer, else a UserError naming the fix."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.isascii() or not text.isdigit() or int(text) < 1:
        raise UserError(f"--full-builds {text or repr(text)} is not a positive whole number of builds; "
                        f"pass e.g. --full-builds {DEFAULT} (how many of the most recent builds keep every page)")
    return int(text)


def choose(builds: list[BuildInfo], n: int) -> None:
    """Mark every build ``full`` or not: the ``n`` most recent (``builds`` oldest first) and the
    latest of each series are."""
    keep = {id(b) for b in builds[-n:]} | {id(g.latest) for g in groups_of(builds)}
    for b in builds:
        b.full = id(b) in keep


def retired_count(builds: list[BuildInfo]) -> int:
    return sum(not b.full for b in builds)


def mode(b: BuildInfo, n: int) -> str:
    """What a build's pages were made as (the reuse manifest keeps it: a build that retires,
    or whose note would name another N, is rendered again)."""
    return "full" if b.full else f"retired:{n}"


def stubs_of(b: BuildInfo) -> tuple:
    return STUBS + ((CENSUS_STUB,) if b.has_census else ())


def render_stubs(site, b: BuildInfo, n: int, generated: str) -> None:
    base = f"builds/{b.slug}/"
    for name, what in stubs_of(b):
        site.page(base + name, "retired.html", title=f"{what.capitalize()} · {b.name}", build=b, what=what,
                  full_builds=n, generated=generated)
