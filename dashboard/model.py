"""What the site knows about the stored builds, read once through the query module.

Every page module works from these plain objects, never from SQL: the store's
``torchconform.db.queries`` is the one read path (shared with the CLI and the
gate); this module only shapes its answers for pages (slugs, baselines, groups).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

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
    def complete(self) -> bool:
        return bool(self.meta.get("complete", True))

    @property
    def has_census(self) -> bool:
        """The build has a stored operator census (census.records puts its summary in the metadata)."""
        return "census" in (self.meta.get("metadata") or {})

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
        if row.get("complete", True):  # an interrupted build is never anyone's baseline
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
