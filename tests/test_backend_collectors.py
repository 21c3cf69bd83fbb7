"""The plugin's side of onboarding a PrivateUse1 backend, for direct pytest users: the device
brought up with torch imported first (an autoload backend named as the profile's
backend_module comes up), probed defaults without a profile, no build stored for a device
that does not come up under xdist, the backend's distribution version, repro commands
another checkout runs (an upstream test collected under its own name, no machine paths),
and a fallback counter returning operator names.

The autoload backend is test_backend_init's stand-in: refdev registered as 'fakedev' by a
`torch.backends` entry point of distribution tcfakedev-backend 1.2.3."""
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from support import child_env
from test_backend_init import fake_backend, with_fake  # noqa: F401  (a fixture, used by name)
from torchconform.core.outcome import repro_template
from torchconform.collectors.sink_jsonl import read_jsonl
from torchconform.collectors.worker import fallback_counts
from torchconform.core.backend_env import AUTOLOAD_ENV

ROOT = Path(__file__).resolve().parents[1]
OPS = ROOT / "suites" / "ops" / "test_ops.py"
ADD = ["--tc-ops", "add", "-k", "float32 and compare_cpu_add"]


def pytest_run(args, cwd: Path, env: dict, timeout: float = 600):
    """pytest in a child in ``cwd`` with the plugin writing JSON lines: (proc, run, outcomes)."""
    jsonl = cwd / "out.jsonl"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
                           "--tc-jsonl", str(jsonl), *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    run, outcomes = read_jsonl(jsonl) if jsonl.exists() else ({}, [])
    return proc, run, outcomes


