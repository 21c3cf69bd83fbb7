"""The recorded truth about real third-party backends (bench/backends/*-truth.yaml), without
the backends: the files' shape, the evidence rules that made them (bench/backends/verdict.py),
the comparison bench/backends.py makes, and the backend profiles against the messages the
backends really gave."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import yaml

from torchconform.core.outcome import BACKEND_SKIP_KINDS, OUTCOMES
from torchconform.core.profile import load_profile

ROOT = Path(__file__).resolve().parent.parent
TRUTHS = sorted((ROOT / "bench" / "backends").glob("*-truth.yaml"))
EVIDENCE = {"native", "fallback", "fallback_no_cpu_kernel", "missing", "error", "crash"}
CENSUS = {"native", "autograd", "composite", "fallback", "missing", "unavailable"}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


verdict = _load("backends_verdict", ROOT / "bench" / "backends" / "verdict.py")
bench = _load("backends_bench", ROOT / "bench" / "backends.py")
compare = sys.modules["compare"]


def truth(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_both_backends_have_a_truth_file():
    assert {p.name for p in TRUTHS} >= {"torchvulkan-truth.yaml", "opencl-truth.yaml"}
    assert set(bench.BACKENDS) == {p.name[:-len("-truth.yaml")] for p in TRUTHS}


@pytest.mark.parametrize("path", TRUTHS, ids=lambda p: p.stem)
def test_truth_file_shape(path):
    doc = truth(path)
    assert doc["date"] == "2026-12-04"
    facts = doc["facts"]
    for key in ("device", "boxed_fallback", "own_aten_kernels", "memory_stats", "compile_backends_added",
                "c10d_backends_added", "dtypes"):
        assert key in facts, key
    ops = doc["operators"]
    assert len(ops) >= 40
    assert len({e["case"] for e in ops}) == len(ops)
    outcome_words = set(OUTCOMES) | {f"skip_backend/{k}" for k in BACKEND_SKIP_KINDS}
    for e in ops:
        assert e["evidence"] in EVIDENCE, e["case"]
        assert e["checked"] and e["date"] == "2026-12-04"
        if e["evidence"] in ("missing", "fallback_no_cpu_kernel"):
            assert re.fullmatch(r"aten::\w+(\.\w+)?", e["missing_op"]), e["case"]
        if e["evidence"] == "fallback":
            assert e["fallback_ops"], e["case"]
        for key in ("expect_ops_quick", "expect_ops_quick_cpu_samples"):
            if key in e:
                assert e["opinfo"], e["case"]
                assert e[key]["outcome"] in outcome_words, (e["case"], e[key])
        for op, status in e["census"].items():
            assert op.startswith("aten::") and status.split(" ")[0] in CENSUS, (e["case"], op, status)
        assert e["census_main"] in e["aten"] or e["census_main"] in e["census"]
    for m in doc.get("modules", []):
        assert m["expect"]["outcome"] in outcome_words


@pytest.mark.parametrize("path", TRUTHS, ids=lambda p: p.stem)
def test_every_class_of_evidence_is_sampled(path):
    """The sample is meant to exercise what the detector must tell apart on this backend."""
    doc = truth(path)
    seen = {e["evidence"] for e in doc["operators"]}
    assert {"native", "fallback"} <= seen
    if doc["facts"]["boxed_fallback"]:
        assert "fallback_no_cpu_kernel" in seen      # _thnn_fused_gru_cell has no CPU kernel
    else:
        assert "missing" in seen


def test_opencl_kernels_that_call_the_fallback_are_fallback_not_native():
    """torch-opencl registers add.out etc. as kernels that call the CPU fallback themselves."""
    doc = truth(ROOT / "bench" / "backends" / "opencl-truth.yaml")
    assert doc["facts"]["boxed_fallback"] is False
    add = next(e for e in doc["operators"] if e["case"] == "add")
    assert add["evidence"] == "fallback" and add["census"]["aten::add.out"] == "fallback"
    assert add["expect_ops_quick_cpu_samples"]["outcome"] == "pass_fallback"
    assert "aten::add.out" in doc["facts"]["per_op_fallback_kernels"]


def _record(outcome="ok", message="", parents=(), strict=None, device="vulkan", correct=True):
    call = {"outcome": outcome, "fallback_parents": list(parents)}
    if outcome == "raised":
        call["message"] = message
    else:
        call["correct"] = correct
    rec = {"device": device, "call": call, "aten": [], "dispatch": {}}
    if strict is not None:
        rec["strict"] = strict
    return rec


def test_derive_reads_each_kind_of_evidence():
    assert verdict.derive(_record())["evidence"] == "native"
    fb = verdict.derive(_record(parents=["aten::_int_mm"]))
    assert fb == {"evidence": "fallback", "fallback_ops": ["aten::_int_mm"], "correct": True}
    cpu = verdict.derive(_record("raised", "Could not run 'aten::_thnn_fused_gru_cell' with arguments from the "
                                           "'CPU' backend. This could be", ["aten::_thnn_fused_gru_cell"]))
    assert cpu["evidence"] == "fallback_no_cpu_kernel" and cpu["missing_op"] == "aten::_thnn_fused_gru_cell"
    # the same words without the fallback having run: the CPU reference failed, not the device
    assert verdict.derive(_record("raised", "Could not run 'aten::x' with arguments from the 'CPU' backend"))[
        "evidence"] == "error"
    miss = verdict.derive(_record("raised", "Could not run 'aten::exp.out' with arguments from the 'opencl' backend.",
                                  device="opencl"))
    assert miss == {"evidence": "missing", "missing_op": "aten::exp.out"}
    sparse = verdict.derive(_record("raised", "Could not run 'aten::_sparse_coo_tensor_with_dims_and_tensors' with "
                                              "arguments from the 'Sparsevulkan' backend", ["aten::_spdiags"]))
    assert sparse["evidence"] == "missing" and sparse["fallback_ops"] == ["aten::_spdiags"]
    hook = verdict.derive(_record("raised", "convolution_overrideable not implemented. You are likely triggering",
                                  device="opencl"))
    assert hook["missing_op"] == "aten::convolution_overrideable"
    assert verdict.derive(_record("raised", "as_strided: storage_offset is required"))["evidence"] == "error"


def test_derive_checks_the_strict_switch_against_the_profiler():
    said = {"outcome": "raised", "message": "torchvulkan [NOT IMPLEMENTED]: Silent fallback detected for operation: "
                                            "aten::_dirichlet_grad. Set TORCHVULKAN_STRICT=0 to disable strict mode."}
    agree = verdict.derive(_record(parents=["aten::_dirichlet_grad"], strict=said))
    assert agree["consistent"] is True and agree["fallback_ops"] == ["aten::_dirichlet_grad"]
    # strict mode objected, the profiler saw nothing: the sources disagree and the case needs a look
    assert verdict.derive(_record(strict=said))["consistent"] is False
    assert verdict.derive(_record(strict={"outcome": "ok"}))["consistent"] is True


def test_expect_ops_quick_from_opinfo_samples():
    rec = _record(device="opencl")
    rec["opinfo_float32"] = {
        "samples_on_device": {"outcome": "creation raised", "fallback_parents": [],
                              "message": "Could not run 'aten::uniform_' with arguments from the 'opencl' backend."},
        "samples_on_cpu": {"outcome": "ok", "fallback_parents": ["aten::add"], "samples": 3, "wrong_samples": 0}}
    assert verdict.expect_ops_quick(rec) == {"outcome": "skip_backend/missing_op", "missing_op": "aten::uniform_",
                                             "note": "sample creation"}
    assert verdict.expect_ops_quick(rec, "cpu") == {"outcome": "pass_fallback", "fallback_ops": ["aten::add"]}
    rec["opinfo_float32"]["samples_on_cpu"]["wrong_samples"] = 1
    assert verdict.expect_ops_quick(rec, "cpu")["outcome"] == "fail"


@pytest.mark.parametrize("slot,cpu,status", [
    ("kernel", True, "native"), ("backend fallback", True, "fallback"),
    ("backend fallback", False, "missing (fallback-without-cpu-kernel)"), ("default backend kernel", True, "composite"),
    ("math kernel", False, "composite"), ("none", True, "missing"), ("fallthrough", True, None)])
def test_census_status_of_a_slot(slot, cpu, status):
    assert verdict.census_status(slot, cpu) == status


def test_compare_tells_wrong_from_numeric_and_not_comparable():
    rec = {"outcome": "pass", "kind": "", "missing_op": "", "fallback_ops": [], "message": ""}
    assert compare.agrees({"outcome": "pass"}, rec)[0] == "right"
    assert compare.agrees({"outcome": "pass_fallback", "fallback_ops": ["aten::add"]}, rec)[0] == "wrong"
    assert compare.agrees({"outcome": "pass_fallback", "fallback_ops": ["aten::add"]},
                        dict(rec, outcome="pass_fallback", fallback_ops=["aten::add.out"]))[0] == "right"
    assert compare.agrees({"outcome": "pass"}, dict(rec, kind="host_only"))[0] == "wrong"
    failed = dict(rec, outcome="fail", message="Exception: Tensor-likes are not close!")
    assert compare.agrees({"outcome": "pass"}, failed)[0] == "numeric"
    assert compare.agrees({"outcome": "skip_backend/missing_op", "missing_op": "aten::x"}, failed)[0] == "wrong"
    skipped = dict(rec, outcome="skip_backend", kind="missing_op", missing_op="aten::uniform_")
    assert compare.agrees({"outcome": "skip_backend/missing_op", "missing_op": "aten::uniform_"}, skipped)[0] == "right"
    assert compare.agrees({"outcome": "skip_backend/missing_op", "missing_op": "aten::exp.out"}, skipped)[0] == "wrong"
    assert compare.agrees({"outcome": "pass"}, dict(rec, outcome="skip_eligibility"))[0] == "not comparable"


@pytest.mark.parametrize("name", ["torchvulkan", "opencl"])
def test_profile_names_the_missing_operator_the_backend_named(name):
    """Every 'missing' message the backend really gave is read as that operator by its profile."""
    profile = load_profile(name)
    doc = truth(ROOT / "bench" / "backends" / f"{name}-truth.yaml")
    assert profile.device == doc["facts"]["device"]
    missing = [e for e in doc["operators"] if e["evidence"] == "missing" and e.get("message")]
    if name == "opencl":
        assert len(missing) >= 30
    for e in missing:
        assert profile.find_missing_ops(e["message"])[:1] == [e["missing_op"]], e["case"]


def test_bench_refuses_an_unknown_backend_in_one_line(capsys):
    sys.argv = ["backends.py", "cuda"]
    assert bench.main() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown backend 'cuda'" in err[0] and "torchvulkan" in err[0]
