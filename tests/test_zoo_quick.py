"""Acceptance: the quick zoo on refdev's default profile, and the CPU control run.

One sweep per device through the real engine (2 workers, one per refdev
device); about a minute each on 2 cores.
"""
import os

import pytest

pytest.importorskip("transformers", reason="extra zoo: pip install 'torchconform[zoo]'")

from torchconform.core.outcome import MISSING_OP, PASS, PASS_FALLBACK, SKIP_BACKEND  # noqa: E402
from torchconform.sweep.driver import SweepOptions, run_sweep  # noqa: E402


def _sweep(tmp_path, device, **extra):
    return run_sweep(SweepOptions(build=f"quick-{device}", selection="quick", device=device,
                                  db=str(tmp_path / "r.db"), workers=2, timeout=300,
                                  progress_stream=open(os.devnull, "w"), **extra))


def test_quick_zoo_on_refdev_default_profile(tmp_path):
    from torchconform import refdev

    report = _sweep(tmp_path, "refdev")
    outcomes = report.outcomes
    assert report.selected == report.ran and len(outcomes) == 3 * report.selected
    kinds = {o.outcome for o in outcomes}
    assert PASS in kinds and PASS_FALLBACK in kinds and SKIP_BACKEND in kinds
    missing = {o.missing_op for o in outcomes if o.outcome == SKIP_BACKEND and o.kind == MISSING_OP}
    truth = refdev.describe()
    assert missing and missing <= set(truth["missing"]), missing - set(truth["missing"])
    fallback = {op for o in outcomes if o.outcome == PASS_FALLBACK for op in o.fallback_ops}
    assert fallback and fallback <= set(truth["fallback"])
    # both refdev devices were used: the workers are pinned one per device
    assert {o.device for o in outcomes if o.outcome == PASS} == {"refdev:0", "refdev:1"}
    assert report.breakdown["missing_ops"][0]["tests"] >= 2


def test_quick_zoo_on_cpu_has_no_backend_skips(tmp_path):
    # inductor would compile C++ per model (minutes on 2 cores); aot_eager still
    # exercises dynamo and AOTAutograd on the device.
    report = _sweep(tmp_path, "cpu", compile_backend="aot_eager")
    assert not [o for o in report.outcomes if o.outcome == SKIP_BACKEND]
    assert report.breakdown["outcomes"][PASS] == len(report.outcomes)
