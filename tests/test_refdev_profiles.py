"""refdev profiles, the CLI over them, and the per-process behaviours (missing
op, CPU fallback, traits, renamed device) checked in fresh processes."""
import json
import os
import subprocess
import sys

import pytest

from torchconform.cli.main import main
from torchconform.refdev import build, profiles

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "refdev")
PROBE_PROFILE = os.path.join(FIXTURES, "probe.yaml")


def run_probe(**env):
    full_env = dict(os.environ, **env)
    proc = subprocess.run([sys.executable, os.path.join(FIXTURES, "probe.py")], capture_output=True, text=True,
                          env=full_env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("PROBE "))
    return json.loads(line[len("PROBE "):])


@pytest.fixture(scope="module")
def probe():
    return run_probe(TORCHCONFORM_REFDEV_PROFILE=PROBE_PROFILE, TORCHCONFORM_REFDEV_NAME="refdev")


def test_missing_op_raises_dispatcher_error(probe):
    assert probe["missing_error"].startswith("Could not run 'aten::cos.out' with arguments from the 'refdev' backend")


def test_fallback_op_warns_and_counts(probe):
    assert probe["fallback_result"] == [3, 4, 5]
    assert probe["fallback_device"].startswith("refdev")
    expected = ("The operator 'aten::nonzero' is not currently supported on the refdev backend and will fall back "
                "to run on the CPU. This may have performance implications.")
    assert any(w.startswith(expected) for w in probe["fallback_warnings"]), probe["fallback_warnings"]
    assert probe["fallback_counts"] == {"aten::nonzero": 2}
    assert probe["fallback_counts_after_reset"] == {}


def test_float64_as_float32_changes_float64_results(probe):
    dev, cpu = probe["f64_device"], probe["f64_cpu"]
    assert dev[0] != cpu[0] and abs(dev[0] - cpu[0]) < 1e-7     # 1/3 rounded through float32
    assert dev[1] == 1.0 and cpu[1] != 1.0                       # 1 + 1e-9 is not representable in float32
    assert probe["f32_device"][0] == pytest.approx(1 / 3, rel=1e-6)


def test_copies_noncontiguous_counts(probe):
    assert probe["copy_counts"].get("aten::mul.out", 0) >= 1


def test_renamed_neuron_device():
    out = run_probe(TORCHCONFORM_REFDEV_PROFILE=PROBE_PROFILE, TORCHCONFORM_REFDEV_NAME="neuron")
    assert out["name"] == "neuron" and out["backend"] == "neuron"
    assert out["device_str"] == "neuron:0" and out["has_module"] == 2
    assert out["roundtrip"] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert "from the 'neuron' backend" in out["missing_error"]
    assert any("supported on the neuron backend" in w for w in out["fallback_warnings"])


def test_young_backend_rule():
    resolved = profiles.resolve(profiles.load_profile("young-backend"))
    universe = len(profiles.op_universe())
    share = len(resolved.missing) / universe
    assert 0.10 <= share <= 0.30, share
    assert 1 <= len(resolved.fallback) <= 20
    # deterministic: same rule, same answer; helpers never missing
    again = profiles.resolve(profiles.load_profile("young-backend"))
    assert again.missing == resolved.missing
    for helper in ("aten::mul.out", "aten::all.all_out", "aten::cat.out", "aten::bitwise_and.Tensor_out",
                   "aten::fill_.Scalar", "aten::uniform_", "aten::masked_select", "aten::eq.Tensor_out"):
        assert helper in resolved.implemented, helper
    # all overloads of an operator share its fate
    missing_bases = {profiles.base_name(op) for op in resolved.missing}
    assert not any(profiles.base_name(op) in missing_bases for op in resolved.implemented)


def test_full_profile_misses_nothing():
    resolved = profiles.resolve(profiles.load_profile("full"))
    assert resolved.fallback == []
    # only operators that produce non-strided (sparse, quantized...) tensors are missing
    assert resolved.missing and all(profiles.NON_STRIDED.search(op) for op in resolved.missing)
    assert "aten::_to_sparse" in resolved.missing
    assert set(profiles.op_universe()) - set(resolved.missing) <= set(resolved.implemented)
    assert set(profiles.NATIVE_OPS) <= set(resolved.implemented)


