"""The census in the store: one ``census_ops`` row per (build, operator overload).

Taking the census again for a build replaces its rows (the device's answer is
deterministic for one torch and backend build; the newest reading wins).
"""
from __future__ import annotations

from sqlalchemy import delete, insert, select

from torchconform.core.dispatch import Row
from torchconform.db.models import census_ops
from torchconform.errors import UserError

CHUNK = 2000  # rows per insert: under SQLite's variable limit with 7 columns


def _covered_int(value: bool | None) -> int | None:
    return None if value is None else int(bool(value))


def save(store, build: str, census) -> int:
    """Store ``census`` (take.Census) as build ``build``'s (created when new); returns the row count."""
    meta = {"census": {"device": census.device, "backend_key": census.backend_key, "profile": census.profile,
                       "refdev_profile": census.refdev_profile, "operators": len(census.rows),
                       "counts": census.counts(), **census.extra}}
    rows = [{"op": r.op, "status": r.status, "via": r.via,
             "reached": None if r.reached is None else " ".join(r.reached),
             "covered": _covered_int(r.covered), "blocked_by": " ".join(r.blocked_by)} for r in census.rows]
    with store.write() as conn:
        build_id = store.ensure_build(build, append=True, conn=conn, device=census.device,
                                      torch_version=census.torch_version, profile=census.profile, **meta)
        conn.execute(delete(census_ops).where(census_ops.c.build_id == build_id))
        for i in range(0, len(rows), CHUNK):
            chunk = [dict(r, build_id=build_id) for r in rows[i:i + CHUNK]]
            conn.execute(insert(census_ops), chunk)
    return len(rows)


def load(store, build: str, conn=None) -> list[Row] | None:
    """Build ``build``'s census rows (sorted by operator), None when it has none.
    An unknown build is the store's UserError naming `torchconform builds`."""
    build_id = store.build_id(build, conn)
    query = select(census_ops.c.op, census_ops.c.status, census_ops.c.via, census_ops.c.reached,
                   census_ops.c.covered, census_ops.c.blocked_by).where(
        census_ops.c.build_id == build_id).order_by(census_ops.c.op)
    if conn is None:
        with store.read() as c:
            result = c.execute(query).all()
    else:
        result = conn.execute(query).all()
    if not result:
        return None
    return [Row(op, status, via, None if reached is None else reached.split(),
                None if covered is None else bool(covered), blocked.split())
            for op, status, via, reached, covered, blocked in result]


def require(store, build: str) -> list[Row]:
    rows = load(store, build)
    if rows is None:
        raise UserError(f"build {build!r} has no census; take one with `torchconform census --device D "
                        f"--build {build}`")
    return rows
