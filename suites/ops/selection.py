"""Which OpInfos and dtypes the ops suite instantiates.

``full``: every OpInfo in the wheel's ``op_db`` and every dtype it supports on
the device (the nightly).

``quick`` (the default; about 3 minutes on 2 cores with ``-n 2``) follows one
fixed rule, so its numbers are comparable from build to build:

* the OpInfos named in :data:`QUICK_OPS`, a fixed list of representatives for
  every category of ``op_db`` (unary and binary elementwise, reductions, scans
  and sorting, shape and view ops, indexing and scatter, linear algebra,
  convolution / pooling / normalisation / activation / loss from
  ``nn.functional``, special functions, creation and conversion);
* dtypes: ``float32`` for every variant, plus ``float64`` and ``int64``
  for ``compare_cpu`` (one wider float, one integer), where the op supports them,
  plus ``complex64`` for ``compare_cpu`` of the few ops in :data:`QUICK_COMPLEX_OPS`
  (``add``, ``mul``, ``abs``, ``exp``, ``matmul``, ``sum``): young backends often
  lack complex numbers (Neuron does), and a device that refuses the dtype shows
  up as ``skip_backend/unsupported_dtype``; other ops' complex64 tests are
  deselected (:func:`keep_test`), so the run's time hardly changes;
* ``float64`` for ``compare_cpu_grad`` too (:data:`QUICK_EXTRA_GRAD_DTYPES`): each
  differentiable op's backward against CPU's in float64, at float64's tolerances unless
  the backend profile documents a downcast it compares at;
* every variant of the suite, with ``compile_compare_cpu`` on float32 only.

The list is chosen by category, not by a device's results: it deliberately
includes operators that young backends often lack (e.g. ``cdist``, anti-aliased
upsampling) and ones that commonly fall back to CPU (scans, sorting,
``nonzero``), the special functions and ``as_strided`` for which OpInfo declares expected
failures of ``TestCommon`` tests, so a quick run exercises every outcome class
the device can produce.
Pick OpInfos by name instead with ``--tc-ops name,name`` (``TORCHCONFORM_OPS``).
"""
from __future__ import annotations

import torch

from torchconform import settings
from torchconform.errors import UserError

QUICK_OPS = {
    "unary": ["abs", "exp", "sin", "sigmoid", "sqrt", "erfinv", "frac", "nan_to_num"],
    "binary": ["add", "mul", "div.no_rounding_mode", "pow", "maximum", "atan2", "fmod", "bitwise_and"],
    "reduction": ["sum", "mean", "amax", "std", "prod", "logsumexp", "var_mean", "argmax"],
    "scan_sort": ["cumsum", "cummax", "sort", "topk", "nonzero", "median", "kthvalue", "unique"],
    "shape_view": ["reshape", "permute", "cat", "stack", "flip", "roll", "as_strided", "narrow"],
    "indexing": ["index_select", "gather", "scatter", "index_add", "masked_fill", "take", "index_put", "__getitem__"],
    "linalg": ["matmul", "mm", "addmm", "bmm", "linalg.vector_norm", "linalg.lu_factor", "cholesky", "cdist"],
    "nn_conv_pool": ["nn.functional.conv2d", "nn.functional.max_pool1d", "nn.functional.avg_pool2d",
                     "nn.functional.adaptive_avg_pool2d", "_upsample_bilinear2d_aa",
                     "nn.functional.interpolate.nearest", "nn.functional.unfold", "nn.functional.pad.reflect"],
    "nn_norm_act": ["nn.functional.layer_norm", "nn.functional.group_norm", "nn.functional.relu",
                    "nn.functional.gelu", "nn.functional.silu", "softmax", "nn.functional.embedding",
                    "nn.functional.hardtanh"],
    "nn_loss": ["nn.functional.cross_entropy", "nn.functional.mse_loss", "nn.functional.l1_loss",
                "nn.functional.binary_cross_entropy", "nn.functional.nll_loss"],
    "special": ["special.zeta", "special.chebyshev_polynomial_t", "special.i0e", "special.erfcx", "polygamma.polygamma_n_0"],
    "creation_conversion": ["zeros_like", "full_like", "arange", "linspace", "to", "float", "clone", "where"],
}

QUICK_EXTRA_COMPARE_DTYPES = (torch.float64, torch.int64)
QUICK_COMPLEX_DTYPE = torch.complex64
QUICK_COMPLEX_OPS = ("add", "mul", "abs", "exp", "matmul", "sum")
QUICK_DTYPE = torch.float32
# gradients in float64 too: a backward formula that is wrong only when float64 does not
# compute as float64 (amax's tie mask under float64-as-float32) shows nowhere else in quick
QUICK_EXTRA_GRAD_DTYPES = (torch.float64,)
VARIANTS = ("compare_cpu", "compare_cpu_grad", "out", "noncontiguous_samples", "compile_compare_cpu", "error_inputs")


