"""Record the ATen overloads a model's CPU run asks the dispatcher for.

Eager (eval, train): a TorchDispatchMode around the models suite's CPU reference
run.  A dispatch mode is called at the Python key, below Autograd: what it sees is
what the backend key is asked for, after CompositeImplicitAutograd operators were
decomposed (the device is never asked for ``aten::linear``, only for what it
decomposes into).  Backward runs inside the mode (the autograd engine carries the
mode's thread-local state), so train's set holds the backward operators too.

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

# Only ATen overloads: the census lists nothing else (prim::, custom namespaces).
PREFIX = "aten::"


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
    """Sorted ``aten::name.overload`` names (``func.name()``: the census's row names)."""
    out = set()
    for op in overloads:
        name = op.name() if hasattr(op, "name") else str(op)
        if name.startswith(PREFIX):
            out.add(name)
    return sorted(out)


@contextlib.contextmanager
def recording(enabled: bool = True):
    """``with recording() as seen:`` runs the body under the recorder; ``seen`` (a set
    of overloads, for :func:`names`) is filled when the block ends.  Disabled (the set
    is stored already): the body runs plainly and ``seen`` is None."""
    if not enabled:
        yield None
        return
    if not _RECORDER:
        _RECORDER.append(_recorder_class())
    mode = _RECORDER[0]()
    seen: set = set()
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
