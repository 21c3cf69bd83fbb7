"""Six refdev defects a peer suite found on the young-backend profile (issue 29), each an
operator the census listed as working.  Each case runs on refdev and on the CPU in a fresh
child process (the profile is per process); the zero-tensor case, which segfaulted, runs
alone so that a crash fails only its own test."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

PRELUDE = textwrap.dedent("""
    import json, warnings
    import torch
    from torchconform import refdev
    warnings.simplefilter("ignore")
    dev = refdev.load()
    out = {}
    def case(name, call):
        try:
            out[name] = call()
        except Exception as exc:  # the child reports, the test judges
            out[name] = {"raised": type(exc).__name__ + ": " + str(exc).splitlines()[0]}
""")

CASES = textwrap.dedent("""
    # (b) a non-blocking copy to the host asks the hooks for pinned memory
    x = torch.arange(5.0, device=dev)
    def non_blocking():
        y = x.to("cpu", non_blocking=True)
        return {"values": y.tolist(), "pinned": y.is_pinned(), "device": str(y.device)}
    case("non_blocking", non_blocking)
    case("pin_memory", lambda: {"empty": torch.empty(3, pin_memory=True).is_pinned(),
                                "pinned": torch.ones(3).pin_memory().is_pinned(),
                                "plain": torch.ones(3).is_pinned()})

    # (c) composites that call a DispatchStub with the tensor's device type
    def kaiser(*args):
        got = torch.kaiser_window(*args, device=dev)
        want = torch.kaiser_window(*args)
        return {"equal": torch.equal(got.cpu(), want), "device": str(got.device)}
    case("kaiser", lambda: kaiser(7))
    case("kaiser_beta", lambda: kaiser(6, False, 4.5))
    def ldexp():
        m, e = torch.tensor([0.5, -1.25, 3.0]), torch.tensor([3, -2, 0], dtype=torch.int32)
        got = torch.ldexp(m.to(dev), e.to(dev))
        return {"equal": torch.equal(got.cpu(), torch.ldexp(m, e)), "device": str(got.device)}
    case("ldexp", ldexp)

    # (d) mode's values= overload is a composite that refuses devices other than CPU/CUDA/XPU
    data = torch.tensor([[1.0, 2.0, 2.0, 3.0], [4.0, 4.0, 1.0, 1.0]])
    def mode_out():
        values = torch.empty(0, device=dev)
        indices = torch.empty(0, dtype=torch.long, device=dev)
        torch.mode(data.to(dev), 1, out=(values, indices))
        want = torch.mode(data, 1)
        return {"values": torch.equal(values.cpu(), want.values), "indices": torch.equal(indices.cpu(), want.indices),
                "device": str(values.device)}
    case("mode_out", mode_out)
    case("mode", lambda: torch.equal(torch.mode(data.to(dev), 1).values.cpu(), torch.mode(data, 1).values))

    # (e) _batch_norm_no_update's composite calls batch_norm_cpu
    def bn_no_update():
        g = torch.Generator().manual_seed(0)
        inp, w, b = torch.randn(4, 3, 5, generator=g), torch.rand(3, generator=g), torch.rand(3, generator=g)
        rm, rv = torch.randn(3, generator=g), torch.rand(3, generator=g) + 0.5
        args = (0.1, 1e-5)
        want = torch.ops.aten._batch_norm_no_update(inp, w, b, rm, rv, *args)
        drm, drv = rm.to(dev), rv.to(dev)
        got = torch.ops.aten._batch_norm_no_update(inp.to(dev), w.to(dev), b.to(dev), drm, drv, *args)
        return {"output": torch.equal(got[0].cpu(), want[0]), "device": str(got[0].device),
                "stats_kept": torch.equal(drm.cpu(), rm) and torch.equal(drv.cpu(), rv)}
    case("bn_no_update", bn_no_update)

    # (f) an out= that overlaps a non-contiguous input: CPU rejects it
    def overlap(device):
        a = torch.zeros(6, 3, device=device)
        y = a[3:].t()                     # non-contiguous, inside a
        torch.cat([y, y], out=a)
    def overlap_add(device):
        x = torch.arange(9.0, device=device).view(3, 3)
        torch.add(x.t(), 1, out=x)
    for name, call in (("cat_overlap", overlap), ("add_overlap", overlap_add)):
        case(name + "_cpu", lambda: call("cpu"))
        case(name, lambda: call(dev))
    def copies_still_counted():
        refdev.reset_copy_counts()
        m = torch.ones(3, 4, device=dev)
        res = torch.empty(4, 3, device=dev)
        torch.mul(m.t(), 2, out=res)      # non-contiguous input, no overlap with out
        return {"counts": refdev.copy_counts(), "values": res.cpu().tolist()}
    case("copies_still_counted", copies_still_counted)
    info = refdev.describe()
    out["implemented"] = [op for op in info["implemented"]
                          if op.split(".")[0] in ("aten::kaiser_window", "aten::ldexp", "aten::mode",
                                                  "aten::_batch_norm_no_update")]
    print("DEFECTS " + json.dumps(out))
