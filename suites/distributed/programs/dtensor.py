"""DTensor (distribute_tensor, redistribute, ops, full_tensor) and tensor parallelism
(parallelize_module with Colwise/Rowwise on an MLP), against the same computation on
plain CPU tensors."""
from __future__ import annotations

import torch

from torchconform.suites.distributed.programs.compare import data, same
from torchconform.suites.distributed.programs.models import MLP, twin


def _mesh(ctx):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(ctx.device_type, (ctx.world_size,))


def _placement(name: str):
    from torch.distributed.tensor import Replicate, Shard

    return Replicate() if name == "replicate" else Shard(int(name[-1]))


def distribute(ctx):
    """distribute_tensor with each placement: the local piece and full_tensor() are right."""
    from torch.distributed.tensor import distribute_tensor

    mesh = _mesh(ctx)
    full = data(ctx, (4 * ctx.world_size, 2 * ctx.world_size), rank=0)
    placement = _placement(ctx.params["placement"])
    dt = distribute_tensor(full.to(ctx.device), mesh, [placement])
    expected = full if ctx.params["placement"] == "replicate" else \
        full.chunk(ctx.world_size, dim=placement.dim)[ctx.rank]
    same(ctx, dt.to_local(), expected, f"local piece of {placement}")
    same(ctx, dt.full_tensor(), full, f"full_tensor() of {placement}")
    return {}


def redistribute(ctx):
    """redistribute from one placement to another (shard_0 -> shard_1 is an all_to_all)."""
    from torch.distributed.tensor import distribute_tensor

    mesh = _mesh(ctx)
    full = data(ctx, (4 * ctx.world_size, 4 * ctx.world_size), rank=0)
    src, dst = (_placement(p) for p in ctx.params["route"].split("->"))
    dt = distribute_tensor(full.to(ctx.device), mesh, [src]).redistribute(mesh, [dst])
    assert dt.placements == (dst,), f"redistribute gave {dt.placements}, asked for {dst}"
    expected = full if ctx.params["route"].endswith("replicate") else full.chunk(ctx.world_size, dim=dst.dim)[ctx.rank]
    same(ctx, dt.to_local(), expected, f"{ctx.params['route']} local piece")
    return {}


def ops(ctx):
    """An op on DTensors sharded on dim 0 (matmul with a replicated weight, add, sum,
    softmax): full_tensor() equals the op on the plain CPU tensors."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = _mesh(ctx)
    a = data(ctx, (4 * ctx.world_size, 8), rank=0)
    b = data(ctx, (8, 8), seed=1, rank=0)
    da = distribute_tensor(a.to(ctx.device), mesh, [Shard(0)])
    db = distribute_tensor(b.to(ctx.device), mesh, [Replicate()])
    op = ctx.params["op"]
    fns = {"matmul": (lambda x, y: x @ y), "add": (lambda x, y: x + x), "sum": (lambda x, y: x.sum(dim=0)),
           "softmax": (lambda x, y: torch.softmax(x, dim=-1))}
    result = fns[op](da, db)
    same(ctx, result.full_tensor(), fns[op](a, b), f"DTensor {op}")
    return {"placements": [str(p) for p in result.placements]}


def tensor_parallel(ctx):
    """parallelize_module(MLP, {w1: Colwise, w2: Rowwise}): forward and backward equal
    the unsharded model's on CPU."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = _mesh(ctx)
    cpu_model, dev_model = twin(MLP, ctx)
    dev_model = parallelize_module(dev_model, mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    x = data(ctx, (8, 16), rank=0)  # tensor parallelism: every rank sees the same batch
    out_cpu, out_dev = cpu_model(x), dev_model(x.to(ctx.device))
    same(ctx, out_dev, out_cpu, "TP forward")
    out_cpu.square().mean().backward()
    out_dev.square().mean().backward()
    grads = {n: p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
             for n, p in dev_model.named_parameters()}
    same(ctx, [grads[n] for n, _ in cpu_model.named_parameters()], [p.grad for _, p in cpu_model.named_parameters()],
         "TP gradients")
    local = dict(dev_model.named_parameters())["w1.weight"].to_local()
    assert local.shape[0] * ctx.world_size == cpu_model.w1.weight.shape[0], "w1 is not sharded column-wise"
    return {}
