"""The operator sample checked by hand on each real PrivateUse1 backend (docs/backends.md).

One :class:`Case` per operator: a small call built from CPU tensors (seeded, then
moved to the device, so that making the inputs needs nothing but a copy), the aten
overloads it is about, and the quick-selection OpInfo that tests the same operator
(None where no quick OpInfo does). ``probe.py`` runs each case on the device and on
CPU and gathers the evidence; the truth files record what it showed.

The list is by category (elementwise, reduction, scan/sort, shape, indexing, linear
algebra, nn, factories, random numbers) plus operators a young backend often lacks or
serves through a CPU fallback (``_thnn_fused_gru_cell`` has no CPU kernel at all).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

# how a case's device result is judged against the CPU's
CLOSE, EXACT, RNG, NONE = "close", "exact", "rng", "none"


@dataclass
class Case:
    name: str
    aten: list[str]                    # the overloads the call is about
    call: Callable[[str], object]      # dev -> result (tensors on dev)
    opinfo: str | None = None          # the quick OpInfo testing it, if any
    check: str = CLOSE
    rng_range: tuple[float, float] | None = None   # RNG: every value inside [lo, hi]
    notes: str = ""
    tags: list[str] = field(default_factory=list)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def t(*shape, dev: str, dtype=torch.float32, seed: int = 0, low: float = -2.0, high: float = 2.0):
    """A CPU tensor of fixed values, moved to ``dev`` (a copy is the only device op)."""
    g = _gen(seed)
    if dtype.is_floating_point:
        x = torch.rand(*shape, generator=g) * (high - low) + low
        return x.to(dtype).to(dev)
    if dtype == torch.bool:
        return (torch.rand(*shape, generator=g) > 0.5).to(dev)
    return torch.randint(int(low), int(high) + 1, shape, generator=g).to(dtype).to(dev)


def idx(*values, dev: str):
    return torch.tensor(values, dtype=torch.int64).to(dev)


def _gru_cell(dev):
    ig, hg, hx = t(2, 12, dev=dev), t(2, 12, dev=dev, seed=1), t(2, 4, dev=dev, seed=2)
    return torch.ops.aten._thnn_fused_gru_cell(ig, hg, hx)


def _lstm_cell(dev):
    ig, hg, cx = t(2, 16, dev=dev), t(2, 16, dev=dev, seed=1), t(2, 4, dev=dev, seed=2)
    return torch.ops.aten._thnn_fused_lstm_cell(ig, hg, cx)


def _conv_overrideable(dev):
    x, w, b = t(1, 2, 5, 5, dev=dev), t(3, 2, 3, 3, dev=dev, seed=1), t(3, dev=dev, seed=2)
    return torch.ops.aten.convolution_overrideable(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)


def _index_put(dev):
    x = t(5, 3, dev=dev)
    return x.index_put((idx(0, 3, dev=dev),), t(2, 3, dev=dev, seed=1))


def _getitem(dev):
    x = t(6, 4, dev=dev)
    return x[idx(1, 4, dev=dev), 1:3]


def _masked_fill(dev):
    x = t(4, 4, dev=dev)
    return x.masked_fill(t(4, 4, dev=dev, dtype=torch.bool, seed=1), 7.0)


def _where(dev):
    return torch.where(t(4, 4, dev=dev, dtype=torch.bool), t(4, 4, dev=dev, seed=1), t(4, 4, dev=dev, seed=2))


def _uniform(dev):
    return torch.empty(1000, device=dev).uniform_(-1.0, 3.0)


def _normal(dev):
    return torch.empty(1000, device=dev).normal_(0.0, 1.0)


def _random(dev):
    return torch.empty(1000, device=dev).random_(0, 10)


def _bernoulli(dev):
    return torch.empty(1000, device=dev).bernoulli_(0.3)


def _randperm(dev):
    return torch.randperm(50, device=dev).sort().values


def _int_mm(dev):
    a = t(32, 32, dev=dev, dtype=torch.int8, low=-5, high=5)
    b = t(32, 32, dev=dev, dtype=torch.int8, low=-5, high=5, seed=1)
    return torch._int_mm(a, b)


def _conv3d(dev):
    x, w = t(1, 2, 4, 4, 4, dev=dev), t(3, 2, 2, 2, 2, dev=dev, seed=1)
    return torch.nn.functional.conv3d(x, w)


def _slow_conv3d(dev):
    x, w = t(1, 2, 4, 4, 4, dev=dev), t(3, 2, 2, 2, 2, dev=dev, seed=1)
    return torch.ops.aten.slow_conv3d_forward(x, w, [2, 2, 2], None, [1, 1, 1], [0, 0, 0])


def _slow_conv_dilated2d(dev):
    x, w = t(1, 2, 6, 6, dev=dev), t(3, 2, 3, 3, dev=dev, seed=1)
    return torch.ops.aten.slow_conv_dilated2d(x, w, [3, 3], None, [1, 1], [0, 0], [2, 2])


def _spdiags(dev):
    return torch.ops.aten._spdiags(t(2, 5, dev=dev), idx(0, 1, dev=dev), [5, 5]).to_dense()


def _lanczos(dev):
    return torch.ops.aten._upsample_lanczos2d_aa(t(1, 1, 6, 6, dev=dev), [3, 3], False)


def _gamma_grad(dev):
    x = t(8, dev=dev, low=0.5, high=3.0)
    return torch._standard_gamma_grad(x, t(8, dev=dev, low=0.5, high=3.0, seed=1))


def _dirichlet_grad(dev):
    x = t(8, dev=dev, low=0.1, high=0.9)
    return torch._dirichlet_grad(x, t(8, dev=dev, low=0.5, high=3.0, seed=1), t(8, dev=dev, low=1.0, high=4.0, seed=2))


def _weight_int8pack(dev):
    a = t(4, 16, dev=dev)
    w = t(8, 16, dev=dev, dtype=torch.int8, low=-5, high=5, seed=1)
    return torch._weight_int8pack_mm(a, w, t(8, dev=dev, low=0.5, high=1.0, seed=2))


def _sdpa_cpu(dev):
    q, k, v = (t(1, 2, 4, 8, dev=dev, seed=s) for s in range(3))
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0]


def _unique(dev):
    return torch.unique(t(20, dev=dev, dtype=torch.int64, low=0, high=5), return_counts=True)


def _nonzero(dev):
    return torch.nonzero(t(5, 4, dev=dev, dtype=torch.bool))


def _embedding(dev):
    return torch.nn.functional.embedding(idx(1, 3, 3, 0, dev=dev), t(5, 4, dev=dev))


def _cross_entropy(dev):
    return torch.nn.functional.cross_entropy(t(4, 5, dev=dev), idx(0, 4, 2, 1, dev=dev))


def _nll_loss(dev):
    return torch.nn.functional.nll_loss(t(4, 5, dev=dev).log_softmax(1), idx(0, 4, 2, 1, dev=dev))


def _arange(dev):
    return torch.arange(0.0, 5.0, 0.5, device=dev)


def _linspace(dev):
    return torch.linspace(-1.0, 1.0, 9, device=dev)


def _full_like(dev):
    return torch.full_like(t(3, 4, dev=dev), 2.5)


def _zeros_like(dev):
    return torch.zeros_like(t(3, 4, dev=dev))


E = torch.float32

CASES: list[Case] = [
    # elementwise
    Case("add", ["aten::add.Tensor", "aten::add.out"], lambda d: torch.add(t(4, 5, dev=d), t(4, 5, dev=d, seed=1)), "add"),
    Case("mul", ["aten::mul.Tensor", "aten::mul.out"], lambda d: t(4, 5, dev=d) * t(4, 5, dev=d, seed=1), "mul"),
    Case("abs", ["aten::abs", "aten::abs.out"], lambda d: t(4, 5, dev=d).abs(), "abs"),
    Case("exp", ["aten::exp", "aten::exp.out"], lambda d: t(4, 5, dev=d).exp(), "exp"),
    Case("sin", ["aten::sin", "aten::sin.out"], lambda d: t(4, 5, dev=d).sin(), "sin"),
    Case("sigmoid", ["aten::sigmoid", "aten::sigmoid.out"], lambda d: t(4, 5, dev=d).sigmoid(), "sigmoid"),
    Case("sqrt", ["aten::sqrt", "aten::sqrt.out"], lambda d: t(4, 5, dev=d, low=0.1, high=4).sqrt(), "sqrt"),
    Case("div", ["aten::div.Tensor", "aten::div.out"],
         lambda d: t(4, 5, dev=d) / t(4, 5, dev=d, seed=1, low=0.5, high=2), "div.no_rounding_mode"),
    Case("pow", ["aten::pow.Tensor_Tensor", "aten::pow.Tensor_Tensor_out"],
         lambda d: torch.pow(t(4, 5, dev=d, low=0.1, high=2), t(4, 5, dev=d, seed=1)), "pow"),
    Case("maximum", ["aten::maximum", "aten::maximum.out"],
         lambda d: torch.maximum(t(4, 5, dev=d), t(4, 5, dev=d, seed=1)), "maximum"),
    Case("atan2", ["aten::atan2", "aten::atan2.out"], lambda d: torch.atan2(t(4, 5, dev=d), t(4, 5, dev=d, seed=1)), "atan2"),
    Case("fmod", ["aten::fmod.Tensor", "aten::fmod.Tensor_out"],
         lambda d: torch.fmod(t(4, 5, dev=d), t(4, 5, dev=d, seed=1, low=0.5, high=2)), "fmod"),
    Case("bitwise_and", ["aten::bitwise_and.Tensor", "aten::bitwise_and.Tensor_out"],
         lambda d: t(4, 5, dev=d, dtype=torch.int32, low=0, high=100) & t(4, 5, dev=d, dtype=torch.int32, low=0, high=100, seed=1),
         "bitwise_and", EXACT),
    Case("erfinv", ["aten::erfinv", "aten::erfinv.out"], lambda d: t(4, 5, dev=d, low=-0.9, high=0.9).erfinv(), "erfinv"),
    Case("frac", ["aten::frac", "aten::frac.out"], lambda d: t(4, 5, dev=d).frac(), "frac"),
    Case("nan_to_num", ["aten::nan_to_num", "aten::nan_to_num.out"],
         lambda d: torch.nan_to_num(t(4, 5, dev=d).log()), "nan_to_num"),
    Case("where", ["aten::where.self", "aten::where.self_out"], _where, "where"),
    # reductions
    Case("sum", ["aten::sum.dim_IntList", "aten::sum.IntList_out"], lambda d: t(4, 5, dev=d).sum(1), "sum"),
    Case("mean", ["aten::mean.dim", "aten::mean.out"], lambda d: t(4, 5, dev=d).mean(0), "mean"),
    Case("amax", ["aten::amax", "aten::amax.out"], lambda d: t(4, 5, dev=d).amax(1), "amax"),
    Case("std", ["aten::std.correction", "aten::std.correction_out"], lambda d: t(4, 5, dev=d).std(1), "std"),
    Case("prod", ["aten::prod.dim_int", "aten::prod.int_out"], lambda d: t(4, 5, dev=d).prod(1), "prod"),
    Case("argmax", ["aten::argmax", "aten::argmax.out"], lambda d: t(4, 5, dev=d).argmax(1), "argmax", EXACT),
    Case("logsumexp", ["aten::logsumexp", "aten::logsumexp.out"], lambda d: t(4, 5, dev=d).logsumexp(1), "logsumexp"),
    # scans and sorting
    Case("cumsum", ["aten::cumsum", "aten::cumsum.out"], lambda d: t(4, 5, dev=d).cumsum(1), "cumsum"),
    Case("cummax", ["aten::cummax", "aten::_cummax_helper"], lambda d: t(4, 5, dev=d).cummax(1), "cummax"),
    Case("sort", ["aten::sort.stable", "aten::sort.values_stable"], lambda d: t(4, 5, dev=d).sort(1), "sort"),
    Case("topk", ["aten::topk", "aten::topk.values"], lambda d: t(4, 6, dev=d).topk(3, 1), "topk"),
    Case("nonzero", ["aten::nonzero", "aten::nonzero.out"], _nonzero, "nonzero", EXACT),
    Case("median", ["aten::median.dim", "aten::median.dim_values"], lambda d: t(4, 5, dev=d).median(1), "median"),
    Case("kthvalue", ["aten::kthvalue", "aten::kthvalue.values"], lambda d: t(4, 5, dev=d).kthvalue(2, 1), "kthvalue"),
    Case("unique", ["aten::_unique2"], _unique, "unique", EXACT),
    Case("cumprod", ["aten::cumprod", "aten::cumprod.out"], lambda d: t(4, 5, dev=d).cumprod(1)),
    Case("masked_select", ["aten::masked_select"], lambda d: t(4, 4, dev=d).masked_select(t(4, 4, dev=d, dtype=torch.bool, seed=1)),
         check=EXACT),
    # shape and view
    Case("cat", ["aten::cat", "aten::cat.out"], lambda d: torch.cat([t(2, 3, dev=d), t(4, 3, dev=d, seed=1)]), "cat"),
    Case("stack", ["aten::stack", "aten::cat.out"], lambda d: torch.stack([t(2, 3, dev=d), t(2, 3, dev=d, seed=1)]), "stack"),
    Case("flip", ["aten::flip"], lambda d: t(3, 4, dev=d).flip(0), "flip"),
    Case("roll", ["aten::roll"], lambda d: t(3, 4, dev=d).roll(1, 1), "roll"),
    Case("as_strided", ["aten::as_strided"], lambda d: t(4, 4, dev=d).as_strided((2, 2), (4, 1), 1).clone(), "as_strided"),
    Case("permute", ["aten::permute"], lambda d: t(2, 3, 4, dev=d).permute(2, 0, 1).contiguous(), "permute"),
    # indexing
    Case("index_select", ["aten::index_select", "aten::index_select.out"],
         lambda d: t(5, 3, dev=d).index_select(0, idx(4, 0, 2, dev=d)), "index_select"),
    Case("gather", ["aten::gather", "aten::gather.out"],
         lambda d: t(3, 4, dev=d).gather(1, idx(0, 3, 1, 2, 2, 0, dev=d).view(3, 2)), "gather"),
    Case("scatter", ["aten::scatter.src", "aten::scatter.src_out"],
         lambda d: t(3, 4, dev=d).scatter(1, idx(0, 3, 1, 2, 2, 0, dev=d).view(3, 2), t(3, 2, dev=d, seed=1)), "scatter"),
    Case("index_add", ["aten::index_add", "aten::index_add.out"],
         lambda d: t(5, 3, dev=d).index_add(0, idx(4, 0, 4, dev=d), t(3, 3, dev=d, seed=1)), "index_add"),
    Case("masked_fill", ["aten::masked_fill.Scalar", "aten::masked_fill_.Scalar"], _masked_fill, "masked_fill"),
    Case("take", ["aten::take", "aten::take.out"], lambda d: t(3, 4, dev=d).take(idx(0, 11, 5, dev=d)), "take"),
    Case("index_put", ["aten::index_put", "aten::index_put_", "aten::_index_put_impl_"], _index_put, "index_put"),
    Case("getitem_index", ["aten::index.Tensor", "aten::index.Tensor_out"], _getitem, "__getitem__"),
    # linear algebra
    Case("mm", ["aten::mm", "aten::mm.out"], lambda d: t(3, 4, dev=d) @ t(4, 5, dev=d, seed=1), "mm"),
    Case("matmul", ["aten::matmul", "aten::mm"], lambda d: torch.matmul(t(3, 4, dev=d), t(4, dev=d, seed=1)), "matmul"),
    Case("addmm", ["aten::addmm", "aten::addmm.out"],
         lambda d: torch.addmm(t(3, 5, dev=d), t(3, 4, dev=d, seed=1), t(4, 5, dev=d, seed=2)), "addmm"),
    Case("bmm", ["aten::bmm", "aten::bmm.out"], lambda d: torch.bmm(t(2, 3, 4, dev=d), t(2, 4, 5, dev=d, seed=1)), "bmm"),
    Case("vector_norm", ["aten::linalg_vector_norm", "aten::linalg_vector_norm.out"],
         lambda d: torch.linalg.vector_norm(t(4, 5, dev=d), dim=1), "linalg.vector_norm"),
    Case("cdist", ["aten::_cdist_forward"], lambda d: torch.cdist(t(3, 4, dev=d), t(5, 4, dev=d, seed=1)), "cdist"),
    # nn
    Case("conv2d", ["aten::convolution", "aten::convolution_overrideable"],
         lambda d: torch.nn.functional.conv2d(t(1, 2, 5, 5, dev=d), t(3, 2, 3, 3, dev=d, seed=1), padding=1),
         "nn.functional.conv2d"),
    Case("convolution_overrideable", ["aten::convolution_overrideable"], _conv_overrideable),
    Case("max_pool1d", ["aten::max_pool1d", "aten::max_pool1d_with_indices"],
         lambda d: torch.nn.functional.max_pool1d(t(1, 2, 8, dev=d), 2), "nn.functional.max_pool1d"),
    Case("avg_pool2d", ["aten::avg_pool2d", "aten::avg_pool2d.out"],
         lambda d: torch.nn.functional.avg_pool2d(t(1, 2, 6, 6, dev=d), 2), "nn.functional.avg_pool2d"),
    Case("layer_norm", ["aten::native_layer_norm"],
         lambda d: torch.nn.functional.layer_norm(t(3, 8, dev=d), (8,)), "nn.functional.layer_norm"),
    Case("softmax", ["aten::_softmax", "aten::_softmax.out"], lambda d: t(4, 5, dev=d).softmax(1), "softmax"),
    Case("gelu", ["aten::gelu", "aten::gelu.out"], lambda d: torch.nn.functional.gelu(t(4, 5, dev=d)), "nn.functional.gelu"),
    Case("relu", ["aten::relu"], lambda d: torch.relu(t(4, 5, dev=d)), "nn.functional.relu"),
    Case("embedding", ["aten::embedding", "aten::index_select"], _embedding, "nn.functional.embedding"),
    Case("cross_entropy", ["aten::_log_softmax", "aten::nll_loss_forward"], _cross_entropy, "nn.functional.cross_entropy"),
    Case("nll_loss", ["aten::nll_loss_forward", "aten::nll_loss_forward.output"], _nll_loss, "nn.functional.nll_loss"),
    Case("mse_loss", ["aten::mse_loss", "aten::mse_loss.out"],
         lambda d: torch.nn.functional.mse_loss(t(4, 5, dev=d), t(4, 5, dev=d, seed=1)), "nn.functional.mse_loss"),
    # factories and copies
    Case("arange", ["aten::arange.start_step", "aten::arange.start_out"], _arange, "arange"),
    Case("linspace", ["aten::linspace", "aten::linspace.out"], _linspace, "linspace"),
    Case("full_like", ["aten::full_like", "aten::fill_.Scalar"], _full_like, "full_like"),
    Case("zeros_like", ["aten::zeros_like", "aten::zero_"], _zeros_like, "zeros_like"),
    Case("clone", ["aten::clone", "aten::copy_"], lambda d: t(3, 4, dev=d).clone(), "clone"),
    # random numbers (compared by range and shape, not value by value)
    Case("uniform_", ["aten::uniform_"], _uniform, check=RNG, rng_range=(-1.0, 3.0)),
    Case("normal_", ["aten::normal_"], _normal, check=RNG, rng_range=(-10.0, 10.0)),
    Case("random_", ["aten::random_.from"], _random, check=RNG, rng_range=(0.0, 9.0)),
    Case("bernoulli_", ["aten::bernoulli_.float"], _bernoulli, check=RNG, rng_range=(0.0, 1.0)),
    Case("randperm", ["aten::randperm", "aten::randperm.generator_out"], _randperm,
         notes="sorted afterwards: a permutation of 0..49 sorts to arange(50)"),
    # operators young backends lack; ones with no CPU kernel break a CPU fallback
    Case("_thnn_fused_gru_cell", ["aten::_thnn_fused_gru_cell"], _gru_cell,
         notes="no CPU kernel (CUDA-only); GRUCell on a PrivateUse1 device calls it"),
    Case("_thnn_fused_lstm_cell", ["aten::_thnn_fused_lstm_cell"], _lstm_cell,
         notes="no CPU kernel (CUDA-only); LSTMCell on a PrivateUse1 device calls it"),
    Case("conv3d", ["aten::convolution", "aten::convolution_overrideable"], _conv3d),
    Case("slow_conv3d_forward", ["aten::slow_conv3d_forward"], _slow_conv3d),
    Case("slow_conv_dilated2d", ["aten::slow_conv_dilated2d"], _slow_conv_dilated2d),
    Case("_int_mm", ["aten::_int_mm"], _int_mm, check=EXACT),
    Case("_spdiags", ["aten::_spdiags"], _spdiags),
    Case("_upsample_lanczos2d_aa", ["aten::_upsample_lanczos2d_aa"], _lanczos),
    Case("_standard_gamma_grad", ["aten::_standard_gamma_grad"], _gamma_grad),
    Case("_dirichlet_grad", ["aten::_dirichlet_grad"], _dirichlet_grad),
    Case("_weight_int8pack_mm", ["aten::_weight_int8pack_mm"], _weight_int8pack),
    Case("_scaled_dot_product_flash_attention_for_cpu", ["aten::_scaled_dot_product_flash_attention_for_cpu"], _sdpa_cpu),
]

BY_NAME = {c.name: c for c in CASES}
