"""Nightly: the full transformers zoo on CPU still covers the pinned set.

Opt-in (TORCHCONFORM_NIGHTLY=1): about 10 minutes with 2 workers.  A model
in ``data/expected/transformers-<version>-torch-<major.minor>.yaml`` that no longer builds and
passes eval and train on CPU is a regression of the builder (or of
transformers); newly covered models are reported so the pin can be grown.
"""
import os

import pytest

pytestmark = [
    pytest.mark.nightly,
    pytest.mark.skipif(os.environ.get("TORCHCONFORM_NIGHTLY") != "1", reason="nightly: set TORCHCONFORM_NIGHTLY=1"),
]


def test_full_zoo_on_cpu_covers_the_pinned_set(tmp_path):
    pytest.importorskip("transformers")
    from torchconform.suites.models import coverage
    from torchconform.sweep.driver import SweepOptions, run_sweep

    db = str(tmp_path / "r.db")
    run_sweep(SweepOptions(build="nightly-cov", selection="full", device="cpu", db=db, workers=2,
                           variants=("eval", "train"), timeout=120, memory_limit_mb=4096,
                           progress_stream=open(os.devnull, "w")))
    covered = set(coverage.covered_from_store(db, "nightly-cov"))
    expected = set(coverage.expected()["covered"])
    lost = sorted(expected - covered)
    assert not lost, f"{len(lost)} pinned models no longer covered: {lost[:20]}"
    gained = sorted(covered - expected)
    if gained:
        print(f"{len(gained)} models newly covered (grow the pin): {gained}")