""")

ZERO = textwrap.dedent("""
    # (a) the CPU kernel's zero tensor has no memory; adopted as plain device memory it
    # handed the next kernel a null pointer
    before = torch.refdev.memory_allocated()
    z = torch._efficientzerotensor(2, 3, device=dev)
    held = torch.refdev.memory_allocated() - before
    out["zero"] = {"is_zero": z._is_zerotensor(), "device": str(z.device), "held": held, "read": z.cpu().tolist(),
                   "plus_one": (z + 1).cpu().tolist(), "sum": z.sum().item()}
    print("DEFECTS " + json.dumps(out))
""")


def run_child(body: str, profile: str = "young-backend"):
    env = dict(os.environ, TORCHCONFORM_REFDEV_PROFILE=profile, TORCHCONFORM_REFDEV_NAME="refdev")
    proc = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True, env=env,
                          timeout=300)
    return proc


def parse(proc) -> dict:
    assert proc.returncode == 0, f"child exited {proc.returncode}: {proc.stderr[-3000:]}"
    line = next(line for line in proc.stdout.splitlines() if line.startswith("DEFECTS "))
    return json.loads(line[len("DEFECTS "):])


@pytest.fixture(scope="module")
def cases():
    return parse(run_child(CASES))


def test_a_efficient_zero_tensor_reads_as_zeros():
    proc = run_child(ZERO)
    assert proc.returncode >= 0, f"the child died of signal {-proc.returncode} (segfault: -11)"
    zero = parse(proc)["zero"]
    assert zero["is_zero"] is True and zero["device"] == "refdev:0"
    assert zero["held"] == 0          # a zero tensor holds no device memory (as on CUDA)
    assert zero["read"] == [[0.0] * 3] * 2
    assert zero["plus_one"] == [[1.0] * 3] * 2 and zero["sum"] == 0.0


def test_b_non_blocking_copy_to_host_is_pinned(cases):
    assert cases["non_blocking"] == {"values": [0.0, 1.0, 2.0, 3.0, 4.0], "pinned": True, "device": "cpu"}
    assert cases["pin_memory"] == {"empty": True, "pinned": True, "plain": False}


@pytest.mark.parametrize("name", ["kaiser", "kaiser_beta", "ldexp"])
def test_c_stub_calling_composites_compute_like_cpu(cases, name):
    assert cases[name] == {"equal": True, "device": "refdev:0"}, cases[name]


def test_c_d_e_fixed_ops_are_implemented_in_describe(cases):
    assert {"aten::kaiser_window", "aten::kaiser_window.periodic", "aten::kaiser_window.beta", "aten::ldexp.Tensor",
            "aten::ldexp.out", "aten::mode", "aten::mode.values", "aten::_batch_norm_no_update"} <= set(cases["implemented"])


def test_d_mode_values_out_accepts_the_device(cases):
    assert cases["mode_out"] == {"values": True, "indices": True, "device": "refdev:0"}, cases["mode_out"]
    assert cases["mode"] is True


def test_e_batch_norm_no_update_computes_on_the_device(cases):
    assert cases["bn_no_update"] == {"output": True, "device": "refdev:0", "stats_kept": True}, cases["bn_no_update"]


@pytest.mark.parametrize("name", ["cat_overlap", "add_overlap"])
def test_f_overlapping_out_is_rejected_as_on_cpu(cases, name):
    cpu, device = cases[name + "_cpu"], cases[name]
    assert isinstance(cpu, dict) and "unsupported operation" in cpu["raised"], cpu
    assert device == cpu, (device, cpu)


def test_f_non_overlapping_inputs_are_still_copied(cases):
    got = cases["copies_still_counted"]
    assert got["counts"].get("aten::mul.out", 0) >= 1, got
    assert got["values"] == [[2.0] * 3] * 4
