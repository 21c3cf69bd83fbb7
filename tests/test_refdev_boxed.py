"""refdev's boxed mode (``fallback: {mode: boxed}``, the shipped boxed-backend profile):
refdev behaves like a real PrivateUse1 backend that registers PyTorch's standard boxed CPU
fallback.  Checked in fresh processes (one profile per process) against the dispatcher
itself and against the hidden ground truth ``refdev.boxed_fallback_served()``."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from torchconform.errors import UserError
from torchconform.refdev import profiles

CHILD = textwrap.dedent("""
    import json, warnings
    import torch
    from torchconform import refdev
    dev = refdev.load()
    out = {"profile": refdev.describe()["profile"]}
    PU1 = torch._C.DispatchKey.PrivateUse1
    out["has_backend_fallback"] = torch._C._dispatch_has_backend_fallback(PU1)
    def pu1_line(op):
        return next((l for l in torch._C._dispatch_dump_table(op).splitlines() if l.startswith("PrivateUse1:")), "")
    out["table"] = {op: pu1_line(op) for op in ("aten::nonzero", "aten::sort.values_stable", "aten::add.out")}

    refdev.boxed_fallback_served(True)
    x = torch.tensor([3.0, 0.0, 1.0, 2.0, 0.0, 5.0])
    def same(got, want):
        return {"equal": torch.equal(got.cpu(), want), "device": str(got.device)}
    def cos_out():                                # an out= overload the fallback serves
        c = torch.empty(6, device=dev)
        torch.cos(x.to(dev), out=c)
        return same(c, torch.cos(x))
    def hardtanh_():                              # an in-place one
        h, want = x.to(dev).clone(), x.clone()
        torch.ops.aten.hardtanh_(h, 0.5, 2.5)
        torch.ops.aten.hardtanh_(want, 0.5, 2.5)
        return same(h, want)
    def sort():
        s = torch.sort(x.to(dev))
        want = torch.sort(x)
        return {"values": torch.equal(s.values.cpu(), want.values), "indices": torch.equal(s.indices.cpu(), want.indices),
                "device": str(s.values.device)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name, call in (("nonzero", lambda: same(torch.nonzero(x.to(dev)), torch.nonzero(x))),
                           ("sort", sort), ("cos_out", cos_out), ("hardtanh_", hardtanh_)):
            try:
                out[name] = call()
            except NotImplementedError as exc:     # a counted profile may lack the operator
                out[name] = str(exc).splitlines()[0]
        added = x.to(dev) + 1
    out["added"] = added.cpu().tolist()
    out["warnings"] = [str(w.message) for w in caught if "fall back" in str(w.message)]
    out["served"] = refdev.boxed_fallback_served()

    refdev.boxed_fallback_served(True)
    try:
        torch.ops.aten._thnn_fused_gru_cell(torch.ones(2, 6, device=dev), torch.ones(2, 6, device=dev),
                                            torch.ones(2, 2, device=dev))
        out["no_cpu_kernel"] = None
    except NotImplementedError as exc:
        out["no_cpu_kernel"] = str(exc).splitlines()[0]
    out["served_after_failure"] = refdev.boxed_fallback_served(True)
    out["served_after_reset"] = refdev.boxed_fallback_served()

    import torch.nn.functional as F
    try:
        got = F.conv2d(torch.ones(1, 1, 3, 3, device=dev), torch.ones(1, 1, 2, 2, device=dev))
        out["conv2d"] = torch.equal(got.cpu(), F.conv2d(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 2, 2)))
    except Exception as exc:
        out["conv2d"] = type(exc).__name__ + ": " + str(exc).splitlines()[0]

    mod = getattr(torch, dev)
    out["module"] = {k: hasattr(mod, k) for k in ("memory_stats", "leak_counts", "leak_report", "memory_allocated",
                                                   "device_count", "manual_seed")}
    out["fallback_counts"] = refdev.fallback_counts()
    refdev.reset_fallback_counts()
    out["fallback_counts_after_reset"] = refdev.fallback_counts()

    info = refdev.describe()
    out["describe"] = {k: info[k] for k in ("fallback_mode", "implemented", "fallback", "missing", "dispatch_keys")}
    # An independent recomputation of describe()'s rule through torch's own dispatcher API.
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    composite = ("AutogradPrivateUse1", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                 "CompositeExplicitAutogradNonFunctional")
    served = [n for n in torch._C._dispatch_get_all_op_names()
              if n.startswith("aten::") and not has(n, "PrivateUse1") and not any(has(n, k) for k in composite)]
    out["python_fallback"] = sorted(n for n in served if has(n, "CPU"))
    out["python_missing"] = sorted(n for n in served if not has(n, "CPU"))
    out["pu1_kernels"] = sorted(n for n in torch._C._dispatch_get_all_op_names()
                                if n.startswith("aten::") and has(n, "PrivateUse1"))
    print("BOXED " + json.dumps(out))
