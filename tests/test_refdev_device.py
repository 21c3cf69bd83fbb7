"""Device semantics of refdev, in this process (whatever profile the process
loads: only always-on operators are used here)."""
import pytest
import torch

from torchconform import refdev


@pytest.fixture(scope="module")
def dev():
    return refdev.load()


def test_load_is_idempotent(dev):
    assert refdev.load() == dev
    assert torch._C._get_privateuse1_backend_name() == dev
    assert getattr(torch, dev).is_available()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool, torch.complex64])
def test_round_trip(dev, dtype):
    cpu = torch.testing.make_tensor((4, 5), dtype=dtype, device="cpu")
    name = str(dtype).replace("torch.", "")
    if name in refdev.describe()["traits"]["unsupported_dtypes"]:
        # the profile's device cannot hold this dtype (young-backend: no complex numbers)
        with pytest.raises(RuntimeError, match=f"does not support dtype {name} "):
            cpu.to(dev)
        return
    moved = cpu.to(dev)
    assert moved.device.type == dev
    back = moved.cpu()
    assert back.device.type == "cpu"
    assert torch.equal(back, cpu)
    # the device copy is its own memory, not an alias of the CPU tensor
    cpu.zero_()
    assert not torch.equal(moved.cpu(), cpu) or not back.any()


def test_views_alias_storage(dev):
    x = torch.arange(12.0, device=dev).reshape(3, 4)
    views = [x.view(12), x[1:], x.t(), x.unfold(1, 2, 2), x.as_strided((2, 2), (4, 1), 1), x.reshape(4, 3)]
    for v in views:
        assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        assert v._base is x or v._base is x._base
    x[1, 1] = 100.0
    assert x.view(12)[5].item() == 100.0
    assert x.t()[1, 1].item() == 100.0


def test_in_place_on_a_view_writes_the_base(dev):
    x = torch.zeros(3, 4, device=dev)
    row = x[1]
    row.add_(5)
    col = x[:, 2]
    col.mul_(3)
    expected = torch.zeros(3, 4)
    expected[1] += 5
    expected[:, 2] *= 3
    assert torch.equal(x.cpu(), expected)


def test_out_with_resize(dev):
    a = torch.arange(6.0, device=dev).reshape(2, 3)
    out = torch.empty(0, device=dev)
    result = torch.add(a, a, out=out)
    assert result is out
    assert out.shape == (2, 3) and out.device.type == dev
    assert torch.equal(out.cpu(), torch.arange(6.0).reshape(2, 3) * 2)
    # a second call into an out tensor that is already big enough keeps its storage
    ptr = out.data_ptr()
    torch.mul(a, 2, out=out)
    assert out.data_ptr() == ptr


def test_autograd(dev):
    a_cpu = torch.randn(3, 4, dtype=torch.float64)
    a = a_cpu.to(dev).requires_grad_()
    b = torch.randn(3, 4, dtype=torch.float64).to(dev)
    loss = ((a * b + a) * a).sum()
    loss.backward()
    expected = (2 * a_cpu * b.cpu() + 2 * a_cpu)
    assert a.grad.device.type == dev
    assert torch.allclose(a.grad.cpu(), expected)


def test_generator(dev):
    g = torch.Generator(device=dev)
    assert g.device.type == dev
    g.manual_seed(1234)
    first = torch.empty(8, device=dev).uniform_(generator=g).cpu()
    g.manual_seed(1234)
    second = torch.empty(8, device=dev).uniform_(generator=g).cpu()
    assert torch.equal(first, second)
    module = getattr(torch, dev)
    module.manual_seed(7)
    r1 = torch.rand(5, device=dev).cpu()
    module.manual_seed(7)
    r2 = torch.rand(5, device=dev).cpu()
    r3 = torch.rand(5, device=dev).cpu()
    assert torch.equal(r1, r2) and not torch.equal(r2, r3)
    state = module.get_rng_state()
    r4 = torch.rand(5, device=dev).cpu()
    module.set_rng_state(state)
    assert torch.equal(torch.rand(5, device=dev).cpu(), r4)


def test_aot_eager_forward_and_backward(dev):
    def f(x, y):
        return ((x * y + x) * 2).sum()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    x_cpu = torch.randn(5)
    x = x_cpu.to(dev).requires_grad_()
    y = torch.randn(5).to(dev)
    out = compiled(x, y)
    assert out.device.type == dev
    assert torch.allclose(out.cpu(), f(x_cpu, y.cpu()))
    out.backward()
    assert torch.allclose(x.grad.cpu(), 2 * (y.cpu() + 1))


def test_second_device(dev):
    module = getattr(torch, dev)
    assert module.device_count() >= 2
    x = torch.ones(4, device=f"{dev}:1")
    assert x.device.index == 1
    y = x + x
    assert y.device.index == 1
    z = y.to(f"{dev}:0")
    assert z.device.index == 0 and torch.equal(z.cpu(), torch.full((4,), 2.0))
    with module.device(1):
        assert module.current_device() == 1
        assert torch.empty(1, device=dev).device.index == 1
    assert module.current_device() == 0


def test_memory_stats_move(dev):
    module = getattr(torch, dev)
    before = module.memory_allocated(1)
    module.reset_peak_memory_stats(1)
    big = torch.empty(1 << 20, dtype=torch.uint8, device=f"{dev}:1")
    assert module.memory_allocated(1) >= before + (1 << 20)
    assert module.max_memory_allocated(1) >= before + (1 << 20)
    del big
    assert module.memory_allocated(1) == before
    assert module.max_memory_allocated(1) >= before + (1 << 20)
    assert module.memory_stats(1)["allocated_bytes.all.current"] == before


def test_describe_of_loaded_profile(dev):
    info = refdev.describe()
    assert info["device"] == dev
    assert "aten::mul.out" in info["implemented"]
    assert "aten::empty.memory_format" in info["implemented"]


def test_autocast(dev):
    a = torch.randn(4, 4, device=dev)
    with torch.autocast(dev, dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16      # matmul-like ops run in lower precision
        assert (a + a).dtype == torch.float32       # the rest falls through unchanged


def test_refdev_check_command(dev, capsys):
    from torchconform.cli.main import main

    assert main(["refdev", "check", "--ops", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"device   {dev} x") and "opinfo" in out and out.rstrip().endswith("ok")


@pytest.mark.parametrize("var,value,needle", [
    ("TORCHCONFORM_REFDEV_DEVICES", "zero", "whole number from 1 to 16"),
    ("TORCHCONFORM_REFDEV_DEVICES", "17", "whole number from 1 to 16"),
    ("TORCHCONFORM_REFDEV_NAME", "Not A Name", "lower-case identifier"),
])
def test_bad_environment_is_a_user_error(monkeypatch, var, value, needle):
    from torchconform.errors import UserError

    monkeypatch.setenv(var, value)
    with pytest.raises(UserError, match=needle):
        refdev._device_count() if var.endswith("DEVICES") else refdev.device_name()
