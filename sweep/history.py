"""What the store already knows that a sweep needs: done tests, earlier durations.

The reads themselves live in ``torchconform.db.queries`` (the one read
module); this adds the sweep's view of them: durations per model.
"""
from __future__ import annotations

from collections import defaultdict

from torchconform.db.queries import earlier_durations, stored_test_ids

__all__ = ["earlier_durations", "stored_test_ids", "per_model"]


def per_model(durations: dict[str, float]) -> dict[str, float]:
    """Sum run durations (``models::<model_id>::<variant>``) per model id."""
    out: dict[str, float] = defaultdict(float)
    for tid, seconds in durations.items():
        parts = tid.split("::")
        if len(parts) >= 3:
            out["::".join(parts[1:-1])] += seconds
    return dict(out)