def run_repro(repro: str, env: dict) -> subprocess.CompletedProcess:
    """``repro`` in a shell in the checkout, `python` being this interpreter."""
    env = dict(env, PATH=os.path.dirname(sys.executable) + os.pathsep + env["PATH"])
    return subprocess.run(["bash", "-c", repro], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


# -- an autoload backend through pytest directly ------------------------------------------
def test_a_profile_naming_an_autoload_module_comes_up_and_records_the_distribution(tmp_path, fake_backend):
    """The profile names tcfakedev, which torch's autoload already loads: importing it before
    torch used to fail ("Failed to load the backend extension"), and `torchconform run`
    refused such a profile."""
    profile = tmp_path / "fakedev.yaml"
    profile.write_text("device: fakedev\nbackend_module: tcfakedev\nenv:\n  TC_FAKEDEV_MODE: eager\n")
    env = with_fake(fake_backend)
    proc, run, outcomes = pytest_run(["--rootdir", ROOT, OPS, "--tc-device", "fakedev", "--tc-profile", profile, *ADD],
                                     tmp_path, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Failed to load the backend extension" not in proc.stdout + proc.stderr
    assert sorted(o.outcome for o in outcomes) == ["pass", "pass"]
    assert run["environment"]["backend"] == "tcfakedev 1.2.3 (tcfakedev-backend)"   # not the module's 0.0.0
    for o in outcomes:
        # the profile's env and the op, no path of this machine (tmp_path's profile is kept as given)
        assert o.repro.startswith(f"TC_FAKEDEV_MODE=eager python -m pytest {o.test_id} --rootdir . "
                                  f"--tc-device fakedev --tc-profile {profile} --tc-ops add"), o.repro
        template = repro_template(o.repro, o.test_id, o.op)
        assert template == ("TC_FAKEDEV_MODE=eager python -m pytest {id} --rootdir . --tc-device fakedev "
                            f"--tc-profile {profile} --tc-ops {{op}}")
    cli = subprocess.run([sys.executable, "-m", "torchconform", "run", "--device", "fakedev", "--profile", profile,
                          "--ops", "add", "-k", "float32 and compare_cpu_add", "-n", "0", "--no-db", "--json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr[-3000:]   # the CLI no longer refuses the profile
    assert '"pass": 2' in cli.stdout


def test_a_device_without_a_profile_gets_the_runs_probed_defaults(tmp_path, fake_backend):
    proc, run, outcomes = pytest_run(["--rootdir", ROOT, OPS, "--tc-device", "fakedev", *ADD], tmp_path,
                                     with_fake(fake_backend))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = [ln for ln in proc.stderr.splitlines() if "no profile for" in ln]
    assert len(said) == 1 and said[0].startswith("torchconform: no profile for 'fakedev': probed defaults "
                                                 "(compile_backend aot_eager, backend_module (autoload)")
    written = tmp_path / ".torchconform" / "profiles" / "fakedev.yaml"
    assert run["backend_profile"] == "fakedev" and written.is_file()
    assert run["environment"]["backend"] == "tcfakedev 1.2.3 (tcfakedev-backend)"   # the entry point's module
    assert sorted(o.outcome for o in outcomes) == ["pass", "pass"]
    # another machine probes the same defaults: the repro names no profile file of this one
    assert all("--tc-profile" not in o.repro and str(tmp_path) not in o.repro for o in outcomes)


def test_shipped_profiles_are_found_by_their_device_key(tmp_path):
    # skiplists/torchvulkan/ is device vulkan: found, and its module named as missing
    proc, _, outcomes = pytest_run(["--rootdir", ROOT, OPS, "--tc-device", "vulkan", *ADD], tmp_path, child_env())
    assert proc.returncode == 4 and not outcomes
    assert "ERROR: torchconform: device 'vulkan': cannot import backend module torchvulkan (ModuleNotFoundError" \
        in proc.stderr, proc.stderr


# -- no build for a device that does not come up -----------------------------------------
def test_a_device_that_fails_under_xdist_leaves_no_build_in_the_store(tmp_path):
    """The xdist controller checks the device while its workers start; the run (and so the
    build) starts only once that check passed."""
    profile = tmp_path / "ghost.yaml"
    profile.write_text("device: nosuchdev\nbackend_module: no_such_backend_module_q\n")
    db = tmp_path / "store.db"
    fixture = ROOT / "tests" / "fixtures" / "runner" / "fx_outcomes.py"
    proc, _, outcomes = pytest_run(["--rootdir", ROOT, fixture, "--tc-device", "nosuchdev", "--tc-profile", profile,
                                    "--tc-db", db, "-n", "2"], tmp_path, child_env())
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "torchconform: device 'nosuchdev': cannot import backend module no_such_backend_module_q" \
        in proc.stdout + proc.stderr
    assert (tmp_path / "out.jsonl").read_text() == ""   # opened with the store, and no sink heard of a run
    with sqlite3.connect(db) as conn:   # the store was opened (a bad --tc-db fails first), and holds nothing
        assert conn.execute("select count(*) from builds").fetchone() == (0,)
        assert conn.execute("select count(*) from runs").fetchone() == (0,)


# -- repro commands ----------------------------------------------------------------------
def test_a_recorded_upstream_repro_collects_its_test_elsewhere(tmp_path):
    """Upstream tests exist under their recorded name only with the suite's -c/--rootdir/-p;
    the recorded repro keeps them and writes the checkout as $TORCHCONFORM_PYTORCH_SRC."""
    from torchconform.suites import upstream

    src = tmp_path / "pytorch"
    shutil.copytree(ROOT / "tests" / "fixtures" / "upstream" / "test", src / "test")
    (src / "version.txt").write_text("2.13.0a0\n")
    env = child_env(TORCHCONFORM_PYTORCH_SRC=str(src))
    suite = upstream.pytest_args(str(src), files="test_fake_ops", check_version=False)
    proc, _, outcomes = pytest_run([*suite, "--tc-device", "refdev", "-k", "test_fake_add_scalar_refdev"], tmp_path,
                                   env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [o] = outcomes
    assert o.outcome == "pass"
    assert o.test_id == "test/test_fake_ops.py::TestFakeCommonREFDEV::test_fake_add_scalar_refdev"
    assert str(tmp_path) not in o.repro and str(ROOT) not in o.repro and sys.executable not in o.repro
    assert o.repro == (f"python -m pytest $TORCHCONFORM_PYTORCH_SRC/{o.test_id} -c suites/upstream/pytest.ini "
                       f"--rootdir $TORCHCONFORM_PYTORCH_SRC -p {upstream.PLUGIN} -p torchconform.collectors.skiplist_plugin "
                       "--noconftest --tc-device refdev --tc-profile refdev")
    assert repro_template(o.repro, o.test_id, o.op)   # one template serves the run (sink_junit)
    elsewhere = tmp_path / "elsewhere"   # the same checkout under another path: only the variable changes
    shutil.copytree(src, elsewhere)
    ran = run_repro(o.repro, child_env(TORCHCONFORM_PYTORCH_SRC=str(elsewhere)))
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout[-2000:] + ran.stderr[-2000:]


def test_repro_names_profiles_and_environment_as_another_checkout_has_them(tmp_path):
    from types import SimpleNamespace

    from torchconform.collectors.repro import checkout_root, repro_for
    from torchconform.core.profile import BackendProfile, load_profile

    root = checkout_root()
    settings = SimpleNamespace(selection="quick", backend_module="")
    node = f"{root}/suites/ops/test_ops.py::TestCommonNPU::test_x_npu_float32"
    probed = BackendProfile(name="npu", device="npu", env={"NPU_MODE": "a b"},
                            path=str(tmp_path / ".torchconform" / "profiles" / "npu.yaml"))
    environ = {"PYTHONPATH": f"{root}/third_party/npu:/opt/site", AUTOLOAD_ENV: "0",
               "TORCHCONFORM_REFDEV_PROFILE": f"{root}/refdev/profiles/x.yaml"}
    cmd = repro_for(node, "suites/ops/test_ops.py::TestCommonNPU::test_x_npu_float32",
                    ["-p", "no:cacheprovider", "--rootdir", root, "-n", "4"], "npu", probed, settings, op="x",
                    environ=environ)
    assert cmd == ("NPU_MODE='a b' TORCHCONFORM_REFDEV_PROFILE=refdev/profiles/x.yaml TORCH_DEVICE_BACKEND_AUTOLOAD=0 "
                   "PYTHONPATH=third_party/npu python -m pytest "
                   "suites/ops/test_ops.py::TestCommonNPU::test_x_npu_float32 "
                   "--rootdir . --tc-device npu --tc-ops x --tc-selection quick")   # probed: no --tc-profile
    outside = repro_for(str(tmp_path / "t.py") + "::test_a", "t.py::test_a", [], "refdev", load_profile("refdev"),
                        SimpleNamespace(selection="", backend_module="torchconform.refdev"), environ={})
    assert outside == ("python -m pytest t.py::test_a --tc-device refdev --tc-profile refdev "
                       "--tc-backend-module torchconform.refdev")   # shipped by name; the test as pytest named it


# -- the fallback counter ----------------------------------------------------------------
def test_fallback_counts_take_a_mapping_or_operator_names():
    from collections import Counter

    assert fallback_counts({"aten::add": 2, "mul": 0}) == {"aten::add": 2, "mul": 0}
    assert fallback_counts(Counter(["sin", "sin"])) == {"sin": 2}
    assert fallback_counts(["aten::add", "sin"]) == {"aten::add": 1, "sin": 1}
    assert fallback_counts({"aten::cos"}) == {"aten::cos": 1}
    assert fallback_counts(None) == {} and fallback_counts([]) == {}
    with pytest.raises(TypeError, match="fallback_counter returned int"):
        fallback_counts(3)


def test_a_counter_returning_operator_names_marks_pass_fallback(tmp_path):
    """Like torch_neuronx.get_fallback_ops(): a list of the operators that fell back since
    clear_op_tracking, which the profile names as fallback_counter/fallback_reset."""
    (tmp_path / "tctracking.py").write_text(
        "USED = []\n\ndef get_fallback_ops():\n    return list(USED)\n\n"
        "def clear_op_tracking():\n    USED.clear()\n")
    (tmp_path / "test_tracked.py").write_text(
        "import tctracking\n\ndef test_falls_back():\n    tctracking.USED.extend(['aten::sin', 'cos'])\n\n"
        "def test_native():\n    pass\n")
    profile = tmp_path / "cpu.yaml"
    profile.write_text("device: cpu\nfallback_counter: tctracking:get_fallback_ops\n"
                       "fallback_reset: tctracking:clear_op_tracking\n")
    proc, _, outcomes = pytest_run(["--rootdir", tmp_path, tmp_path / "test_tracked.py", "--tc-device", "cpu",
                                    "--tc-profile", profile], tmp_path, child_env(PYTHONPATH=str(tmp_path)))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = {o.name: (o.outcome, o.fallback_ops) for o in outcomes}
    assert got == {"test_falls_back": ("pass_fallback", ["aten::cos", "aten::sin"]), "test_native": ("pass", [])}
