"""Whether communication on one stream overlaps computation on another.

Times an asynchronous all_reduce alone, a computation alone (sized to take about as
long) and both issued together (the collective on a side stream, the computation on
another), and reports the overlap fraction, 0 (one after the other) to 1 (fully
hidden), as the smaller of two readings:
  wall:  (t_comm + t_compute - t_both) / min(t_comm, t_compute), device synchronised;
  host:  0 when the collective had finished by the time its call returned (it blocked
         the caller: nothing could overlap it), else the communication time the host
         did not spend blocked in issuing or waiting for it, over the same minimum.
A device executing on the host and blocking in the collective (refdev young-backend)
reads exactly 0 on the host reading however noisy the wall clock of a loaded machine; an
accelerator whose calls all return at once (host reading near 1) is judged by the
wall clock, which sees whether its streams really ran together.  Separate streams do
not promise concurrency (the seed's trap): a device that does not overlap is a
recorded trait, not a failure.
"""
from __future__ import annotations

import contextlib
import statistics
import time

import torch
import torch.distributed as dist

# Above this the device is said to overlap: timing noise on a loaded host stays under it.
OVERLAP_THRESHOLD = 0.25
ELEMENTS = 4 * 1024 * 1024     # 16 MB of float32
REPEATS = 5


def _sync(ctx):
    mod = ctx.module()
    if mod is not None and hasattr(mod, "synchronize"):
        mod.synchronize()


def _on(ctx, stream):
    mod = ctx.module()
    return mod.stream(stream) if mod is not None and stream is not None else contextlib.nullcontext()


def _timed(ctx, fn) -> float:
    """Median wall time of ``fn`` over REPEATS, every rank starting together."""
    times = []
    for _ in range(REPEATS):
        dist.barrier()
        _sync(ctx)
        start = time.perf_counter()
        fn()
        _sync(ctx)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fraction(t_comm: float, t_compute: float, saved: float) -> float:
    return min(1.0, max(0.0, saved / max(min(t_comm, t_compute), 1e-9)))


def overlap(ctx):
    mod = ctx.module()
    if mod is not None:
        ctx.need("Stream", "stream", "current_stream", "synchronize")
    comm_stream = mod.Stream() if mod is not None else None
    compute_stream = mod.Stream() if mod is not None else None
    buf = torch.ones(ELEMENTS, device=ctx.device)
    a = torch.randn(256, 256, device=ctx.device)

    def comm():
        with _on(ctx, comm_stream):
            return dist.all_reduce(buf, async_op=True)

    def compute(n):
        with _on(ctx, compute_stream):
            x = a
            for _ in range(n):
                x = torch.tanh(x @ a)
            return x

    t_comm = _timed(ctx, lambda: comm().wait())
    t_one = _timed(ctx, lambda: compute(1))
    # every rank runs the same number of matmuls: the slowest rank's choice
    n = torch.tensor([max(1, round(t_comm / max(t_one, 1e-6)))], dtype=torch.int64)
    dist.all_reduce(n, op=dist.ReduceOp.MAX)
    n = int(n.item())
    t_compute = _timed(ctx, lambda: compute(n))

    blocked, finished_on_return = [], []

    def both():
        t0 = time.perf_counter()
        work = comm()
        t1 = time.perf_counter()
        finished_on_return.append(work.is_completed())
        compute(n)
        t2 = time.perf_counter()
        work.wait()
        blocked.append((t1 - t0) + (time.perf_counter() - t2))
    t_both = _timed(ctx, both)
    host_blocked = statistics.median(blocked)
    wall = _fraction(t_comm, t_compute, t_comm + t_compute - t_both)
    synchronous = all(finished_on_return)
    host = 0.0 if synchronous else _fraction(t_comm, t_compute, t_comm - host_blocked)
    fraction = min(wall, host)
    return {"fraction": round(fraction, 3), "overlaps": fraction >= OVERLAP_THRESHOLD,
            "wall_fraction": round(wall, 3), "host_fraction": round(host, 3),
            "comm_s": round(t_comm, 6), "compute_s": round(t_compute, 6), "both_s": round(t_both, 6),
            "host_blocked_s": round(host_blocked, 6), "finished_on_return": synchronous, "bytes": buf.numel() * buf.element_size(),
            "matmuls": n, "threshold": OVERLAP_THRESHOLD}
