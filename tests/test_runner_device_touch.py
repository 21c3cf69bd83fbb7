"""What a test did to the device (collectors/devicecheck.py) on refdev young-backend,
outside suites/ops: a pass that never touched the device is ``pass``/``host_only``
(counted apart, left out of the pass rate), and a passing test whose kernel leaked
is ``error`` naming this test's leaking operator.  Ground truth: refdev's kernel
trace (TORCHCONFORM_REFDEV_TRACE=1) per test."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import FIXTURES, REPO, by_name, child_env, run_pytest  # noqa: E402

from torchconform.core.breakdown import breakdown, format_breakdown, make_breakdown, pass_rate  # noqa: E402
from torchconform.core.outcome import Outcome  # noqa: E402

FIXTURE = FIXTURES / "fx_device_touch.py"
TRACKED = "torchconform.refdev.executed_ops()"
BUILD = "touch-young"

# name -> (outcome, kind) on refdev
EXPECTED = {
    "test_cpu_tensors_only": ("pass", "host_only"),
    "test_no_tensors": ("pass", "host_only"),
    "test_cpu_only": ("pass", "host_only"),               # a unittest.TestCase method
    "test_cpu_only_fails": ("fail", ""),                   # only passes become host_only
    "test_cpu_only_skipped": ("skip_eligibility", ""),
    "test_tiny_device_tensor_freed": ("pass", ""),          # an empty refdev tensor, freed at once
    "test_device_compute": ("pass", ""),
    "test_allocates_and_frees": ("pass", ""),               # no leak
    "test_leaking_kernel": ("error", ""),
    "test_leaking_kernel_twice": ("error", ""),
}


def _env(**extra):
    return child_env(TORCHCONFORM_REFDEV_PROFILE="young-backend", PYTHONPATH=str(FIXTURES), **extra)


@pytest.fixture(scope="module")
def young(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("touch")
    db, trace = tmp / "store.db", tmp / "trace.json"
    proc, _, outcomes = run_pytest(["-p", "fx_refdev_trace", FIXTURE, "--tc-device", "refdev", "--tc-db", db,
                                    "--tc-build", BUILD, "--tc-junit", tmp / "run.xml"], tmp,
                                   env=_env(TORCHCONFORM_REFDEV_TRACE="1", FX_TRACE_OUT=trace))
    return proc, outcomes, json.loads(trace.read_text()), db


def _summary(db, build, *args):
    proc = subprocess.run([sys.executable, "-m", "torchconform", "summary", "--build", build, "--db", str(db), *args],
                          cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _classes(outcomes):
    return {name: (o.outcome, o.kind) for name, o in by_name(outcomes).items()}


def test_host_only_passes_are_the_tests_without_a_device_kernel(young):
    proc, outcomes, trace, _ = young
    assert _classes(outcomes) == EXPECTED, proc.stdout[-3000:]
    for o in outcomes:
        if o.kind == "host_only":
            assert trace[o.test_id] == {}, o.test_id                   # no device kernel ran
            # refdev's profile names its executed operators (tracking.executed_ops): they decide with
            # the allocation counter, and the message names them (docs/classification.md)
            assert o.message == f"host_only: {TRACKED} reported no operator during the test"
        elif trace[o.test_id]:
            assert o.kind != "host_only", o.test_id
    assert trace[f"{FIXTURE.relative_to(REPO)}::test_device_compute"]


def test_leak_names_the_operator_of_this_test(young):
    _, outcomes, _, _ = young
    got = by_name(outcomes)
    assert got["test_leaking_kernel"].message == (
        "AssertionError: device memory leak: 4096 bytes of refdev memory still allocated after the test "
        "(0 before); leaking operators: aten::flip x1")
    # the process leaked before: only this test's two calls are named, not the process's three
    assert got["test_leaking_kernel_twice"].message.endswith("(4096 before); leaking operators: aten::flip x2")


def test_dispatch_probe_decides_without_memory_stats(tmp_path):
    # refdev's kernel trace off: its executed_ops() cannot answer (not measured), so the
    # dispatcher observer alone decides, as on a backend without tracking or memory_stats
    db = tmp_path / "store.db"
    proc, _, outcomes = run_pytest(["-p", "fx_no_memory_stats", FIXTURE, "--tc-device", "refdev", "--tc-db", db,
                                    "--tc-build", "nostats"], tmp_path, env=_env(TORCHCONFORM_REFDEV_TRACE="0"))
    assert _classes(outcomes) == EXPECTED, proc.stdout[-3000:]
    assert by_name(outcomes)["test_no_tensors"].message == \
        "host_only: no operator saw a refdev tensor during the test"
    # the coverage audit then has the observer's trace only (composites and views included)
    from torchconform.db.coverage import build_coverage
    from torchconform.db.opening import open_store

    with open_store(f"sqlite:///{db}", create=False) as store:
        cov = build_coverage(store, "nostats")
    assert set(cov["traces"]) == {"dispatcher"}
    assert {"aten::flip", "aten::ones", "aten::mul.Tensor"} <= {r["op"] for r in cov["reached_ops"]}


def test_cpu_is_never_host_only(tmp_path):
    proc, _, outcomes = run_pytest([FIXTURE, "--tc-device", "cpu"], tmp_path, env=_env())
    got = _classes(outcomes)
    assert not [n for n, (_, kind) in got.items() if kind], proc.stdout[-3000:]
    assert got["test_cpu_tensors_only"] == got["test_leaking_kernel"] == ("pass", "")


def test_pass_kinds_and_pass_rate_from_the_store(young):
    _, outcomes, _, db = young
    stored = json.loads(_summary(db, BUILD, "--json"))
    assert stored["pass_kinds"] == {"native": 3, "fallback": 0, "host_only": 3}
    assert stored["outcomes"]["pass"] == 6 and stored["total"] == 10
    assert stored == {**breakdown(BUILD, outcomes), "complete": True, "unfinished_runs": []}
    # 3 native passes of the 10 - 1 eligibility skip - 3 host_only passes that ran on the device
    assert pass_rate(stored) == pytest.approx(3 / 6)
    assert "(natively 3, through CPU fallback 0, without touching the device 3)" in _summary(db, BUILD)

    # the gate and the site count the same from the store
    from torchconform.ci.gate import pass_rate as gate_pass_rate
    from torchconform.ci.pipeline import load_records
    from torchconform.db.arrays import BuildData, TestTable
    from torchconform.dashboard.styles import pass_rate as site_pass_rate
    from torchconform.dashboard.reads import READS
    from torchconform.db.opening import open_store

    store = open_store(f"sqlite:///{db}", create=False)
    assert gate_pass_rate(load_records(store, BUILD)) == pytest.approx(100 * 3 / 6)
    data, _ = BuildData.read(store, READS, BUILD, TestTable.read(store, READS))
    site = data.breakdown()   # dashboard/per_build.py's build summary
    assert site["pass_kinds"] == stored["pass_kinds"] and site_pass_rate(site) == pass_rate(stored)


def test_host_only_survives_junit_ingest(young, tmp_path):
    _, _, _, db = young
    other = tmp_path / "ingested.db"
    proc = subprocess.run([sys.executable, "-m", "torchconform", "ingest", str(db.parent / "run.xml"), "--build",
                           "ingested", "--db", str(other)], cwd=REPO, env=child_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(_summary(other, "ingested", "--json"))["pass_kinds"] == \
        json.loads(_summary(db, BUILD, "--json"))["pass_kinds"]


def test_host_only_is_a_kind_of_pass_only():
    Outcome("t", "pass", kind="host_only")
    for outcome in ("pass_fallback", "xpass", "fail"):
        with pytest.raises(ValueError, match="only meaningful"):
            Outcome("t", outcome, kind="host_only")
    b = make_breakdown("b", {"pass": 5, "pass_fallback": 1, "skip_eligibility": 2}, {}, {}, host_only=4)
    assert b["pass_kinds"] == {"native": 1, "fallback": 1, "host_only": 4}
    assert pass_rate(b) == pytest.approx(2 / 2)
    assert pass_rate(make_breakdown("b", {"pass": 3, "skip_eligibility": 1}, {}, {}, host_only=3)) is None
    assert "without touching the device 4" in format_breakdown(b)


MODELS = '''
import torch

class Flip(torch.nn.Module):
    def forward(self, x):
        return torch.flip(x, [0])

class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2

def leaking():
    return Flip(), {"x": torch.arange(4.0)}

def clean():
    return Double(), {"x": torch.arange(4.0)}
'''

RUN_MODELS = '''
import json, sys
from torchconform import refdev
from torchconform.core.profile import load_profile
from torchconform.suites.models.check import run_model
dev = refdev.load()
print(json.dumps({f: [(o.outcome, o.message) for o in run_model(f"py/{sys.argv[1]}::{f}", dev + ":0",
                  load_profile("refdev"), variants=("eval",))] for f in ("leaking", "clean")}))
'''


def test_models_suite_gets_the_same_leak_check(tmp_path):
    models = tmp_path / "models.py"
    models.write_text(MODELS)
    proc = subprocess.run([sys.executable, "-c", RUN_MODELS, str(models)], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    (outcome, message), = got["leaking"]
    assert outcome == "error" and message.startswith("device memory leak: 4096 bytes of refdev memory")
    assert message.endswith("leaking operators: aten::flip x1")
    [(outcome, message)] = got["clean"]
    assert outcome == "pass" and message.startswith("timing: device_cold_s=")


def test_reached_overloads_are_stored_per_run(young):
    """The coverage audit (db/coverage.py): the store holds, for the run, each overload a test
    ran on refdev (its executed operators) with how many tests reached it and one of them;
    host_only tests reached nothing."""
    _, outcomes, trace, db = young
    from torchconform.db.coverage import build_coverage
    from torchconform.db.opening import open_store

    with open_store(f"sqlite:///{db}", create=False) as store:
        cov = build_coverage(store, BUILD)
    assert cov["measured"] and cov["traces"]["backend"] >= 8
    reached = {r["op"]: r for r in cov["reached_ops"]}
    leak = f"{FIXTURE.relative_to(REPO)}::test_leaking_kernel"
    assert reached["aten::flip"]["tests"] == 2 and reached["aten::flip"]["example_test"] in (leak, leak + "_twice")
    # exactly what refdev's own kernel trace saw during the tests, nothing else
    assert set(reached) == {op for calls in trace.values() for op, n in calls.items() if n}
    for o in outcomes:
        if o.kind == "host_only":
            assert not any(r["example_test"] == o.test_id for r in cov["reached_ops"])