""")


def run_child(profile: str) -> dict:
    env = dict(os.environ, TORCHCONFORM_REFDEV_PROFILE=profile, TORCHCONFORM_REFDEV_NAME="refdev")
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("BOXED "))
    return json.loads(line[len("BOXED "):])


@pytest.fixture(scope="module")
def boxed():
    out = run_child("boxed-backend")
    assert out["profile"] == "boxed-backend"
    return out


@pytest.fixture(scope="module")
def counted():
    return run_child("young-backend")


def test_fallback_ops_compute_through_pytorchs_fallback_silently(boxed):
    for name in ("nonzero", "cos_out", "hardtanh_"):
        assert boxed[name] == {"equal": True, "device": "refdev:0"}, (name, boxed[name])
    assert boxed["sort"] == {"values": True, "indices": True, "device": "refdev:0"}
    assert boxed["added"] == [4.0, 1.0, 2.0, 3.0, 1.0, 6.0]
    assert boxed["warnings"] == []          # PyTorch's cpu_fallback warns about nothing


def test_served_table_names_exactly_the_fallback_ops(boxed):
    served = boxed["served"]
    for op in ("aten::nonzero", "aten::sort.values_stable", "aten::cos.out", "aten::hardtanh_"):
        assert served.get(op, 0) >= 1, (op, served)
    # refdev's own kernels never reach the fallback
    assert "aten::add.out" not in served and "aten::add.Tensor" not in served
    kernels = set(boxed["pu1_kernels"])
    assert not kernels & set(served)
    assert set(served) <= set(boxed["describe"]["fallback"])


def test_dispatcher_shows_the_backend_fallback(boxed):
    assert boxed["has_backend_fallback"] is True
    for op in ("aten::nonzero", "aten::sort.values_stable"):
        line = boxed["table"][op]
        assert "boxed_fallback.cpp" in line and "[backend fallback]" in line, line
    add_out = boxed["table"]["aten::add.out"]
    assert "refdev/csrc/aten/control.cpp" in add_out and "[kernel]" in add_out
    assert boxed["describe"]["dispatch_keys"]["PrivateUse1"]["backend_fallback"] == "cpu_fallback"


def test_op_without_cpu_kernel_fails_inside_cpu_fallback(boxed):
    assert boxed["no_cpu_kernel"].startswith(
        "Could not run 'aten::_thnn_fused_gru_cell' with arguments from the 'CPU' backend"), boxed["no_cpu_kernel"]
    assert boxed["served_after_failure"] == {"aten::_thnn_fused_gru_cell": 1}
    assert boxed["served_after_reset"] == {}
    assert "aten::_thnn_fused_gru_cell" in boxed["describe"]["missing"]


def test_counters_are_hidden_like_a_real_backend(boxed):
    assert boxed["module"] == {"memory_stats": False, "leak_counts": False, "leak_report": False,
                               "memory_allocated": True, "device_count": True, "manual_seed": True}
    assert boxed["fallback_counts"] is None and boxed["fallback_counts_after_reset"] is None


def test_describe_ground_truth_is_the_dispatchers(boxed):
    info = boxed["describe"]
    assert info["fallback_mode"] == "boxed"
    # the dispatcher's picture, less what it offers but cannot run (torchconform/core/dispatch.py): ATen's
    # raising stubs and CPU kernels whose sparse result the fallback cannot move to refdev
    from torchconform.core.dispatch import RAISING_STUBS, SPARSE_RESULT_COMPRESSED, SPARSE_RESULT_COO

    sparse = SPARSE_RESULT_COO | SPARSE_RESULT_COMPRESSED
    assert info["fallback"] == [op for op in boxed["python_fallback"] if op not in sparse]
    assert info["missing"] == sorted(set(boxed["python_missing"]) | (sparse & set(boxed["python_fallback"]))
                                     | (RAISING_STUBS - set(info["implemented"])))
    assert info["fallback"] and info["missing"]
    assert "aten::nonzero" in info["fallback"] and "aten::sort.values_stable" in info["fallback"]
    # only the implemented set gets kernels: no per-operator fallback kernel
    assert info["dispatch_keys"]["PrivateUse1"]["kernels"] == info["implemented"]
    assert set(boxed["pu1_kernels"]) == set(info["implemented"])
    assert not set(info["implemented"]) & (set(info["fallback"]) | set(info["missing"]))


def test_describe_without_loading_agrees(boxed):
    """describe() of a boxed profile that is not loaded computes the same truth from the
    kernels the profile would register (this process may hold another refdev profile)."""
    from torchconform import refdev

    info = refdev.describe("boxed-backend")
    assert info["fallback"] == boxed["describe"]["fallback"]
    assert info["missing"] == boxed["describe"]["missing"]


def test_boxed_backend_has_young_backends_implemented_set():
    young = profiles.resolve(profiles.load_profile("young-backend"))
    boxed = profiles.resolve(profiles.load_profile("boxed-backend"))
    assert boxed.profile.boxed and not young.profile.boxed
    assert boxed.implemented == young.implemented
    assert set(boxed.without_kernel) == set(young.missing) | set(young.fallback)
    assert boxed.fallback == [] and boxed.missing == []


def test_counted_profiles_keep_their_own_fallback(counted):
    """young-backend (counted) registers no backend fallback and keeps its counters."""
    assert counted["has_backend_fallback"] is False
    assert "[backend fallback]" not in counted["table"]["aten::nonzero"]
    assert counted["served"] == {} and counted["served_after_failure"] == {}
    assert counted["fallback_counts"] == {"aten::nonzero": 1, "aten::sort.values_stable": 1}
    assert counted["fallback_counts_after_reset"] == {}
    assert counted["module"]["memory_stats"] and counted["module"]["leak_counts"]
    assert counted["nonzero"] == {"equal": True, "device": "refdev:0"}
    assert any("aten::nonzero" in w for w in counted["warnings"])
    assert counted["describe"]["fallback_mode"] == "counted"
    assert counted["no_cpu_kernel"].startswith("Could not run 'aten::_thnn_fused_gru_cell' with arguments from the "
                                               "'refdev' backend")


def test_convolution_hooks_registered_only_when_implemented(boxed, tmp_path):
    """boxed-backend implements convolution, so refdev registers the Overrideable hooks; a
    boxed profile without convolution registers neither, and conv2d fails in PyTorch's
    own convolution_overrideable composite (what a real backend without it shows)."""
    assert boxed["conv2d"] is True
    assert "aten::convolution_overrideable" in boxed["pu1_kernels"]
    path = tmp_path / "boxed-noconv.yaml"
    path.write_text("name: boxed-noconv\nfallback: {mode: boxed}\n"
                    "missing: {ops: [aten::convolution, aten::convolution_backward]}\n")
    noconv = run_child(str(path))
    assert noconv["profile"] == "boxed-noconv"
    for op in ("aten::convolution", "aten::convolution_overrideable", "aten::convolution_backward_overrideable"):
        assert op not in noconv["pu1_kernels"] and op not in noconv["describe"]["implemented"], op
    assert noconv["conv2d"].startswith("NotImplementedError: convolution_overrideable not implemented"), noconv["conv2d"]


@pytest.mark.parametrize("fallback, problem", [
    ("{mode: lazy}", "'fallback.mode' must be one of counted, boxed"),
    ("{mode: boxed, ops: [aten::nonzero]}", "'fallback.ops' has no meaning with 'fallback.mode: boxed'"),
])
def test_bad_fallback_mode_is_one_line_user_error(tmp_path, fallback, problem):
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: bad\nfallback: {fallback}\n")
    with pytest.raises(UserError) as info:
        profiles.load_profile(str(path))
    assert problem in str(info.value) and "\n" not in str(info.value)
