"""refdev's OpInfo slice compares the device with CPU: its reference runs on CPU for
every sample, factories included (an argument naming the device is renamed ``cpu``),
so a device that computes wrongly is a failure, not a pass against itself."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "refdev"


def test_reference_runs_on_cpu_and_catches_a_wrong_device():
    env = dict(os.environ, TORCHCONFORM_REFDEV_PROFILE="full", TORCHCONFORM_REFDEV_NAME="refdev")
    proc = subprocess.run([sys.executable, str(FIXTURES / "slice_reference.py")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("REFERENCE "))[10:])
    for name in ("sin", "ones", "arange", "full"):
        devices = got["devices"][name]
        # each sample: the device's call, then the CPU reference's
        assert devices and devices[0::2] == ["refdev"] * (len(devices) // 2), (name, devices)
        assert devices[1::2] == ["cpu"] * (len(devices) // 2), (name, devices)
        assert got["statuses"][name][0] == "pass", (name, got["statuses"][name])
    status, detail = got["statuses"]["sin_off_by_one"]
    assert status == "fail" and "not close" in detail, (status, detail)
