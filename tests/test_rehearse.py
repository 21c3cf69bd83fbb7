"""`torchconform rehearse neuron` (issue 18): refdev standing in for torch_neuronx as
device `neuron` under the neuron backend profile, through run, store, gate and site."""
import json
import subprocess
import sys

import pytest

from tests.support import child_env

TC = [sys.executable, "-m", "torchconform"]


@pytest.mark.slow
def test_rehearsal_builds_a_neuron_build_matching_refdev_ground_truth(tmp_path):
    db = tmp_path / "r.db"
    proc = subprocess.run(TC + ["rehearse", "neuron", "--ops", "abs,add,atan2,view_as_complex,scatter", "-n", "0",
                                "--db", str(db), "--out", str(tmp_path / "site"), "--build", "reh"],
                          cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gate PASSED" in proc.stdout + proc.stderr
    assert "missing operators reported, 0 contradicted; " in proc.stderr
    assert "fallback operators reported, 0 contradicted" in proc.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    summary = json.loads(subprocess.run(TC + ["summary", "--build", "reh", "--db", str(db), "--json"], cwd=tmp_path,
                                        env=child_env(), capture_output=True, text=True, check=True).stdout)
    builds = subprocess.run(TC + ["builds", "--db", str(db)], cwd=tmp_path, env=child_env(), capture_output=True,
                            text=True, check=True).stdout
    assert "neuron" in builds
    describe = json.loads(subprocess.run(TC + ["refdev", "describe", "--profile", "young-backend", "--json"],
                                         env=child_env(), capture_output=True, text=True, check=True).stdout)
    reported = {e["op"] for e in summary["missing_ops"]}
    assert reported and reported <= set(describe["missing"])
    # the neuron profile's dtype policy and patterns did the classifying: complex is unsupported there
    assert summary["backend_skip_kinds"]["unsupported_dtype"] >= 1


def test_standin_refuses_an_in_tree_device(tmp_path):
    proc = subprocess.run(TC + ["rehearse", "cuda"], cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "in-tree device" in proc.stderr and "Traceback" not in proc.stderr
