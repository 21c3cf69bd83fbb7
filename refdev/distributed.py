"""refdev's c10d backend, ``refccl``: collectives for refdev tensors over the host.

refdev memory is host memory, so a collective needs no staging copy: each refdev
tensor is handed to a gloo process group as a CPU tensor over the same bytes
(``cpu_alias`` in csrc/aten/device_tensor.cpp), and gloo's result lands in device memory directly.
CPU tensors go to the same gloo group unchanged, so one group serves
``init_process_group(backend="cpu:gloo,refdev:refccl")`` whichever device a
collective's tensors are on.

It is a Python ``ProcessGroup`` (PyTorch's trampoline, the route PyTorch's own
threaded test group takes): every entry point DDP's reducer, FSDP2, DTensor's
functional collectives and ``torch.distributed``'s Python API call is overridden
here, under both its current name and the older one PyTorch still falls back to.

The profile decides two honest gaps of a young backend (``collectives`` in
refdev/profiles/*.yaml):
  missing:      collectives it lacks; calling one raises
                "refccl does not implement the all_to_all collective (profile P)"
  synchronous:  true: a collective finishes before it returns (as refdev's kernels
                do), so nothing overlaps it; false: it runs on gloo's threads and
                overlaps the caller's computation until ``wait()``.
"""
from __future__ import annotations

from torchconform.refdev import state

BACKEND_NAME = "refccl"


def missing_message(collective: str, profile: str) -> str:
    """What calling a collective the profile lacks raises (the backend profile's
    ``missing_collective_patterns`` read the name back from it)."""
    return f"{BACKEND_NAME} does not implement the {collective} collective (profile {profile})"


def _alias(tensors):
    """Tensors as gloo takes them: refdev tensors as CPU tensors over the same bytes."""
    import torch

    ext = state.extension()
    kind = torch._C._get_privateuse1_backend_name()
    if isinstance(tensors, torch.Tensor):
        return ext.cpu_alias(tensors) if tensors.device.type == kind else tensors
    return [_alias(t) for t in tensors]


def _finished_work(value):
    """A Work that is already complete, its future holding ``value`` (a list of tensors).

    c10d's wrappers wait on the Work a backend returns (``isend``/``recv`` and every
    blocking collective call ``wait()``); a synchronous backend has waited already, and
    gloo's send/recv Work blocks forever on a second ``wait()``, so the caller gets this
    one instead of gloo's."""
    import torch
    from torch._C._distributed_c10d import _create_work_from_future

    fut = torch.futures.Future()
    fut.set_result(value)
    return _create_work_from_future(fut)


def _joined(works):
    """One Work over several (gloo has no coalesced tensor forms): done when all are,
    its result every Work's tensors in order."""
    import torch
    from torch._C._distributed_c10d import _create_work_from_future

    if len(works) == 1:
        return works[0]
    both = torch.futures.collect_all([w.get_future() for w in works])
    # collect_all's value is the list of futures; a Work's future must hold tensors
    return _create_work_from_future(both.then(lambda done: [t for f in done.value() for t in f.value()]))