def test_describe_json_shape(capsys):
    assert main(["refdev", "describe", "--json", "--profile", "young-backend"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {"profile", "device", "implemented", "fallback", "missing", "traits"} <= set(info)
    assert info["profile"] == "young-backend"
    for key in ("implemented", "fallback", "missing"):
        assert info[key] == sorted(info[key]) and all(op.startswith("aten::") for op in info[key])
    assert not set(info["implemented"]) & set(info["missing"])
    assert "aten::nonzero" in info["fallback"]
    assert info["traits"] == {"float64_as_float32": True, "copies_noncontiguous": True,
                              "unsupported_dtypes": ["complex64", "complex128"],
                              "compile_placeholder_ops": ["aten::atan2", "aten::erfinv"], "leaks_ops": ["aten::flip"]}


def test_describe_custom_profile(capsys):
    assert main(["refdev", "describe", "--json", "--profile", PROBE_PROFILE]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["profile"] == "probe"
    assert "aten::cos.out" in info["missing"] and "aten::cos.out" not in info["implemented"]
    assert info["traits"]["float64_as_float32"] is True


def _one_line_error(capsys, argv, *needles):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def test_unknown_profile_is_one_line_exit_2(capsys):
    _one_line_error(capsys, ["refdev", "describe", "--profile", "no-such-profile"], "no-such-profile", "young-backend")


def test_malformed_yaml_is_one_line_exit_2(capsys):
    broken = os.path.join(FIXTURES, "broken.yaml")
    _one_line_error(capsys, ["refdev", "describe", "--profile", broken], broken, "malformed YAML")


@pytest.mark.parametrize("text,needle", [
    ("- just\n- a list\n", "top level must be a mapping"),
    ("name: x\ncolour: blue\n", "unknown key(s) colour"),
    ("name: x\nmissing: {share_percent: 300}\n", "share_percent"),
    ("name: x\nfallback: {ops: [nonzero]}\n", "'nonzero' is not an operator name"),
    ("name: x\ntraits: {fast: true}\n", "unknown trait 'fast'"),
])
def test_bad_profile_content(tmp_path, capsys, text, needle):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    _one_line_error(capsys, ["refdev", "describe", "--profile", str(path)], str(path), needle)


def test_no_compiler_is_one_line_error(tmp_path):
    env = dict(os.environ, CXX=str(tmp_path / "no-such-c++"), TORCHCONFORM_REFDEV_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "torchconform", "refdev", "check"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no C++ compiler" in lines[0] and "install" in lines[0], proc.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_build_key_depends_on_torch_version(monkeypatch):
    import torch

    compiler = build.find_compiler() or "/usr/bin/c++"
    key = build.build_key(compiler)
    assert build.build_key(compiler) == key
    monkeypatch.setattr(torch, "__version__", "0.0.0-other")
    assert build.build_key(compiler) != key


def test_young_backend_opinfo_slice_names_the_op_under_test():
    """On young-backend, an OpInfo whose operator is missing fails naming that
    operator (not a helper that make_tensor / assert_close needs), and an
    implemented one passes against CPU."""
    resolved = profiles.resolve(profiles.load_profile("young-backend"))
    missing_bases = {profiles.base_name(op) for op in resolved.missing}
    candidates = ["cos", "sin", "exp", "rsqrt", "lgamma", "acos", "asin", "tan", "sqrt", "trunc", "frac",
                  "log1p", "abs", "neg", "add", "mul", "sub", "sigmoid", "tanh", "floor"]
    wanted = {c: f"aten::{c}" in missing_bases for c in candidates}
    assert any(wanted.values()) and not all(wanted.values())
    env = dict(os.environ, TORCHCONFORM_REFDEV_PROFILE="young-backend", TORCHCONFORM_REFDEV_NAME="refdev")
    proc = subprocess.run([sys.executable, os.path.join(FIXTURES, "slice.py"), *candidates], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("SLICE "))[6:])
    for op, is_missing in wanted.items():
        status, missing_op, detail = out[op]
        if is_missing:
            assert status == "missing" and profiles.base_name(missing_op) == f"aten::{op}", (op, out[op])
        else:
            assert status == "pass", (op, out[op])
