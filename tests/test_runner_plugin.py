"""The plugin on small fixture files: every outcome class, sinks, inertness, options."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import FIXTURES, REPO, by_name, child_env, run_pytest  # noqa: E402

from torchconform.core.outcome import OUTCOMES  # noqa: E402

EXPECTED = {
    "test_pass": ("pass", ""),
    "test_fail": ("fail", ""),
    "test_skip_eligibility": ("skip_eligibility", ""),
    "test_error": ("error", ""),
    "test_missing_op": ("skip_backend", "missing_op"),
    "test_missing_op_in_compare_cause": ("skip_backend", "missing_op"),
    "test_missing_op_in_compare_context": ("skip_backend", "missing_op"),
    "test_fail_mentioning_other_backend": ("fail", ""),
    "test_fallback": ("pass_fallback", ""),
    "test_fallback_warning_unwanted": ("fail", ""),
    "test_xfail": ("xfail", ""),
    "test_xpass": ("xpass", ""),
    "test_unittest_xfail": ("xfail", ""),
    "test_unittest_xpass": ("xpass", ""),
}


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plugin")
    junit = tmp / "tc.xml"
    proc, run, outcomes = run_pytest([FIXTURES / "fx_outcomes.py", "--tc-device", "cpu", "--tc-build", "b1",
                                      "--tc-junit", junit], tmp)
    return proc, run, outcomes, junit


def test_every_outcome_class_on_fixtures(fixture_run):
    _, run, outcomes, _ = fixture_run
    got = by_name(outcomes)
    assert {k: (v.outcome, v.kind) for k, v in got.items()} == EXPECTED
    assert got["test_missing_op"].missing_op == "aten::fx_missing.out"
    assert got["test_missing_op_in_compare_cause"].missing_op == "aten::fx_isclose"
    assert got["test_missing_op_in_compare_context"].missing_op == "aten::fx_eq.Tensor"
    assert got["test_fallback"].fallback_ops == ["aten::fx_fallback"]
    # Recorded whatever the outcome: a test failing because a fallback fired shows it.
    assert got["test_fallback_warning_unwanted"].fallback_ops == ["aten::fx_fallback"]
    assert all(not o.fallback_ops for o in outcomes if o.test_id.split("::")[-1] not in
               ("test_fallback", "test_fallback_warning_unwanted"))
    assert got["test_fail"].message.startswith("AssertionError: arithmetic is broken")
    assert got["test_skip_eligibility"].message == "Only runs on cuda"
    for o in outcomes:
        assert o.outcome in OUTCOMES and o.device == "cpu" and o.file.endswith("fx_outcomes.py")
        assert "--tc-device cpu" in o.repro and o.test_id.split("::")[-1] in o.repro
    assert run["build"] == "b1" and run["device"] == "cpu" and run["exitstatus"] == 1
    assert run["total"] == len(EXPECTED)


def test_junit_is_standard_and_carries_properties(fixture_run):
    import junitparser

    _, _, outcomes, junit = fixture_run
    xml = junitparser.JUnitXml.fromfile(str(junit))
    cases = {c.name: c for s in xml for c in s}
    assert set(cases) == set(EXPECTED)
    from torchconform.db.junit.write import decode_tc
    # junitparser sees the packed tc attribute of each case and the suite's defaults.
    suite = next(iter(xml))
    defaults = {p.name[len("tc.default."):]: p.value for p in suite.properties() if p.name.startswith("tc.default.")}
    props = {}
    for name, case in cases.items():
        packed = case._elem.get("tc")
        props[name] = {**defaults, **(decode_tc(packed) if packed else {})}
    assert props["test_missing_op"]["outcome"] == "skip_backend"
    assert props["test_missing_op"]["kind"] == "missing_op"
    assert props["test_missing_op"]["missing_op"] == "aten::fx_missing.out"
    assert props["test_fallback"]["fallback_ops"] == "aten::fx_fallback"
    assert props["test_pass"]["device"] == "cpu"
    kinds = {name: type(c.result[0]).__name__ if c.result else "pass" for name, c in cases.items()}
    assert kinds["test_fail"] == "Failure" and kinds["test_error"] == "Error"
    assert kinds["test_skip_eligibility"] == "Skipped" and kinds["test_pass"] == "pass"


def test_plugin_is_inert_without_a_device(tmp_path):
    jsonl = tmp_path / "x.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "--rootdir", str(REPO),
         str(FIXTURES / "fx_outcomes.py"), "--tc-jsonl", str(jsonl), "-k", "test_pass or (test_fail and not backend)"],
        cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout
    assert "1 failed, 1 passed" in proc.stdout
    assert not jsonl.exists()  # nothing recorded, nothing set up
    assert "torchconform" not in proc.stdout


def test_options_from_environment(tmp_path):
    jsonl = tmp_path / "env.jsonl"
    env = child_env(TORCHCONFORM_DEVICE="cpu", TORCHCONFORM_JSONL=str(jsonl), TORCHCONFORM_BUILD="from-env")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "--rootdir", str(REPO),
         str(FIXTURES / "fx_outcomes.py"), "-k", "test_pass"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert lines[0]["type"] == "run_start" and lines[0]["run"]["build"] == "from-env"
    assert [r["outcome"] for r in lines if r["type"] == "outcome"] == ["pass"]
    assert lines[-1]["type"] == "run_end"


@pytest.mark.parametrize("args, needle", [
    # no profile: probed as `torchconform run` does, and a device nothing registers is said so
    (["--tc-device", "nosuchdev"], "device 'nosuchdev' is not registered (PrivateUse1 is 'privateuseone'): no "
                                   "--tc-backend-module was given"),
    (["--tc-device", "neuron"], "device 'neuron': cannot import backend module"),
    (["--tc-device", "cpu", "--tc-profile", "refdev"], "profile 'refdev' is for device 'refdev', not 'cpu'"),
    (["--tc-device", "cpu", "--tc-timeout", "soon"], "--tc-timeout 'soon' is not a number"),
])
def test_bad_settings_are_one_line_usage_errors(tmp_path, args, needle):
    proc, _, outcomes = run_pytest([FIXTURES / "fx_outcomes.py", *args], tmp_path, check_rc=(4,))
    err = proc.stderr + proc.stdout
    assert needle in err, err
    assert not outcomes


def test_missing_privateuse1_device_is_an_error_not_cpu(tmp_path):
    # A profile for a PrivateUse1 device whose module registers nothing: never run on CPU instead.
    prof = tmp_path / "ghost.yaml"
    prof.write_text("device: ghostdev\nbackend_module: json\ncompile_backend: aot_eager\n")
    proc, _, outcomes = run_pytest([FIXTURES / "fx_outcomes.py", "--tc-device", "ghostdev", "--tc-profile", prof],
                                   tmp_path, check_rc=(4,))
    assert "device 'ghostdev' is not registered" in proc.stderr + proc.stdout
    assert not outcomes


def test_missing_device_under_xdist_is_the_same_usage_error(tmp_path):
    # The controller checks the device in the background while xdist starts the workers;
    # a missing device still ends the run with the one-line usage error and no outcome.
    prof = tmp_path / "ghost.yaml"
    prof.write_text("device: ghostdev\nbackend_module: json\ncompile_backend: aot_eager\n")
    proc, _, outcomes = run_pytest([FIXTURES / "fx_outcomes.py", "--tc-device", "ghostdev", "--tc-profile", prof,
                                    "-n", "2"], tmp_path, check_rc=(4,))
    assert "device 'ghostdev' is not registered" in proc.stderr + proc.stdout
    assert not outcomes


def test_run_record_reads_torch_version_without_importing_torch():
    code = ("import sys; from torchconform.core.device import torch_versions; v = torch_versions(); "
            "assert 'torch' not in sys.modules; import torch; "
            "assert v == (torch.__version__, torch.version.git_version), v; print(v)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_xdist_workers_share_the_cpus_out(tmp_path, monkeypatch):
    from torchconform.core.device import worker_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert worker_threads() == max(1, (os.cpu_count() or 1) // 2)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")      # the user's choice wins
    assert worker_threads() == 0
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delenv("PYTEST_XDIST_WORKER")       # not a worker: torch's default
    assert worker_threads() == 0
    # for real: each of two workers runs with its share of the CPUs
    probe = tmp_path / "test_threads.py"
    probe.write_text("import os, torch\n"
                     "def test_threads():\n"
                     "    assert torch.get_num_threads() == max(1, (os.cpu_count() or 1) // 2)\n"
                     "    assert os.environ['OMP_NUM_THREADS'] == str(torch.get_num_threads())\n")
    env = {k: v for k, v in child_env().items() if k != "OMP_NUM_THREADS"}
    proc, _, outcomes = run_pytest([probe, "--tc-device", "cpu", "-n", "2"], tmp_path, env=env, check_rc=(0,))
    assert [o.outcome for o in outcomes] == ["pass"]


def test_xdist_equals_serial_on_fixtures(tmp_path, fixture_run):
    _, _, serial, _ = fixture_run
    _, _, parallel = run_pytest([FIXTURES / "fx_outcomes.py", "--tc-device", "cpu", "-n", "2"], tmp_path)
    assert {o.test_id: (o.outcome, o.kind, o.missing_op) for o in parallel} == \
        {o.test_id: (o.outcome, o.kind, o.missing_op) for o in serial}
