"""Per-operator performance in the store (``perf_results``, schema 0010_perf_results; its
``variant`` column, eager or compiled, 0014_perf_variant):
writing the perf suite's rows, reading a build's table, its comparison with a baseline and
each operator's history across the build's series.

The rows' meaning and the noise-aware comparison are torchconform/core/perf.py's; every answer
here is plain JSON-ready dicts (the keys of a row there, plus ``ratio``).
"""
from __future__ import annotations

from sqlalchemy import func, select

from torchconform.core import perf
from torchconform.db import read_builds
from torchconform.db.models import builds, perf_results
from torchconform.db.series import series_of

COLUMNS = ("op", "dtype", "direction", "variant", "sample", "calls", *perf.FIGURES)


def _number(value):
    return None if value is None else float(value)


def save_rows(conn, build_id: int, run_id: int, outcomes) -> int:
    """Insert the rows every outcome carries (``Outcome.perf``) in the caller's transaction
    (Store.add_outcomes: stored exactly when the outcome is).  Returns how many."""
    rows = []
    for o in outcomes:
        for r in o.perf or ():
            rows.append({"build_id": int(build_id), "run_id": int(run_id),
                         "op": str(r.get("op") or o.op or "")[:300], "dtype": str(r.get("dtype") or o.dtype or "")[:100],
                         "direction": str(r.get("direction") or perf.FORWARD)[:20],
                         "variant": str(r.get("variant") or perf.EAGER)[:20],
                         "sample": str(r.get("sample") or "")[:300], "calls": int(r.get("calls") or 0),
                         **{k: _number(r.get(k)) for k in perf.FIGURES}})
    if rows:
        conn.execute(perf_results.insert(), rows)
    return len(rows)


def build_rows(store, build: str, op: str | None = None) -> list[dict]:
    """The build's rows, the latest per (op, dtype, direction, variant), ordered by op, dtype,
    direction, variant (eager before compiled);
    ``op``: only that operator (its OpInfo name, e.g. ``add`` or ``div.no_rounding_mode``)."""
    build_id = store.build_id(build)
    latest = (select(func.max(perf_results.c.id)).where(perf_results.c.build_id == build_id)
              .group_by(perf_results.c.op, perf_results.c.dtype, perf_results.c.direction,
                        perf_results.c.variant))
    query = select(*(perf_results.c[c] for c in COLUMNS)).where(perf_results.c.id.in_(latest))
    if op:
        query = query.where(perf_results.c.op == op)
    with store.read() as conn:
        rows = [dict(zip(COLUMNS, r)) for r in conn.execute(query)]
    for r in rows:
        r["ratio"] = perf.ratio(r)
    rows.sort(key=lambda r: (r["op"], r["dtype"], r["direction"], _variant_order(r["variant"])))
    return rows


def _variant_order(variant: str) -> tuple[int, str]:
    return (perf.VARIANTS.index(variant) if variant in perf.VARIANTS else len(perf.VARIANTS)), variant


def has_rows(store, build: str) -> bool:
    build_id = store.build_id(build)
    with store.read() as conn:
        return conn.execute(select(perf_results.c.id).where(perf_results.c.build_id == build_id).limit(1)).first() \
            is not None


def builds_with_rows(store) -> set[str]:
    """Names of the builds that have perf rows."""
    query = select(builds.c.name).where(builds.c.id.in_(select(perf_results.c.build_id).distinct()))
    with store.read() as conn:
        return {name for (name,) in conn.execute(query)}


def compare(store, build: str, baseline: str, threshold: float = perf.DEFAULT_THRESHOLD,
            floor_s: float = perf.DEFAULT_FLOOR_S, op: str | None = None,
            max_spread: float = perf.DEFAULT_MAX_SPREAD) -> list[dict]:
    """core.perf.compare of the baseline's rows and the build's."""
    return perf.compare(build_rows(store, baseline, op), build_rows(store, build, op), threshold, floor_s, max_spread)


def series_builds(store, build: str) -> list[str]:
    """The builds of ``build``'s series (db/series.py) up to and including it, oldest first."""
    ordered = read_builds.list_builds(store, series=True)
    mine = next((b for b in ordered if b["name"] == build), None)
    if mine is None:
        store.build_id(build)   # the one-line error naming `torchconform builds`
        return []
    series = series_of(mine)
    out = []
    for b in ordered:
        if series_of(b) == series:
            out.append(b["name"])
        if b["name"] == build:
            break
    return out


def history(store, build: str, op: str | None = None) -> dict[tuple, list[dict]]:
    """(op, dtype, direction, variant) -> [{"build", "ratio", "dev_min", "cpu_min"}] over the builds of
    ``build``'s series up to it that have perf rows, oldest first."""
    out: dict[tuple, list[dict]] = {}
    names = series_builds(store, build)
    with_rows = builds_with_rows(store)
    for name in names:
        if name not in with_rows:
            continue
        for r in build_rows(store, name, op):
            out.setdefault(perf.key(r), []).append({"build": name, "ratio": r["ratio"], "dev_min": r["dev_min"],
                                                    "cpu_min": r["cpu_min"]})
    return out
