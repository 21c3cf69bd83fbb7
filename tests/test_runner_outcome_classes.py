"""The outcome classes refdev's young-backend profile produces from device-level
truth (no declared results): an unsupported dtype the device refuses, placeholder
outputs of refdev's compile backend, and a leaking kernel caught by the ops suite's
teardown memory check.  Each on a tiny --tc-ops selection; the full profile has
none of them."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import OPS_SUITE, REPO, by_name, child_env, run_pytest  # noqa: E402

from torchconform.core.classify import classify_text  # noqa: E402
from torchconform.core.profile import load_profile  # noqa: E402

# add: complex64 is in the quick rule for it; atan2: a compile placeholder op of
# young-backend; flip: young-backend's leaking operator.  -k keeps it to seconds.
OPS = "add,atan2,flip"
KEYWORD = ("compare_cpu_add_refdev_complex64 or compile_compare_cpu_atan2 or compare_cpu_flip_refdev_float32 "
           "or compile_compare_cpu_add")


def _run(tmp_path, profile):
    return run_pytest([OPS_SUITE, "--tc-device", "refdev", "--tc-ops", OPS, "-k", KEYWORD],
                      tmp_path, env=child_env(TORCHCONFORM_REFDEV_PROFILE=profile))


@pytest.fixture(scope="module")
def young(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("young"), "young-backend")


def test_unsupported_dtype_comes_from_the_device(young):
    proc, _, outcomes = young
    o = by_name(outcomes)["test_compare_cpu_add_refdev_complex64"]
    assert (o.outcome, o.kind, o.dtype) == ("skip_backend", "unsupported_dtype", "complex64"), proc.stdout[-3000:]
    assert "refdev does not support dtype complex64 (profile young-backend)" in o.message


def test_placeholder_compile_is_not_executed(young):
    proc, _, outcomes = young
    got = by_name(outcomes)
    o = got["test_compile_compare_cpu_atan2_refdev_float32"]
    assert (o.outcome, o.kind) == ("skip_backend", "not_executed"), proc.stdout[-3000:]
    assert "aten::atan2" in o.message and "outputs are placeholders" in o.message
    # a graph without a placeholder op compiles and computes through the same backend
    add = got["test_compile_compare_cpu_add_refdev_float32"]
    assert add.outcome == "pass" and add.message.startswith("compiled: backend=refdev "), add.message


def test_leaking_kernel_is_a_teardown_error(young):
    proc, _, outcomes = young
    o = by_name(outcomes)["test_compare_cpu_flip_refdev_float32"]
    assert o.outcome == "error", proc.stdout[-3000:]
    assert "device memory leak" in o.message and "aten::flip" in o.message, o.message
    # the compiled graph calls the same kernel: a leak there too
    assert by_name(outcomes)["test_compile_compare_cpu_flip_refdev_float32"].outcome == "error"


def test_full_profile_has_none_of_them(tmp_path):
    proc, _, outcomes = _run(tmp_path, "full")
    got = {name: o.outcome for name, o in by_name(outcomes).items()}
    assert got == {
        "test_compare_cpu_add_refdev_complex64": "pass",
        "test_compile_compare_cpu_atan2_refdev_float32": "pass",
        "test_compile_compare_cpu_add_refdev_float32": "pass",
        "test_compare_cpu_flip_refdev_float32": "pass",
        "test_compile_compare_cpu_flip_refdev_float32": "pass",  # also picked by -k (substring)
    }, proc.stdout[-3000:]


def test_describe_json_shows_the_traits():
    def traits(profile):
        proc = subprocess.run([sys.executable, "-m", "torchconform", "refdev", "describe", "--json", "--profile", profile],
                              cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)["traits"]

    young = traits("young-backend")
    assert young["unsupported_dtypes"] == ["complex64", "complex128"]
    assert young["compile_placeholder_ops"] == ["aten::atan2", "aten::erfinv"]
    assert young["leaks_ops"] == ["aten::flip"]
    full = traits("full")
    assert full["unsupported_dtypes"] == full["compile_placeholder_ops"] == full["leaks_ops"] == []


def test_refdev_profile_patterns_classify_rendered_text():
    # the same verdicts from rendered text (JUnit ingest), through the backend profile's patterns
    profile = load_profile("refdev")
    v = classify_text("E   RuntimeError: refdev does not support dtype complex128 (profile young-backend)", profile)
    assert (v.outcome, v.kind) == ("skip_backend", "unsupported_dtype") and "complex128" in v.message
    v = classify_text("UserWarning: refdev (profile p): graph with aten::erfinv compiled without device execution; "
                      "outputs are placeholders (zero-filled)\nAssertionError: Tensor-likes are not close!", profile)
    assert (v.outcome, v.kind) == ("skip_backend", "not_executed") and "aten::erfinv" in v.message
    # the generic profile knows neither message: a plain failure
    assert classify_text("RuntimeError: refdev does not support dtype complex64 (profile x)").outcome == "fail"


def test_refdev_device_level_behaviour(tmp_path):
    # In a child process: the device's own answers, without the runner.
    code = r"""
import json, warnings, torch
from torchconform import refdev
d = refdev.load()
out = {}
try:
    torch.ones(2, dtype=torch.complex64).to(d)
except RuntimeError as e:
    out["dtype"] = str(e)
before = torch.refdev.memory_allocated()
y = torch.arange(4., device=d).flip(0); del y
torch.refdev.empty_cache()
out["leaked"] = torch.refdev.memory_allocated() - before
out["stat"] = torch.refdev.memory_stats()["leaked_bytes.all.current"]
f = torch.compile(lambda a, b: torch.atan2(a, b), backend="refdev")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    r = f(torch.ones(3, device=d), torch.ones(3, device=d))
out["placeholder"] = [r.device.type, r.cpu().tolist(), [str(x.message) for x in w]]
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=child_env(TORCHCONFORM_REFDEV_PROFILE="young-backend"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["dtype"] == "refdev does not support dtype complex64 (profile young-backend)"
    # empty_cache does not hide a leak; the stat names it
    assert out["leaked"] == 4096 and out["stat"] == 4096
    device, values, messages = out["placeholder"]
    assert device == "refdev" and values == [0.0, 0.0, 0.0]
    assert any("compiled without device execution; outputs are placeholders" in m for m in messages), messages


@pytest.mark.parametrize("traits,needle", [
    ("{unsupported_dtypes: [complex32x]}", "'complex32x' is not a torch dtype name"),
    ("{unsupported_dtypes: complex64}", "must be a list of dtype names"),
    ("{compile_placeholder_ops: [atan2]}", "'atan2' is not an operator name"),
    ("{leaks_ops: [aten::flip, 3]}", "'traits.leaks_ops' must be a list"),
])
def test_bad_list_traits_are_user_errors(tmp_path, traits, needle):
    from torchconform.errors import UserError
    from torchconform.refdev import profiles

    path = tmp_path / "p.yaml"
    path.write_text(f"name: p\ntraits: {traits}\n")
    with pytest.raises(UserError, match="fix the file") as info:
        profiles.load_profile(str(path))
    assert needle in str(info.value) and "\n" not in str(info.value)