def full_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def selection_name() -> str:
    name = settings.get("TORCHCONFORM_SELECTION")
    if name not in ("quick", "full"):
        raise UserError(f"unknown ops selection {name!r}; use quick or full")
    return name


def quick_names() -> list[str]:
    return [n for names in QUICK_OPS.values() for n in names]


def select_ops(op_db) -> list:
    """OpInfos of the active selection.  ``TORCHCONFORM_OPS`` (``--tc-ops``) names
    OpInfos directly, from the whole ``op_db`` (the selection still decides dtypes)."""
    wanted = {n.strip() for n in (settings.given("TORCHCONFORM_OPS") or "").split(",") if n.strip()}
    if wanted:
        return [op for op in op_db if full_name(op) in wanted or op.name in wanted]
    if selection_name() == "quick":
        names = set(quick_names())
        return [op for op in op_db if full_name(op) in names]
    return list(op_db)


def allowed_dtypes(variant: str):
    """None (every supported dtype) for full; the quick rule's dtypes otherwise."""
    if selection_name() == "full":
        return None
    if variant == "compare_cpu":
        return (QUICK_DTYPE, *QUICK_EXTRA_COMPARE_DTYPES, QUICK_COMPLEX_DTYPE)
    if variant == "compare_cpu_grad":
        return (QUICK_DTYPE, *QUICK_EXTRA_GRAD_DTYPES)
    return (QUICK_DTYPE,)


# How each variant's ``@ops`` picks its dtypes in test_ops.py: the OpInfo's supported dtypes,
# its backward dtypes, or none (one test per OpInfo, only where it has error inputs).
VARIANT_DTYPES = {"compare_cpu": "supported", "compare_cpu_grad": "backward", "out": "supported",
                  "noncontiguous_samples": "supported", "compile_compare_cpu": "supported", "error_inputs": None}


def tests_of(op, variant: str, device_type: str, allowed) -> int:
    """How many tests ``@ops`` instantiates for ``op`` and ``variant`` on ``device_type``
    with ``allowed`` dtypes (None: every dtype), as common_device_type.ops counts them."""
    mode = VARIANT_DTYPES[variant]
    if mode is None:
        return 1 if getattr(op, "error_inputs_func", None) is not None else 0
    dtypes = set(op.supported_dtypes(device_type) if mode == "supported" else op.supported_backward_dtypes(device_type))
    if allowed is not None:
        dtypes &= set(allowed)
    return len(dtypes)


def left_out(op_db, device_type: str) -> dict:
    """{reason: (tests, detail)} the selection leaves out before pytest sees them, against
    ``full`` (every OpInfo, every dtype): ``--ops`` for the OpInfos not named, ``selection``
    for the dtypes the quick rule drops (and, without ``--ops``, the OpInfos it does not list).
    Tests deselected later (the complex64 rule, ``-k``) are counted where they are deselected."""
    def count(ops, full: bool) -> int:
        return sum(tests_of(op, v, device_type, None if full else allowed_dtypes(v)) for op in ops for v in VARIANTS)

    chosen = select_ops(op_db)
    everything, chosen_full, selected = count(op_db, True), count(chosen, True), count(chosen, False)
    named = settings.given("TORCHCONFORM_OPS") or ""
    out = {}
    if named:
        out["--ops"] = (everything - chosen_full, named)
        out["selection"] = (chosen_full - selected, selection_name())
    else:
        out["selection"] = (everything - selected, selection_name())
    return {reason: value for reason, value in out.items() if value[0] > 0}


def keep_test(test_name: str, device_type: str) -> bool:
    """Quick rule for complex64: only ``compare_cpu`` of :data:`QUICK_COMPLEX_OPS`.

    ``test_name`` is PyTorch's generated name,
    ``test_<variant>_<op formatted name>_<device>_<dtype>``."""
    if selection_name() == "full":
        return True
    dtype = str(QUICK_COMPLEX_DTYPE).replace("torch.", "")
    suffix = f"_{device_type}_{dtype}"
    if not test_name.endswith(suffix):
        return True
    prefix = "test_compare_cpu_"
    op = test_name[len(prefix):-len(suffix)] if test_name.startswith(prefix) else ""
    return op in {n.replace(".", "_") for n in QUICK_COMPLEX_OPS}
