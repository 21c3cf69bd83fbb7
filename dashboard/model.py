"""What the site knows about the stored builds, read once through the query module.

Every page module works from these plain objects, never from SQL: the store's
readers (``torchconform.db.read_*``) are the one read path (shared with the CLI and the
gate); this module only shapes their answers for pages (slugs, baselines, groups).
Which builds belong together (a series) and each build's baseline come from
``torchconform.db.series``, the rule the gate's ``--baseline latest`` uses too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from torchconform.dashboard.render import slugify
from torchconform.db.series import Series, baselines, series_of
from torchconform.dashboard.styles import pass_rate


@dataclass
class BuildInfo:
    name: str
    slug: str
    created: str
    branch: str = ""
    device: str = ""
    meta: dict = field(default_factory=dict)     # every other column of list_builds, for the build page
    summary: dict = field(default_factory=dict)  # core.breakdown shape
    baseline: "BuildInfo | None" = None          # previous complete build of the same series
    series: Series = Series("", "", "", "")      # device, backend profile, branch, suite set
    # every page (True), or past ``--full-builds``: the small build page only (retention.py)
    full: bool = True

    @property
    def pass_rate(self):
        return pass_rate(self.summary)

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete", True))

    @property
    def has_census(self) -> bool:
        """The build has a stored operator census (census.records puts its summary in the metadata)."""
        return "census" in (self.meta.get("metadata") or {})

    @property
    def group(self) -> Series:
        """What the build's trend, diff and home card belong to: its series."""
        return self.series


@dataclass
class Group:
    series: Series
    builds: list[BuildInfo]   # oldest first

    @property
    def latest(self) -> BuildInfo:
        return self.builds[-1]

    @property
    def branch(self) -> str:
        return self.series.branch

    @property
    def device(self) -> str:
        return self.series.device


def _created_text(value) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value or "")


def load_builds(store, queries, rows: list[dict] | None = None) -> list[BuildInfo]:
    """Every build (oldest first) with its series and baseline; summaries are filled in by the caller.
    ``rows``: ``queries.list_builds(store, series=True)`` when the caller has read it already."""
    rows = list(queries.list_builds(store, series=True) if rows is None else rows)
    # list_builds is oldest first already (ties broken by insertion); the stable
    # sort only guards against a query module that returns another order.
    rows.sort(key=lambda r: _created_text(r.get("created")))
    base_of = baselines(rows)
    taken: set[str] = set()
    out: list[BuildInfo] = []
    by_name: dict[str, BuildInfo] = {}
    for row in rows:
        info = BuildInfo(
            name=row["name"],
            slug=slugify(row["name"], taken),
            created=_created_text(row.get("created")),
            branch=str(row.get("branch") or ""),
            device=str(row.get("device") or ""),
            meta={k: v for k, v in row.items() if k not in ("name", "id")},
            series=series_of(row),
        )
        base = base_of.get(info.name)
        info.baseline = by_name.get(base) if base else None
        by_name[info.name] = info
        out.append(info)
    return out


def groups_of(builds: list[BuildInfo]) -> list[Group]:
    """Builds per series, the series with the newest build first (``builds`` oldest first,
    so a later position is a newer build, also where two share a creation second)."""
    by: dict[Series, list[BuildInfo]] = {}
    for b in builds:
        by.setdefault(b.series, []).append(b)
    position = {id(b): i for i, b in enumerate(builds)}
    groups = [Group(series, members) for series, members in by.items()]
    groups.sort(key=lambda g: position[id(g.latest)], reverse=True)
    return groups
