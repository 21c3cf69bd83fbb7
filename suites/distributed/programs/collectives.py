"""One program per collective: the c10d call on CPU tensors (gloo) and on device
tensors, results equal on every rank; ``form`` picks the list or tensor form, or the
functional collective DTensor dispatches to."""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from torchconform.suites.distributed.programs.compare import data, same

SHAPE = (4, 6)


def _both(ctx, fn):
    """fn(device) on CPU then on the device; each returns a tensor or list of tensors."""
    return fn("cpu"), fn(ctx.device)


def all_reduce(ctx):
    def run(dev):
        x = data(ctx, SHAPE).to(dev)
        if ctx.params["form"] == "functional":
            return funcol.wait_tensor(funcol.all_reduce(x, "sum", dist.group.WORLD))
        dist.all_reduce(x)
        return x
    cpu, device = _both(ctx, run)
    same(ctx, device, cpu, "all_reduce")
    return {"elements": cpu.numel()}


def broadcast(ctx):
    def run(dev):
        x = data(ctx, SHAPE).to(dev)
        if ctx.params["form"] == "functional":
            return funcol.wait_tensor(funcol.broadcast(x, 0, dist.group.WORLD))
        dist.broadcast(x, src=0)
        return x
    cpu, device = _both(ctx, run)
    same(ctx, device, cpu, "broadcast")
    assert torch.equal(cpu, data(ctx, SHAPE, rank=0)), "broadcast: rank 0's tensor did not arrive"
    return {}


def all_gather(ctx):
    def run(dev):
        x = data(ctx, SHAPE).to(dev)
        form = ctx.params["form"]
        if form == "list":
            out = [torch.empty_like(x) for _ in range(ctx.world_size)]
            dist.all_gather(out, x)
            return out
        if form == "functional":
            return funcol.wait_tensor(funcol.all_gather_tensor(x, 0, dist.group.WORLD))
        out = x.new_empty((ctx.world_size * SHAPE[0], SHAPE[1]))
        dist.all_gather_into_tensor(out, x)
        return out
    cpu, device = _both(ctx, run)
    same(ctx, device, cpu, "all_gather")
    return {}


def reduce_scatter(ctx):
    shape = (ctx.world_size * SHAPE[0], SHAPE[1])

    def run(dev):
        x = data(ctx, shape).to(dev)
        form = ctx.params["form"]
        if form == "list":
            out = x.new_empty(SHAPE)
            dist.reduce_scatter(out, list(x.chunk(ctx.world_size)))
            return out
        if form == "functional":
            return funcol.wait_tensor(funcol.reduce_scatter_tensor(x, "sum", 0, dist.group.WORLD))
        out = x.new_empty(SHAPE)
        dist.reduce_scatter_tensor(out, x)
        return out
    cpu, device = _both(ctx, run)
    same(ctx, device, cpu, "reduce_scatter")
    return {}


def all_to_all(ctx):
    shape = (ctx.world_size * SHAPE[0], SHAPE[1])

    def run(dev):
        x = data(ctx, shape).to(dev)
        form = ctx.params["form"]
        if form == "list":
            out = [t.new_empty(t.shape) for t in x.chunk(ctx.world_size)]
            dist.all_to_all(out, [t.contiguous() for t in x.chunk(ctx.world_size)])
            return out
        if form == "functional":
            return funcol.wait_tensor(funcol.all_to_all_single(x, None, None, dist.group.WORLD))
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x)
        return out
    cpu, device = _both(ctx, run)
    same(ctx, device, cpu, "all_to_all")
    return {}


def barrier(ctx):
    # a barrier on the device's backend: every rank gets past it, then a device collective
    # after it still agrees (the barrier left the group usable)
    dist.barrier(device_ids=None)
    x = torch.ones(1, device=ctx.device)
    dist.all_reduce(x)
    assert x.item() == ctx.world_size, f"all_reduce after barrier gave {x.item()}, expected {ctx.world_size}"
    return {}


def send_recv(ctx):
    """A ring: every rank sends its tensor to the next and receives the previous one's."""
    def run(dev):
        x = data(ctx, SHAPE).to(dev)
        got = torch.empty_like(x)
        nxt, prev = (ctx.rank + 1) % ctx.world_size, (ctx.rank - 1) % ctx.world_size
        ops = [dist.P2POp(dist.isend, x, nxt), dist.P2POp(dist.irecv, got, prev)] if ctx.rank % 2 == 0 else \
            [dist.P2POp(dist.irecv, got, prev), dist.P2POp(dist.isend, x, nxt)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        return got
    cpu, device = _both(ctx, run)
    same(ctx, device, cpu, "send/recv")
    return {}
