"""Record the ATen overloads a model's CPU run asks the dispatcher for.

Eager (eval, train): the models suite's CPU reference run, recorded by a
RecordFunction observer (census/csrc/opset.cpp, compiled on first use like
refdev).  It sees every dispatcher call and keeps what a backend key is asked
for: an operator that decomposes before reaching a backend (a
CompositeImplicitAutograd kernel and no CPU or CompositeExplicitAutograd kernel of
its own) is looked through,
so the device is never asked for ``aten::linear``, only for what it decomposes
into; the calls a CPU kernel makes inside itself do not count.  Backward's calls
are recorded too, so train's set holds the backward operators.  It costs about
1.05x the plain run (bench/census.py).

Where the recorder cannot be built (no C++ compiler), a TorchDispatchMode does
the same job at about 1.2-1.5x: called at the Python key, below Autograd, it sees
what the backend key is asked for.  It changes a little of what runs, though:
under a mode ``reshape`` asks for ``view`` instead of ``_reshape_alias``, and
gradient accumulation for ``add`` instead of ``add_`` (the mode holds
references); the observer sees what a device is asked for without one.

Compile: dynamo refuses to trace while a dispatch mode is active, and what the
device runs is not the eager op stream but the graphs its compile backend built.
refdev's backend (refdev/compile.py) is aot_eager: dynamo captures FX graphs,
aot_autograd functionalises them and decomposes composites into aten graphs, and
those graphs run op by op on the device.  So the compile set is the operators of
the aot graphs, recorded by a compile backend that is aot_eager with recording
graph compilers (the same call refdev's backend makes).  Code dynamo leaves to
eager between graphs is the eval forward's, which the eval set covers (a model is
blocked by the union of its variants' sets).  A backend whose compiler
decomposes further (inductor) would be asked for fewer, smaller operators: for it
this set is the graph before its own decompositions.
"""
from __future__ import annotations

import contextlib
import os
from torchconform.refdev import build


# Only ATen overloads: the census lists nothing else (prim::, custom namespaces).
PREFIX = "aten::"
RECORDER_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "opset.cpp")


def native_recorder():
    """The compiled RecordFunction recorder, built once per torch and compiler; None where
    it cannot be built (then the dispatch mode records)."""
    return build.optional_extension(RECORDER_SOURCE, "census_opset", "the census's operator recorder")


def _recorder_class():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        """Keeps each OpOverload once.  The body is as short as it can be: the mode
        is entered for every operator call of the run (bench/census.py measures it);
        names are made once at the end, and ``func._op`` skips OpOverload.__call__."""

        def __init__(self):
            super().__init__()
            self.seen: set = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.add(func)
            return func._op(*args, **kwargs) if kwargs else func._op(*args)

    return Recorder


_RECORDER = []


def names(overloads) -> list[str]:
    """Sorted ``aten::name.overload`` names (``func.name()``: the census's row names) of
    overloads or of names already."""
    out = set()
    for op in overloads:
        name = op.name() if hasattr(op, "name") else str(op)
        if name.startswith(PREFIX):
            out.add(name)
    return sorted(out)


@contextlib.contextmanager
def recording(enabled: bool = True, native: bool = True):
    """``with recording() as seen:`` runs the body under the recorder; ``seen`` (a set
    of overloads or names, for :func:`names`) is filled when the block ends.  Disabled
    (the set is stored already): the body runs plainly and ``seen`` is None.
    ``native=False``: the dispatch mode even where the observer builds."""
    if not enabled:
        yield None
        return
    recorder = native_recorder() if native else None
    if recorder is not None:
        seen: set = set()
        recorder.start()
        try:
            yield seen
        finally:
            seen.update(recorder.stop())
        return
    if not _RECORDER:
        _RECORDER.append(_recorder_class())
    mode = _RECORDER[0]()
    seen = set()
    try:
        with mode:
            yield seen
    finally:
        seen.update(mode.seen)


def recording_backend(seen: set):
    """A torch.compile backend: aot_eager whose graph compilers add every operator of
    the forward/inference and backward graphs to ``seen`` before running them as is."""
    import torch
    from torch._dynamo.backends.debugging import aot_eager, boxed_nop

    def compiler(fx_g, example_inputs):
        for node in fx_g.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                seen.add(node.target)
        return boxed_nop(fx_g, example_inputs)

    def backend(gm, example_inputs, **kwargs):
        return aot_eager(gm, example_inputs, fw_compiler=compiler, bw_compiler=compiler, **kwargs)

    return backend
