"""Convolutions on refdev compute exactly like the CPU, forward and backward,
whichever path reaches them: aten::convolution directly (nn.Conv*, F.conv*),
or aten::_convolution, which picks the "Overrideable" backend for PrivateUse1
tensors and calls convolution_overrideable / convolution_backward_overrideable.

In-process tests use the process's profile (young-backend or full): every
operator used here is implemented in both.  The "missing together" case runs
in a fresh process with its own profile."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
from support import refdev_with
import torch
import torch.nn.functional as F

from torchconform import refdev
from torchconform.refdev import profiles
from torchconform.core.profile import GENERIC_MISSING_OP

NEEDED = (
    "aten::convolution", "aten::convolution_backward", "aten::convolution_overrideable",
    "aten::convolution_backward_overrideable", "aten::relu", "aten::add.out", "aten::mm.out", "aten::addmm.out",
    "aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d_backward", "aten::threshold_backward.grad_input",
)


@pytest.fixture(scope="module")
def dev():
    return refdev_with(NEEDED)


def _leaves(tensors, device):
    """Same values on ``device``, as fresh autograd leaves where the CPU one is floating point."""
    out = []
    for t in tensors:
        if t is None:
            out.append(None)
            continue
        c = t.detach().to(device)
        out.append(c.requires_grad_() if c.is_floating_point() else c)
    return out


def assert_same_on_both(dev, fn, *tensors):
    """fn(*tensors) and its gradients (w.r.t. every float input) are bitwise equal on CPU and refdev."""
    results = {}
    for device in ("cpu", dev):
        leaves = _leaves(tensors, device)
        out = fn(*leaves)
        grad_out = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape).to(device)
        out.backward(grad_out)
        results[device] = [out.detach().cpu()] + [t.grad.cpu() for t in leaves if t is not None]
    assert len(results["cpu"]) == len(results[dev])
    for i, (a, b) in enumerate(zip(results["cpu"], results[dev])):
        assert b.shape == a.shape, i
        assert torch.equal(a, b), f"result {i} differs by {(a - b).abs().max().item()}"


def _t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g)


CONV2D_CASES = [
    # (input shape, weight shape, kwargs)
    ((2, 4, 9, 10), (6, 4, 3, 3), dict(stride=1, padding=0)),
    ((2, 4, 9, 10), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)),
    ((1, 6, 11, 11), (6, 1, 5, 5), dict(padding=2, groups=6)),  # depthwise (convnext)
    ((1, 3, 16, 16), (8, 3, 4, 4), dict(stride=4)),              # patch embedding (vit)
    ((2, 4, 7, 7), (5, 4, 2, 2), dict(padding="same", dilation=2)),
]


@pytest.mark.parametrize("x_shape,w_shape,kwargs", CONV2D_CASES)
def test_f_conv2d_matches_cpu(dev, x_shape, w_shape, kwargs):
    bias = _t(w_shape[0], seed=3)
    assert_same_on_both(dev, lambda x, w, b: F.conv2d(x, w, b, **kwargs), _t(*x_shape), _t(*w_shape, seed=1), bias)


def test_nn_conv2d_module_matches_cpu(dev):
    torch.manual_seed(0)
    cpu_mod = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, dilation=1, groups=1)
    dev_mod = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1).to(dev)
    dev_mod.load_state_dict(cpu_mod.state_dict())
    x = _t(2, 3, 13, 12)
    grads = {}
    for device, mod in (("cpu", cpu_mod), (dev, dev_mod)):
        xi = x.detach().to(device).requires_grad_()
        out = mod(xi)
        out.square().sum().backward()
        grads[device] = [out.detach().cpu(), xi.grad.cpu(), mod.weight.grad.cpu(), mod.bias.grad.cpu()]
    for a, b in zip(grads["cpu"], grads[dev]):
        assert torch.equal(a, b)


def test_conv1d_and_conv3d_match_cpu(dev):
    assert_same_on_both(dev, lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=3, dilation=2, groups=2),
                        _t(2, 4, 31), _t(6, 2, 5, seed=1), _t(6, seed=2))
    assert_same_on_both(dev, lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=1, groups=1),
                        _t(1, 2, 5, 6, 7), _t(3, 2, 3, 3, 2, seed=1), _t(3, seed=2))


def test_conv_transpose2d_matches_cpu(dev):
    assert_same_on_both(dev, lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1,
                                                                groups=2),
                        _t(2, 4, 5, 6), _t(4, 3, 3, 3, seed=1), _t(6, seed=2))


def _convolution_args(transposed=False, groups=1):
    return dict(stride=[2, 1], padding=[1, 0], dilation=[1, 2], transposed=transposed, output_padding=[0, 0],
                groups=groups)


def test_underscore_convolution_reaches_overrideable_and_matches_cpu(dev):
    """aten::_convolution on PrivateUse1 tensors calls convolution_overrideable:
    before refdev registered it, this raised 'convolution_overrideable not implemented'."""
    a = _convolution_args(groups=2)

    def fn(x, w, b):
        return torch.ops.aten._convolution(x, w, b, a["stride"], a["padding"], a["dilation"], a["transposed"],
                                           a["output_padding"], a["groups"], False, False, True, True)

    assert_same_on_both(dev, fn, _t(2, 4, 9, 9), _t(6, 2, 3, 3, seed=1), _t(6, seed=2))


@pytest.mark.parametrize("transposed", [False, True])
def test_overrideable_ops_forward_and_backward_match_cpu(dev, transposed):
    """convolution_overrideable's gradient is convolution_backward_overrideable
    (derivatives.yaml), so backward exercises the second hook too."""
    a = _convolution_args(transposed=transposed)
    w_shape = (4, 3, 3, 3)  # (in, out, kH, kW) when transposed, (out, in, ...) otherwise
    x = _t(2, 4 if transposed else 3, 7, 8)

    def on_dev(x, w, b):
        return torch.ops.aten.convolution_overrideable(x, w, b, *a.values())

    def on_cpu(x, w, b):  # the CPU has no kernel for the hook; convolution is what it stands for
        return torch.ops.aten.convolution(x, w, b, *a.values())

    results = []
    for device, fn in (("cpu", on_cpu), (dev, on_dev)):
        leaves = _leaves([x, _t(*w_shape, seed=1), _t(3 if transposed else 4, seed=2)], device)
        out = fn(*leaves)
        out.backward(torch.ones_like(out))
        results.append([out.detach().cpu()] + [t.grad.cpu() for t in leaves])
    for a_, b_ in zip(*results):
        assert torch.equal(a_, b_)


def test_backward_overrideable_output_mask(dev):
    """Unrequested gradients stay undefined; a requested bias gradient is computed."""
    a = _convolution_args()
    go, x, w = _t(2, 5, 4, 4), _t(2, 3, 7, 8, seed=1), _t(5, 3, 3, 3, seed=2)
    ref = torch.ops.aten.convolution_backward(go, x, w, [5], *a.values(), [True, True, True])
    for mask in ([True, False, False], [False, True, True], [True, True, True]):
        got = torch.ops.aten.convolution_backward_overrideable(go.to(dev), x.to(dev), w.to(dev), *a.values(), mask)
        for want, r, g in zip(mask, ref, got):
            if want:
                assert g.device.type == dev and torch.equal(g.cpu(), r)
            else:
                assert g is None


class _Block(torch.nn.Module):
    """A small resnet-like block: conv-relu-grouped conv, a strided 1x1 shortcut, pool, linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.shortcut = torch.nn.Conv2d(3, 8, 1, stride=2, bias=False)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = self.conv2(torch.relu(self.conv1(x)))
        y = torch.relu(y + self.shortcut(x))
        return self.head(F.adaptive_avg_pool2d(y, 1).flatten(1))


