"""What the store already knows that a sweep needs: done tests, earlier durations.

Two small reads over the store's tables.  They belong with the other read
queries in ``torchconform.db.queries``; they live here until that module
offers them (see the zoo/sweep note in docs/architecture.md).
"""
from __future__ import annotations

from collections import defaultdict

from sqlalchemy import func, select

from torchconform.db.models import builds, results, tests


def stored_test_ids(store, build: str, suite: str) -> set[str]:
    """Test ids of ``suite`` that build ``build`` already has a result for."""
    query = (select(tests.c.test_id).distinct()
             .join(results, results.c.test_pk == tests.c.id)
             .join(builds, builds.c.id == results.c.build_id)
             .where(builds.c.name == build, tests.c.suite == suite))
    with store.read() as conn:
        return {row[0] for row in conn.execute(query)}


def earlier_durations(store, suite: str, exclude_build: str, builds_back: int = 3) -> dict[str, float]:
    """Mean duration per test id of ``suite`` over the latest ``builds_back`` other builds."""
    with store.read() as conn:
        recent = [row[0] for row in conn.execute(
            select(builds.c.id).where(builds.c.name != exclude_build)
            .order_by(builds.c.created.desc(), builds.c.id.desc()).limit(builds_back))]
        if not recent:
            return {}
        query = (select(tests.c.test_id, func.avg(results.c.duration))
                 .join(results, results.c.test_pk == tests.c.id)
                 .where(results.c.build_id.in_(recent), tests.c.suite == suite)
                 .group_by(tests.c.test_id))
        return {tid: float(avg or 0.0) for tid, avg in conn.execute(query)}


def per_model(durations: dict[str, float]) -> dict[str, float]:
    """Sum run durations (``models::<model_id>::<variant>``) per model id."""
    out: dict[str, float] = defaultdict(float)
    for tid, seconds in durations.items():
        parts = tid.split("::")
        if len(parts) >= 3:
            out["::".join(parts[1:-1])] += seconds
    return dict(out)