def _make_group_class():
    """The ProcessGroup subclass, made on first use so that importing this module does
    not import torch.distributed."""
    import torch.distributed as dist

    class RefcclProcessGroup(dist.ProcessGroup):
        def __init__(self, store, rank: int, size: int, timeout, profile: str,
                     missing: frozenset, synchronous: bool):
            super().__init__(rank, size)
            self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
            self._profile = profile
            self._missing = missing
            self._synchronous = synchronous
            self._group_name = ""
            self._group_desc = ""

        def getBackendName(self) -> str:  # noqa: N802 - c10d's name
            return BACKEND_NAME

        @property
        def name(self) -> str:
            return BACKEND_NAME

        # c10d keeps a group's name and description on its backends; this group has
        # none registered (it is its own backend), so it keeps them itself.
        def setGroupName(self, name: str) -> None:  # noqa: N802
            self._group_name = name

        def getGroupName(self) -> str:  # noqa: N802
            return self._group_name

        def setGroupDesc(self, desc: str) -> None:  # noqa: N802
            self._group_desc = desc

        def getGroupDesc(self) -> str:  # noqa: N802
            return self._group_desc

        @property
        def group_name(self) -> str:
            return self._group_name

        @property
        def group_desc(self) -> str:
            return self._group_desc

        def _run(self, collective: str, call, tensors=None):
            """``call()``'s Work; when synchronous, finished before it returns and handed
            back as a finished Work holding its result (gloo's own result, or ``tensors``
            where gloo's Work has none: send and recv)."""
            if collective in self._missing:
                raise RuntimeError(missing_message(collective, self._profile))
            work = call()
            if not self._synchronous:
                return work
            work.wait()
            try:
                value = work.get_future().value()
            except RuntimeError:  # "Work::getFuture not implemented" (gloo's send/recv)
                value = list(tensors or [])
            return _finished_work(value)

        # -- the collectives -------------------------------------------------------
        def allreduce(self, tensors, opts=None):
            return self._run("all_reduce", lambda: self._gloo.allreduce(_alias(tensors), opts or dist.AllreduceOptions()))

        def allreduce_coalesced(self, tensors, opts=None):
            return self._run("all_reduce", lambda: self._gloo.allreduce_coalesced(
                _alias(tensors), opts or dist.AllreduceCoalescedOptions()))

        def broadcast(self, tensors, opts=None):
            return self._run("broadcast", lambda: self._gloo.broadcast(_alias(tensors), opts or dist.BroadcastOptions()))

        def allgather(self, output_lists, inputs, opts=None):
            return self._run("all_gather", lambda: self._gloo.allgather(
                [_alias(out) for out in output_lists], _alias(inputs), opts or dist.AllgatherOptions()))

        def all_gather_single(self, output, input, opts=None):
            return self._run("all_gather", lambda: self._gloo._allgather_base(
                _alias(output), _alias(input), opts or dist.AllgatherOptions()))

        _allgather_base = all_gather_single

        def _coalesced(self, collective: str, single, outputs, inputs, opts):
            """A coalesced tensor form as one single-tensor call per pair (gloo has none)."""
            return self._run(collective, lambda: _joined([single(o, i, opts) for o, i in
                                                          zip(_alias(outputs), _alias(inputs))]))

        def all_gather_single_coalesced(self, outputs, inputs, opts=None):
            return self._coalesced("all_gather", self._gloo._allgather_base, outputs, inputs,
                                   opts or dist.AllgatherOptions())

        allgather_into_tensor_coalesced = all_gather_single_coalesced

        def reduce_scatter(self, outputs, input_lists, opts=None):
            return self._run("reduce_scatter", lambda: self._gloo.reduce_scatter(
                _alias(outputs), [_alias(ins) for ins in input_lists], opts or dist.ReduceScatterOptions()))

        def reduce_scatter_single(self, output, input, opts=None):
            return self._run("reduce_scatter", lambda: self._gloo._reduce_scatter_base(
                _alias(output), _alias(input), opts or dist.ReduceScatterOptions()))

        _reduce_scatter_base = reduce_scatter_single

        def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
            return self._coalesced("reduce_scatter", self._gloo._reduce_scatter_base, outputs, inputs,
                                   opts or dist.ReduceScatterOptions())

        reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

        def all_to_all_single(self, output, input, output_splits, input_splits, opts=None):
            return self._run("all_to_all", lambda: self._gloo.alltoall_base(
                _alias(output), _alias(input), list(output_splits), list(input_splits),
                opts or dist.AllToAllOptions()))

        alltoall_base = all_to_all_single

        def alltoall(self, outputs, inputs, opts=None):
            return self._run("all_to_all", lambda: self._gloo.alltoall(
                _alias(outputs), _alias(inputs), opts or dist.AllToAllOptions()))

        def barrier(self, opts=None):
            return self._run("barrier", lambda: self._gloo.barrier(opts or dist.BarrierOptions()))

        def send(self, tensors, dst: int, tag: int = 0):
            return self._run("send_recv", lambda: self._gloo.send(_alias(tensors), dst, tag), _alias(tensors))

        def recv(self, tensors, src: int, tag: int = 0):
            return self._run("send_recv", lambda: self._gloo.recv(_alias(tensors), src, tag), _alias(tensors))

        def recv_anysource(self, tensors, tag: int = 0):
            return self._run("send_recv", lambda: self._gloo.recv_anysource(_alias(tensors), tag), _alias(tensors))

        def gather(self, output_lists, inputs, opts=None):
            return self._run("gather", lambda: self._gloo.gather(
                [_alias(out) for out in output_lists], _alias(inputs), opts or dist.GatherOptions()))

        def scatter(self, outputs, input_lists, opts=None):
            return self._run("scatter", lambda: self._gloo.scatter(
                _alias(outputs), [_alias(ins) for ins in input_lists], opts or dist.ScatterOptions()))

        def reduce(self, tensors, opts=None):
            return self._run("reduce", lambda: self._gloo.reduce(_alias(tensors), opts or dist.ReduceOptions()))

    return RefcclProcessGroup


_group_class = None


def register(device: str, profile: str, missing: list[str], synchronous: bool) -> None:
    """Register ``refccl`` with c10d as the default backend of ``device`` (once per process)."""
    import torch.distributed as dist

    if not dist.is_available() or BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    def create(store, rank, size, timeout):
        global _group_class
        if _group_class is None:
            _group_class = _make_group_class()
        return _group_class(store, rank, size, timeout, profile, frozenset(missing), synchronous)

    dist.Backend.register_backend(BACKEND_NAME, create, devices=[device])