def test_resnet_like_block_matches_cpu(dev):
    torch.manual_seed(1)
    cpu_block = _Block()
    dev_block = _Block().to(dev)
    dev_block.load_state_dict(cpu_block.state_dict())
    x = _t(2, 3, 16, 16)
    got = {}
    for device, block in (("cpu", cpu_block), (dev, dev_block)):
        out = block(x.to(device))
        out.sum().backward()
        got[device] = [out.detach().cpu()] + [p.grad.cpu() for p in block.parameters()]
    assert len(got["cpu"]) == 8
    from torchconform import refdev

    copies = refdev.describe()["traits"]["copies_noncontiguous"]
    for a, b in zip(got["cpu"], got[dev]):
        if copies:  # a contiguous copy of a transposed weight changes the kernel's summation order
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
        else:
            assert torch.equal(a, b)


def test_describe_pairs_overrideable_with_convolution():
    for name in profiles.available():
        info = refdev.describe(name)
        for hook, partner in profiles.PAIRED_OPS.items():
            kinds = [k for k in ("implemented", "fallback", "missing") if hook in info[k]]
            assert kinds == [k for k in ("implemented", "fallback", "missing") if partner in info[k]], (name, hook)
            assert len(kinds) == 1


def test_missing_convolution_is_missing_together_and_fails_honestly(tmp_path):
    """A profile without convolution lacks the hooks too, and conv2d fails with
    PyTorch's own error naming convolution_overrideable (the classifier's missing-op pattern)."""
    prof = tmp_path / "noconv.yaml"
    prof.write_text("name: noconv\nmissing:\n  ops: [aten::convolution, aten::convolution_backward]\n")
    script = textwrap.dedent("""
        import json, torch
        import torch.nn.functional as F
        from torchconform import refdev
        dev = refdev.load()
        info = refdev.describe()
        out = {"missing": [op for op in info["missing"] if "convolution" in op]}
        x, w = torch.ones(1, 1, 3, 3, device=dev), torch.ones(1, 1, 2, 2, device=dev)
        for label, call in (("conv2d", lambda: F.conv2d(x, w)),
                            ("_convolution", lambda: torch.ops.aten._convolution(
                                x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, False, False, True, True))):
            try:
                call()
                out[label] = None
            except (RuntimeError, NotImplementedError) as exc:
                out[label] = str(exc).splitlines()[0]
        print("RESULT " + json.dumps(out))
    """)
    env = dict(os.environ, TORCHCONFORM_REFDEV_PROFILE=str(prof), TORCHCONFORM_REFDEV_NAME="refdev")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    assert set(result["missing"]) >= {"aten::convolution", "aten::convolution_backward",
                                      "aten::convolution_overrideable", "aten::convolution_backward_overrideable"}
    for label in ("conv2d", "_convolution"):
        assert result[label] and "convolution_overrideable not implemented" in result[label], result
        assert any(re.search(p, result[label]) for p in GENERIC_MISSING_OP), result[label]
