"""DDP and FSDP2 (``fully_shard``): a few training steps on CPU (gloo) and on the device
from the same initial weights and data; gradients and parameters must agree."""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from torchconform.suites.distributed.programs.compare import data, same
from torchconform.suites.distributed.programs.models import MLP, Transformer, twin

STEPS = 3


def _ddp(ctx, model):
    if ctx.device_type == "cpu" or next(model.parameters()).device.type == "cpu":
        return DDP(model)
    return DDP(model, device_ids=[torch.device(ctx.device).index])


def ddp(ctx):
    """Steps of SGD through DDP; with ``no_sync``: the first of two micro-batches per
    step accumulates locally, the second all-reduces both."""
    ctx.need("device_count", "set_device", "current_device")
    cpu_model, dev_model = twin(MLP, ctx)
    # (device, model, optimiser): a list, since on --device cpu both devices are "cpu"
    runs = [(d, m, torch.optim.SGD(m.parameters(), lr=0.1))
            for d, m in (("cpu", _ddp(ctx, cpu_model)), (ctx.device, _ddp(ctx, dev_model)))]
    accumulate = ctx.params.get("variant") == "no_sync"
    for step in range(STEPS):
        for dev, model, opt in runs:
            opt.zero_grad()
            batches = [data(ctx, (8, 16), seed=10 * step + i) for i in range(2 if accumulate else 1)]
            if accumulate:
                with model.no_sync():
                    model(batches[0].to(dev)).square().mean().backward()
            model(batches[-1].to(dev)).square().mean().backward()
        same(ctx, [p.grad for p in dev_model.parameters()], [p.grad for p in cpu_model.parameters()],
             f"DDP gradients, step {step}")
        for _, _, opt in runs:
            opt.step()
        same(ctx, list(dev_model.parameters()), list(cpu_model.parameters()), f"DDP parameters, step {step}")
    return {"steps": STEPS}


def _sharded(ctx, device_type, model, reshard):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device_type, (ctx.world_size,))
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    return model


def _full(params):
    return [p.full_tensor() for p in params]


def fsdp(ctx):
    """fully_shard per block and at the root; parameters are DTensors sharded on dim 0."""
    ctx.need("Stream", "Event", "current_stream", "stream", "device_count", "set_device")
    reshard = bool(ctx.params.get("reshard_after_forward", True))
    cpu_model, dev_model = twin(Transformer, ctx)
    cpu_model = _sharded(ctx, "cpu", cpu_model, reshard)
    dev_model = _sharded(ctx, ctx.device_type, dev_model, reshard)
    local = [p.to_local() for p in dev_model.parameters()]
    assert sum(t.numel() for t in local) < sum(p.numel() for p in dev_model.parameters()), \
        "fully_shard left every parameter whole on this rank"
    runs = [(d, m, torch.optim.SGD(m.parameters(), lr=0.1)) for d, m in (("cpu", cpu_model), (ctx.device, dev_model))]
    for step in range(STEPS):
        for dev, model, opt in runs:
            opt.zero_grad()
            model(data(ctx, (2, 5, 16), seed=step).to(dev)).square().mean().backward()
        same(ctx, _full(p.grad for p in dev_model.parameters()), _full(p.grad for p in cpu_model.parameters()),
             f"FSDP gradients, step {step}")
        for _, _, opt in runs:
            opt.step()
    same(ctx, _full(dev_model.parameters()), _full(cpu_model.parameters()), "FSDP parameters")
    return {"steps": STEPS, "reshard_after_forward": reshard}


def fsdp_state_dict(ctx):
    """A sharded model's state dict, loaded into a fresh sharded model, gives back every
    parameter, and the full state dict equals the CPU model's."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict

    ctx.need("Stream", "Event", "current_stream", "stream")
    cpu_model, dev_model = twin(Transformer, ctx)
    reference = {k: v.clone() for k, v in cpu_model.state_dict().items()}
    dev_model = _sharded(ctx, ctx.device_type, dev_model, True)
    full = get_model_state_dict(dev_model, options=StateDictOptions(full_state_dict=True))
    same(ctx, [full[k] for k in sorted(reference)], [reference[k] for k in sorted(reference)], "full state dict")
    _, fresh = twin(Transformer, ctx, seed=1)
    fresh = _sharded(ctx, ctx.device_type, fresh, True)
    set_model_state_dict(fresh, full, options=StateDictOptions(full_state_dict=True))
    back = get_model_state_dict(fresh, options=StateDictOptions(full_state_dict=True))
    same(ctx, [back[k] for k in sorted(reference)], [reference[k] for k in sorted(reference)],
         "state dict after the round trip")
    sharded = dev_model.state_dict()
    assert all(type(v).__name__ == "DTensor" for v in sharded.values()), "sharded state dict holds plain tensors"
    dist.barrier()
    return {"entries": len(reference)}
