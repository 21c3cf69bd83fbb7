"""Build cache behaviour that needs a real (slow) compile: nightly only."""
import os
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.nightly,
    pytest.mark.skipif(os.environ.get("TORCHCONFORM_NIGHTLY") != "1", reason="nightly: set TORCHCONFORM_NIGHTLY=1"),
]

LOAD = ("import torch; from torchconform import refdev; n = refdev.load(); "
        "print('OK', (torch.ones(2, device=n) * 2).cpu().tolist())")


def test_concurrent_first_loads_build_once(tmp_path):
    env = dict(os.environ, TORCHCONFORM_REFDEV_CACHE=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", LOAD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(3)]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert "OK [2.0, 2.0]" in out
    builds = [d for d in (tmp_path / "cache").iterdir() if d.is_dir()]
    assert len(builds) == 1
    assert (builds[0] / "built.ok").exists()
    assert len([f for f in builds[0].iterdir() if f.suffix == ".so"]) == 1
