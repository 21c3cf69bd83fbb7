"""Each ATen overload's status on a device, read from the dispatcher's own tables.

The order of the checks is the dispatcher's order for filling the device's
backend slot (c10 ``computeDispatchTableEntry``): a kernel registered for the
key itself, then the composite alias kernels, then the backend fallback.  The
autograd key comes before the composites because it is asked first: an
operator with only an ``Autograd<Backend>`` kernel runs through it.

Everything takes a ``has(op, key) -> bool`` so that tests can drive it with a
made-up table; :func:`torch_has` is the real one (direct registrations only:
alias keys filling a slot do not count as the slot's own kernel).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

NATIVE, AUTOGRAD, COMPOSITE, FALLBACK, MISSING, UNAVAILABLE = (
    "native", "autograd", "composite", "fallback", "missing", "unavailable")
STATUSES = (NATIVE, AUTOGRAD, COMPOSITE, FALLBACK, MISSING, UNAVAILABLE)
# Statuses that run on the device without help from anything else.
RUNS = frozenset({NATIVE, AUTOGRAD, FALLBACK})

# Composite alias keys, in the order the dispatcher prefers them for a backend slot.
COMPOSITE_KEYS = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd",
                  "CompositeImplicitAutograd")
# Backend keys of strided (dense) tensors on any device.  An operator with none of
# these and no composite can run on no device of this torch build (CUDA-only ops in a
# CPU build, sparse/quantized/mkldnn/nested-only ops): "unavailable", not the
# device's gap.  Meta computes shapes only, so it does not count.
DENSE_KEYS = ("CPU", "CUDA", "HIP", "XLA", "MPS", "IPU", "XPU", "HPU", "VE", "Lazy", "MTIA", "MAIA",
              "PrivateUse1", "PrivateUse2", "PrivateUse3")
PYTHON_DECOMP = "python-decomposition"
# missing although the backend has a boxed CPU fallback: the fallback has no CPU kernel to call
NO_CPU_KERNEL = "fallback-without-cpu-kernel"
# ATen's composite kernels that only raise NotImplementedError ("convolution_overrideable not
# implemented. You are likely triggering this with tensor backend other than CPU/CUDA/MKLDNN"):
# hooks a PrivateUse1 backend is meant to override.  Without the backend's own kernel the
# operator cannot run, so such a row is missing, not a covered composite.  There is no trace to
# tell a stub from a decomposition (a stub reaches nothing, as a view does), hence a list;
# tests/test_census_stubs.py checks on the installed torch that each still raises.
RAISING_STUBS = frozenset({
    "aten::convolution_overrideable", "aten::convolution_backward_overrideable",
    "aten::_scaled_dot_product_fused_attention_overrideable",
    "aten::_scaled_dot_product_fused_attention_overrideable_backward",
})
STUB = "composite-stub-raises"
# CPU kernels that turn strided arguments into a sparse result (COO: _spdiags, _to_sparse;
# compressed: _to_sparse_csr/csc/bsr/bsc).  A boxed CPU fallback moves results back to the
# device, and a sparse one needs the device's sparse key to build it (the constructor below);
# without it the call raises "Could not run 'aten::_sparse_coo_tensor_with_dims_and_tensors'
# with arguments from the 'Sparse<device>' backend" (torchvulkan's _spdiags): missing.
SPARSE_RESULT_COO = frozenset({"aten::_spdiags", "aten::_to_sparse", "aten::_to_sparse.sparse_dim"})
SPARSE_RESULT_COMPRESSED = frozenset({"aten::_to_sparse_csr", "aten::_to_sparse_csc", "aten::_to_sparse_bsr",
                                      "aten::_to_sparse_bsc"})
SPARSE_CONSTRUCTORS = {"Sparse": "aten::_sparse_coo_tensor_with_dims_and_tensors",
                       "SparseCsr": "aten::empty.memory_format"}
SPARSE_RESULT = "fallback-result-not-on-device"
# fallback although the dispatcher shows the backend's own kernel: the build's passing tests saw
# that kernel call the CPU fallback itself (aten::_to_cpu inside it; collectors/dispatchwatch.py)
OBSERVED = "observed-in-tests"

Has = Callable[[str, str], bool]


@dataclass
class Row:
    op: str                        # dispatcher name: aten::name or aten::name.overload
    status: str
    via: str = ""                  # composite: the alias key; missing: python-decomposition if any
    reached: list[str] | None = None   # composite: operators the decomposition reaches (None: not traced)
    covered: bool | None = None        # composite: every reached operator runs on the device
    blocked_by: list[str] = field(default_factory=list)  # reached operators that do not run

    @property
    def works(self) -> bool:
        """Runs on the device: natively, through autograd or fallback, or a composite not known to be blocked."""
        return self.status in RUNS or (self.status == COMPOSITE and self.covered is not False)

    def to_dict(self) -> dict:
        return {"op": self.op, "status": self.status, "via": self.via, "reached": self.reached,
                "covered": self.covered, "blocked_by": list(self.blocked_by)}


@dataclass
class Keys:
    """The dispatch keys of the device under test."""
    backend: str                   # CPU, CUDA, PrivateUse1, ...
    autograd: str                  # AutogradCPU, AutogradPrivateUse1, ...
    backend_fallback: bool = False  # a boxed fallback serves the backend key (a CPU fallback)


def torch_has(op: str, key: str) -> bool:
    import torch

    return torch._C._dispatch_has_kernel_for_dispatch_key(op, key)


def device_keys(device_type: str) -> Keys:
    """Keys of a torch device type (``cpu``, ``cuda``, a PrivateUse1 name...)."""
    import torch

    backend = torch._C._dispatch_key_for_device(device_type)
    autograd = "Autograd" + backend
    if autograd not in torch._C.DispatchKey.__members__:
        autograd = "AutogradOther"
    fallback = torch._C._dispatch_has_backend_fallback(getattr(torch._C.DispatchKey, backend))
    return Keys(backend, autograd, bool(fallback))


def aten_ops() -> list[str]:
    import torch

    return sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))


def python_decompositions() -> set[str]:
    """Operators torch._decomp can decompose in Python (used by compilers, not by eager)."""
    from torch._decomp import decomposition_table

    return {op.name() for op in decomposition_table if hasattr(op, "name")}


def composite_key(op: str, has: Has = torch_has) -> str:
    """The composite kernel the device runs for ``op`` (which has no kernel on its key), "" if none.

    Calls come through the autograd key first, and the dispatcher fills that slot with the
    CompositeImplicitAutograd kernel unless the backend or CompositeExplicitAutograd has one
    (c10 computeDispatchTableEntry, step 2.3; CompositeExplicitAutogradNonFunctional does not
    count).  So an op with both an Implicit and a NonFunctional kernel (``silu_backward``)
    decomposes there, although the backend slot alone would take the NonFunctional one."""
    if has(op, "CompositeImplicitAutograd") and not has(op, "CompositeExplicitAutograd"):
        return "CompositeImplicitAutograd"
    return next((k for k in COMPOSITE_KEYS if has(op, k)), "")


def trace_key(op: str, keys: Keys, has: Has = torch_has) -> str:
    """The key to redispatch a composite row on to run the kernel the device runs
    (census/trace.py): the autograd key where its slot differs from the backend's
    (composite_key's case), else the backend key."""
    if composite_key(op, has) == "CompositeImplicitAutograd" and has(op, "CompositeExplicitAutogradNonFunctional"):
        return keys.autograd
    return keys.backend


def classify(ops: Iterable[str], keys: Keys, has: Has = torch_has, fallback_ops: Iterable[str] = (),
             python_decomps: Iterable[str] = (), observed: Iterable[str] = ()) -> list[Row]:
    """One Row per operator (reached/covered left for trace.py).

    ``fallback_ops``: operators the backend says run through its CPU fallback even
    though a kernel is registered for them (refdev registers a warning kernel per
    fallback operator, so the dispatcher alone cannot tell them from native ones).
    ``observed``: operators whose registered kernel passing tests saw compute through
    the CPU fallback (the build's evidence; via OBSERVED)."""
    fallback_ops, python_decomps, observed = set(fallback_ops), set(python_decomps), set(observed)
    rows = []
    for op in ops:
        via = ""
        if has(op, keys.backend):
            status = FALLBACK if op in fallback_ops or op in observed else NATIVE
            via = OBSERVED if status == FALLBACK and op not in fallback_ops else ""
        elif has(op, keys.autograd):
            status = AUTOGRAD
        else:
            via = composite_key(op, has)
            if via and op in RAISING_STUBS:
                status, via = MISSING, STUB
            elif via:
                status = COMPOSITE
            elif keys.backend_fallback and has(op, "CPU") and not _holds_result(op, keys, has):
                # the fallback computes it, but its sparse result cannot be moved to the device
                status, via = MISSING, SPARSE_RESULT
            elif keys.backend_fallback and has(op, "CPU"):
                # A boxed CPU fallback (at::native::cpu_fallback) moves the arguments to
                # the CPU and calls the operator there: it runs only where a CPU kernel does.
                status = FALLBACK
            elif keys.backend_fallback:
                # ... so one with no CPU kernel (_thnn_fused_gru_cell, _flash_attention_forward,
                # convolution_overrideable) raises "Could not run ... from the 'CPU' backend"
                # on this device, although it reaches the device: its gap, not the build's.
                status, via = MISSING, NO_CPU_KERNEL
            elif any(has(op, k) for k in DENSE_KEYS):
                status, via = MISSING, (PYTHON_DECOMP if op in python_decomps else "")
            else:
                status, via = UNAVAILABLE, (PYTHON_DECOMP if op in python_decomps else "")
        rows.append(Row(op, status, via))
    return rows


def _holds_result(op: str, keys: Keys, has: Has) -> bool:
    """Whether the device can hold what the CPU kernel of ``op`` returns (only sparse
    results are in question: SPARSE_RESULT_*)."""
    layout = "Sparse" if op in SPARSE_RESULT_COO else "SparseCsr" if op in SPARSE_RESULT_COMPRESSED else ""
    if not layout:
        return True
    try:
        return has(SPARSE_CONSTRUCTORS[layout], layout + keys.backend)
    except Exception:  # noqa: BLE001 - a backend without that sparse key
        return False


def resolve_coverage(rows: list[Row]) -> None:
    """Fill ``covered`` / ``blocked_by`` of traced composite rows from what they reach.

    A reached composite counts through its own coverage (recursively; a cycle is
    not evidence, so it counts as unknown).  covered is False when a reached
    operator is missing, unavailable or a blocked composite; None when something
    reached is not known (an untraced composite, an operator outside the census)."""
    by_op = {r.op: r for r in rows}
    state: dict[str, bool | None] = {}

    def covered(row: Row, stack: frozenset) -> bool | None:
        if row.op in state:
            return state[row.op]
        if row.reached is None:
            return None
        blocked, unknown = [], False
        for name in row.reached:
            dep = by_op.get(name)
            if dep is None:
                unknown = True
            elif dep.status in RUNS:
                continue
            elif dep.status == COMPOSITE:
                sub = None if name in stack else covered(dep, stack | {row.op})
                if sub is False:
                    blocked.append(name)
                elif sub is None:
                    unknown = True
            else:
                blocked.append(name)
        row.blocked_by = blocked
        state[row.op] = False if blocked else (None if unknown else True)
        return state[row.op]

    for row in rows:
        if row.status == COMPOSITE:
            row.covered = covered(row, frozenset())
