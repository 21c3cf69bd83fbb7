"""What the site knows about the stored builds, read once through the query module.

Every page module works from these plain objects, never from SQL: the store's
``torchconform.db.queries`` is the one read path (shared with the CLI and the
gate); this module only shapes its answers for pages (slugs, baselines, groups).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter

from torchconform.dashboard.render import slugify
from torchconform.dashboard.styles import pass_rate


@dataclass
class BuildInfo:
    name: str
    slug: str
    created: str
    branch: str = ""
    device: str = ""
    meta: dict = field(default_factory=dict)     # every other column of list_builds, for the build page
    summary: dict = field(default_factory=dict)  # collectors.breakdown shape
    baseline: "BuildInfo | None" = None          # previous build of the same branch and device

    @property
    def pass_rate(self):
        return pass_rate(self.summary)

    @property
    def group(self) -> tuple[str, str]:
        return (self.branch, self.device)


@dataclass
class Group:
    branch: str
    device: str
    builds: list[BuildInfo]   # oldest first

    @property
    def latest(self) -> BuildInfo:
        return self.builds[-1]


def _created_text(value) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value or "")


def load_builds(store, queries) -> list[BuildInfo]:
    """Every build (oldest first) with its baseline; summaries are filled in by the caller."""
    rows = list(queries.list_builds(store))
    # list_builds is oldest first already (ties broken by insertion); the stable
    # sort only guards against a query module that returns another order.
    rows.sort(key=lambda r: _created_text(r.get("created")))
    taken: set[str] = set()
    out: list[BuildInfo] = []
    previous: dict[tuple, BuildInfo] = {}
    for row in rows:
        info = BuildInfo(
            name=row["name"],
            slug=slugify(row["name"], taken),
            created=_created_text(row.get("created")),
            branch=str(row.get("branch") or ""),
            device=str(row.get("device") or ""),
            meta={k: v for k, v in row.items() if k not in ("name", "id")},
        )
        info.baseline = previous.get(info.group)
        previous[info.group] = info
        out.append(info)
    return out


def groups_of(builds: list[BuildInfo]) -> list[Group]:
    """Builds per (branch, device), the group with the newest build first."""
    by: dict[tuple, list[BuildInfo]] = {}
    for b in builds:
        by.setdefault(b.group, []).append(b)
    groups = [Group(branch, device, members) for (branch, device), members in by.items()]
    groups.sort(key=lambda g: g.latest.created, reverse=True)
    return groups


# What the site reads of each build, in one pass (queries.latest_rows).
ROW_COLUMNS = ("test_id", "suite", "file", "op", "variant", "dtype", "outcome", "kind", "missing_op",
               "fallback_ops", "message", "name")
_MODELS_SUITE = "models"
# Projections of a row (ROW_COLUMNS order) that each aggregate counts.
_BY = {"suite": itemgetter(1, 6, 7, 8), "file": itemgetter(2, 6, 7, 8)}   # key, outcome, kind, missing_op
_CELL = itemgetter(1, 3, 4, 5, 6, 7)                                        # suite, op, variant, dtype, outcome, kind
_BLOCKED = itemgetter(8, 1, 3)                                              # missing_op, suite, op
_TEST_ID = itemgetter(0)
_MAP_VALUE = itemgetter(6, 7, 8, 9, 10, 3)   # outcome, kind, missing_op, fallback_ops, message, op


@dataclass
class BuildRows:
    """One build's latest rows, read once, and every page's numbers derived from
    them with the query module's own shaping functions (so the site and the CLI
    cannot disagree).  ``rows`` are Outcome-like (``row.test_id``, ``row.outcome``...).
    Each aggregate first counts a projection of the rows (Counter runs in C), then
    shapes the far fewer groups."""
    name: str
    rows: list

    def summary_by(self, queries, by: str) -> dict:
        counts = Counter(map(_BY[by], self.rows))
        return queries.breakdowns_by(self.name, ((*k, n) for k, n in counts.items()))

    def op_matrix(self, queries) -> list[dict]:
        """OpInfo cells; the model zoo's rows (tests.op is a model name there) have their own page."""
        counts = Counter(map(_CELL, self.rows))
        return queries.matrix_cells((*k[1:], n) for k, n in counts.items() if k[0] != _MODELS_SUITE)

    def matrix_cells(self) -> list[dict]:
        """``op_matrix``'s cells with their numbers as one list (pages/matrix.py), without
        the per-outcome dicts: the same counts, shaped for the matrix page only."""
        from torchconform.dashboard.pages.matrix import cells_from_counts

        return cells_from_counts(Counter(map(_CELL, self.rows)), _MODELS_SUITE)

    def leaderboard(self, queries, first: dict) -> list[dict]:
        counts = Counter(_BLOCKED(r) for r in self.rows if r[7] == "missing_op" and r[6] == "skip_backend" and r[8])
        return queries.leaderboard(self.name, ((*k, n) for k, n in counts.items()), first)

    def latest_map(self) -> dict:
        """{test_id: (outcome, kind, missing_op, fallback_ops, message, op)} for queries.diff_maps."""
        return dict(zip(map(_TEST_ID, self.rows), map(_MAP_VALUE, self.rows)))


def diff_from_maps(queries, old_name: str, old: dict, new_name: str, new: dict) -> dict:
    """queries.diff's answer from two builds' latest maps already in memory."""
    def names(keys):
        return {k: (k, (new.get(k) or old[k])[5]) for k in keys}
    return queries.diff_maps(old_name, new_name, old, new, names)
