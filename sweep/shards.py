"""Deterministic shards, balanced by the durations earlier builds recorded.

Every machine of a sharded sweep computes the same split from the same
inputs: the sorted item list and the durations of *earlier* builds (never the
build being swept, which grows while shards run).  Items are placed longest
first on the shard with the least total time so far (ties: lowest shard
number, items by name).  Items no earlier build has timed get the median of
the known durations, so with no history at all every item weighs the same
and shards are balanced by count.
"""
from __future__ import annotations

import heapq
import statistics

from torchconform.errors import UserError


def check_shard(shards: int, shard: int) -> None:
    if shards < 1:
        raise UserError(f"--shards {shards} must be at least 1; pass --shards N with N >= 1")
    if not 0 <= shard < shards:
        raise UserError(f"--shard {shard} is out of range for --shards {shards}; pass 0..{shards - 1}")


def split(items, shards: int, durations: dict | None = None) -> list[list[str]]:
    """All ``shards`` shards of ``items`` (each sorted by name)."""
    check_shard(shards, 0)
    items = sorted(set(items))
    durations = {k: float(v) for k, v in (durations or {}).items() if v is not None and v >= 0}
    known = [durations[i] for i in items if i in durations]
    default = statistics.median(known) if known else 1.0
    weight = {i: durations.get(i, default) for i in items}
    order = sorted(items, key=lambda i: (-weight[i], i))
    heap = [(0.0, s) for s in range(shards)]
    out: list[list[str]] = [[] for _ in range(shards)]
    for item in order:
        total, s = heapq.heappop(heap)
        out[s].append(item)
        heapq.heappush(heap, (total + weight[item], s))
    return [sorted(x) for x in out]


def select(items, shards: int, shard: int, durations: dict | None = None) -> list[str]:
    """Shard ``shard`` (0-based) of ``shards``."""
    check_shard(shards, shard)
    return split(items, shards, durations)[shard]
