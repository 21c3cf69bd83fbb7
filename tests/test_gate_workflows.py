"""ci/: the GitHub Actions templates (actionlint), the shell entry points
(shellcheck, and gate.sh end to end on refdev with the gate's fixture suite)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from torchconform.db import read_builds
from torchconform.db.opening import open_store

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / "ci"
WORKFLOWS = sorted((CI / "workflows").glob("*.yml"))
FIXTURES = ROOT / "tests" / "fixtures" / "gate"


def _tool(name: str) -> str:
    """The tool from the venv (tests/services/actionlint.sh installs it there) or PATH.
    Missing is a skip on a developer machine, a failure on CI (where it must run)."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed; tests/services/actionlint.sh installs it (make services)")
        pytest.skip(f"{name} not installed; run tests/services/actionlint.sh")
    return found


def test_both_workflows_exist_and_use_the_entry_points():
    names = {p.name for p in WORKFLOWS}
    assert {"gate.yml", "nightly.yml"} <= names
    gate = yaml.safe_load((CI / "workflows" / "gate.yml").read_text())
    runs = " ".join(s.get("run", "") for s in gate["jobs"]["gate"]["steps"])
    assert "bash ci/gate.sh" in runs
    nightly = yaml.safe_load((CI / "workflows" / "nightly.yml").read_text())
    shard = nightly["jobs"]["shard"]
    # The matrix and the SHARDS count the script is given must agree, or shards are lost.
    assert len(shard["strategy"]["matrix"]["shard"]) == int(nightly["env"]["SHARDS"])
    assert "bash ci/nightly.sh shard" in " ".join(s.get("run", "") for s in shard["steps"])
    publish = " ".join(str(s) for s in nightly["jobs"]["publish"]["steps"])
    assert "deploy-pages" in publish and "nightly.sh merge" in publish
    for path in WORKFLOWS:
        assert "Neuron" in path.read_text(), f"{path.name} must say what to change for a Neuron host"


def test_actionlint_accepts_the_workflows():
    actionlint = _tool("actionlint")
    proc = subprocess.run([actionlint, "-no-color", *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_typo(tmp_path):
    actionlint = _tool("actionlint")
    text = (CI / "workflows" / "gate.yml").read_text()
    broken = tmp_path / "gate.yml"
    broken.write_text(text.replace("github.head_ref ||", "github.heads_ref ||").replace("    runs-on: ubuntu-latest", "    run-on: ubuntu-latest", 1))
    proc = subprocess.run([actionlint, "-no-color", str(broken)], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "heads_ref" in proc.stdout and "run-on" in proc.stdout


def test_shell_entry_points_pass_shellcheck():
    shellcheck = _tool("shellcheck")
    proc = subprocess.run([shellcheck, str(CI / "gate.sh"), str(CI / "nightly.sh"),
                           str(ROOT / "tests" / "services" / "actionlint.sh")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_nightly_sh_rejects_bad_usage():
    for args in ([], ["shard", "x", "2"], ["shard", "3", "2"], ["merge"], ["bogus"]):
        proc = subprocess.run(["bash", str(CI / "nightly.sh"), *args], capture_output=True, text=True,
                              env=dict(os.environ, PYTHON=sys.executable, TC_OUT=str(ROOT / "tc-out-unused")),
                              cwd=ROOT)
        assert proc.returncode == 2 and "usage:" in proc.stderr, args
    assert not (ROOT / "tc-out-unused").exists() or not any((ROOT / "tc-out-unused").iterdir())
    shutil.rmtree(ROOT / "tc-out-unused", ignore_errors=True)


def test_gate_sh_first_build_passes_then_a_regression_fails(tmp_path):
    db = tmp_path / "ci.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHCONFORM_", "TC_", "GITHUB_", "PYTEST_"))}
    env.update(PYTHON=sys.executable, TORCHCONFORM_DB=str(db), TC_DEVICE="refdev", TC_BRANCH="main",
               TC_TESTS=str(FIXTURES / "suite" / "fx_small_ops.py"), TC_JOBS="0", TC_SITE="0",
               TC_RERUNS="0", TC_OUT=str(tmp_path / "out1"), TC_BUILD="ci-1",
               TORCHCONFORM_REFDEV_PROFILE=str(FIXTURES / "profiles" / "gate-a.yaml"))
    first = subprocess.run(["bash", str(CI / "gate.sh")], capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=900)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "first build" in (tmp_path / "out1" / "gate.md").read_text()
    env.update(TC_OUT=str(tmp_path / "out2"), TC_BUILD="ci-2",
               TORCHCONFORM_REFDEV_PROFILE=str(FIXTURES / "profiles" / "gate-b.yaml"))
    second = subprocess.run(["bash", str(CI / "gate.sh")], capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=900)
    assert second.returncode == 1, second.stdout[-3000:] + second.stderr[-3000:]
    summary = (tmp_path / "out2" / "gate.md").read_text()
    assert "against baseline `ci-1`" in summary and "`aten::sin.out`" in summary
    assert (tmp_path / "out2" / "gate-junit.xml").exists() and (tmp_path / "out2" / "junit.xml").exists()
    with open_store(str(db)) as store:
        assert {b["name"]: b["branch"] for b in read_builds.list_builds(store)} == {"ci-1": "main", "ci-2": "main"}
