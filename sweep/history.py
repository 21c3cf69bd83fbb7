"""What the store already knows that a sweep needs: done tests, earlier durations.

The reads themselves live in the db readers (``torchconform.db.read_*``, the one read
path); this adds the sweep's view of them: durations per model.
"""
from __future__ import annotations

from collections import defaultdict

from torchconform.core.outcome import ERROR, INTERRUPTED_MESSAGE
from torchconform.db.read_builds import earlier_durations, stored_test_ids
from torchconform.db.read_rows import latest_rows

__all__ = ["earlier_durations", "stored_test_ids", "done_test_ids", "per_model"]



def per_model(durations: dict[str, float]) -> dict[str, float]:
    """Sum run durations (``models::<model_id>::<variant>``) per model id."""
    out: dict[str, float] = defaultdict(float)
    for tid, seconds in durations.items():
        parts = tid.split("::")
        if len(parts) >= 3:
            out["::".join(parts[1:-1])] += seconds
    return dict(out)


def done_test_ids(store, build: str, suite: str) -> set[str]:
    """What a resume skips: ``stored_test_ids`` less the tests whose latest result is the
    placeholder of an interrupted run (they run again and their result supersedes it)."""
    done = stored_test_ids(store, build, suite)
    if done:
        done -= {tid for tid, s, outcome, message in latest_rows(
                     store, build, columns=("test_id", "suite", "outcome", "message"), plain=True)
                 if s == suite and outcome == ERROR and message == INTERRUPTED_MESSAGE}
    return done
