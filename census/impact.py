"""A build's census joined with its model sets and test results: what each operator blocks.

The readers of the store for census.plan (pure) and for the leaderboard / site:
``load_impact`` reads one build (``census_impact``: without its test counts;
``leaderboard``: the missing-operator leaderboard with the census's per-model counts);
``op_models`` turns the per-model blocking sets into per-operator rows (models blocked,
composites reaching it); ``history`` says per operator in which build it was first seen
missing and since which build it works.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from torchconform.core.dispatch import Row
from torchconform.census import models, records
from torchconform.census.models import DIRECT, ModelBlock
from torchconform.db.read_builds import latest_build
from torchconform.db.read_ops import missing_op_leaderboard


@dataclass
class Impact:
    build: str
    rows: list[Row]                       # the census
    blocks: dict[str, ModelBlock]         # every model of the build (traced or not)
    tests: dict[str, int] = field(default_factory=dict)   # missing op -> tests blocked (not models suite)

    def sets(self) -> dict[str, set[str]]:
        """model -> blocking operators, traced models only."""
        return {m: set(b.ops) for m, b in self.blocks.items() if b.traced}

    @property
    def untraced(self) -> list[str]:
        return sorted(m for m, b in self.blocks.items() if not b.traced)

    @property
    def traced(self) -> bool:
        return any(b.traced for b in self.blocks.values())


def load_impact(store, build: str, tests: dict[str, int] | None = None, rows: list[Row] | None = None,
                required: bool = True) -> Impact | None:
    """Build ``build``'s impact.  ``tests``: tests blocked per operator when the caller has counted
    them (the site), else read; ``rows``: its census when already read.  No census: a UserError
    naming `torchconform census` when ``required``, else None."""
    if rows is None:
        rows = records.require(store, build) if required else records.load(store, build)
        if rows is None:
            return None
    blocks = models.blocking_for_build(store, build, rows)
    if tests is None:
        tests = {e["op"]: e["tests"] for e in missing_op_leaderboard(store, build)}
    return Impact(build, rows, blocks, dict(tests))


def census_impact(store, build: str) -> Impact | None:
    """The build's Impact without its test counts (the caller has them), None without a census."""
    if "census" not in (store.build_row(build)["metadata"] or {}):
        return None   # no census: not worth the model query
    return load_impact(store, build, tests={}, required=False)


def census_models(store, build: str) -> dict | None:
    """``op_models`` of the build, None without a census or a traced model: the
    leaderboard's full per-model counts."""
    found = census_impact(store, build)
    return op_models(found.blocks) if found is not None and found.traced else None


def leaderboard(store, build: str | None = None) -> list[dict]:
    """db/read_ops.py's ``missing_op_leaderboard`` of ``build`` (default: the latest build)
    with the census's full per-model counts when the build has a census and traced models."""
    build = build or latest_build(store)
    if build is None:
        return []
    return missing_op_leaderboard(store, build, census_models(store, build))


def op_models(blocks: dict[str, ModelBlock]) -> dict[str, dict]:
    """op -> {"models": traced models it blocks, "through": composites reaching it, or [] when some
    model reaches it directly}: the leaderboard's full per-model counts."""
    out: dict[str, dict] = {}
    for model, b in blocks.items():
        if not b.traced:
            continue
        for op, how in b.ops.items():
            entry = out.setdefault(op, {"models": set(), "through": set(), "direct": False})
            entry["models"].add(model)
            if how == DIRECT:
                entry["direct"] = True
            else:
                entry["through"].add(how)
    return {op: {"models": sorted(e["models"]), "through": [] if e["direct"] else sorted(e["through"])}
            for op, e in out.items()}


def history(censuses: list[tuple[str, list[Row]]]) -> dict[str, dict[str, tuple[str, str]]]:
    """For builds in time order with their censuses: build -> op -> (first build up to it where the
    op did not run, the build since which it runs after having not run; '' when none)."""
    first_missing: dict[str, str] = {}
    since: dict[str, str] = {}
    out = {}
    for build, rows in censuses:
        for r in rows:
            if not r.works:
                first_missing.setdefault(r.op, build)
                since.pop(r.op, None)
            elif r.op in first_missing and r.op not in since:
                since[r.op] = build
        out[build] = {op: (first, since.get(op, "")) for op, first in first_missing.items()}
    return out
