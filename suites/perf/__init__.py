"""The perf suite: per-operator performance, one test per OpInfo operator x dtype, timed on
the device and on CPU in the same test (docs/perf.md).

``torchconform run --suite perf [--selection quick|full]``: quick times the ops suite's quick
set (suites/ops/selection.py ``QUICK_OPS``) in float32; full every OpInfo of ``op_db`` in every
dtype it supports on the device (an operator the device lacks ends as a backend skip naming
it, so the timings cover what the device implements or falls back on).

Each test times the forward call and, where the op and dtype have a gradient, the backward
(``measure.py``), leaves one row per direction on its outcome (torchconform/core/perf.py), and
passes with a one-line ``perf:`` note; the store keeps the rows per build (``perf_results``).
"""
from __future__ import annotations

import os

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_PATHS = [os.path.join(HERE, "test_perf.py")]
# One worker unless -n says otherwise: timings taken beside another worker's tests measure
# the contention; one xdist worker still isolates a crash from the run.
DEFAULT_WORKERS = 1
