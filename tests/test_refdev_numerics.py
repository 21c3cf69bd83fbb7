"""refdev computes with the CPU kernels on aliased memory, so for the same
inputs its results are the CPU's bit for bit, including operators that also
have a composite decomposition (native_layer_norm: without a PrivateUse1
kernel PyTorch would run native_batch_norm + addcmul, which rounds
differently; that was the layer_norm mismatch of up to 9e-5).

In-process: every operator used is implemented in young-backend and full."""
import pytest
from support import refdev_with
import torch
import torch.nn.functional as F

from torchconform import refdev
from torchconform.refdev import profiles

NEEDED = ("aten::native_layer_norm", "aten::native_layer_norm_backward", "aten::sum.IntList_out",
          "aten::var.correction", "aten::var_mean.correction", "aten::mean.out", "aten::native_group_norm")


@pytest.fixture(scope="module")
def dev():
    return refdev_with(NEEDED)


def _t(*shape, seed=0, scale=10.0):
    g = torch.Generator().manual_seed(seed * 1000 + sum(shape))
    return torch.randn(*shape, generator=g) * scale


def assert_bitwise(a, b):
    b = b.cpu()
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(a, b), f"max difference {(a - b).abs().max().item()}"


LAYER_NORM_CASES = [
    # (input shape, normalized shape, eps): the one-element case differed by 1.2e-4 before
    ((1,), (1,), 1e-5),
    ((1, 2, 3), (1, 2, 3), 0.5),
    ((2, 2, 3), (2, 3), -0.5),
    ((3, 7, 33), (33,), 1e-5),
    ((4, 1023), (1023,), 1e-5),
    ((2, 5, 17), (5, 17), 1e-6),
]


@pytest.mark.parametrize("shape,normalized,eps", LAYER_NORM_CASES)
def test_layer_norm_forward_and_backward_bitwise(dev, shape, normalized, eps):
    x, w, b = _t(*shape), _t(*normalized, seed=1), _t(*normalized, seed=2)
    got = {}
    for device in ("cpu", dev):
        xs, ws, bs = (t.detach().to(device).requires_grad_() for t in (x, w, b))
        out = F.layer_norm(xs, normalized, ws, bs, eps)
        out.backward(torch.linspace(-2, 2, out.numel()).reshape(out.shape).to(device))
        got[device] = [out.detach(), xs.grad, ws.grad, bs.grad]
    for a, b_ in zip(got["cpu"], got[dev]):
        assert_bitwise(a, b_)


def test_layer_norm_noncontiguous_and_stats_bitwise(dev):
    base = _t(6, 40)
    x = base[:, 1::2]  # non-contiguous, odd storage offset
    assert not x.is_contiguous()
    ref = torch.ops.aten.native_layer_norm(x, [20], None, None, 1e-5)
    got = torch.ops.aten.native_layer_norm(base.to(dev)[:, 1::2], [20], None, None, 1e-5)
    for a, b in zip(ref, got):  # output, mean, rstd
        assert_bitwise(a, b)


def test_group_norm_bitwise(dev):
    x, w, b = _t(2, 6, 5, 3), _t(6, seed=1), _t(6, seed=2)
    assert_bitwise(F.group_norm(x, 3, w, b), F.group_norm(x.to(dev), 3, w.to(dev), b.to(dev)))


@pytest.mark.parametrize("n", [1, 3, 7, 17, 63, 65, 1023, 4099])
@pytest.mark.parametrize("offset", [0, 1, 5])
def test_reductions_over_odd_sizes_bitwise(dev, n, offset):
    """Vectorised reductions split head/tail by alignment: a slice at an odd
    offset must see the same split on refdev as on the CPU."""
    base = _t(n + offset, scale=100.0)
    x, d = base[offset:], base.to(dev)[offset:]
    assert_bitwise(x.sum(), d.sum())
    assert_bitwise(x.mean(), d.mean())
    assert_bitwise(torch.var(x, correction=0), torch.var(d, correction=0))
    if n > 1:
        for a, b in zip(torch.var_mean(x), torch.var_mean(d)):
            assert_bitwise(a, b)
    m = _t(3, n, seed=1)
    assert_bitwise(m.sum(dim=1), m.to(dev).sum(dim=1))
    assert_bitwise(m.var(dim=1, correction=0), m.to(dev).var(dim=1, correction=0))


def test_device_memory_is_64_byte_aligned_like_cpu(dev):
    """CPU tensors come from c10::alloc_cpu (64-byte aligned); so does refdev memory."""
    for n in (1, 3, 17, 1000):
        assert torch.empty(n, device=dev).data_ptr() % 64 == 0
        assert (torch.ones(n, device=dev) * 2).data_ptr() % 64 == 0  # a computed (adopted) result


def test_cpu_over_composite_ops_are_never_missing():
    """Operators with a CPU kernel and a composite one always get refdev's CPU-compute kernel."""
    ops = set(profiles.cpu_over_composite_ops())
    assert "aten::native_layer_norm" in ops and "aten::native_group_norm" in ops
    for name in profiles.available():
        info = refdev.describe(name)
        assert not ops & set(info["missing"]), name
        assert ops <= set(info["implemented"]) | set(info["fallback"]), name
