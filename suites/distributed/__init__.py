"""The distributed suite: collectives, DDP, FSDP2, DTensor, tensor parallelism and
communication/computation overlap on the device, each test run on ``--world-size``
ranks (default 2; one process and one device each) launched the way PyTorch's
launcher does, and compared with the same program on CPU with gloo.

Run it as ``torchconform run --suite distributed --device refdev|cpu|cuda|...``.
A missing collective, c10d backend or device-module attribute is ``skip_backend``
(kinds missing_collective, missing_c10d_backend, missing_device_api; the name in
``missing_op``); a rank that dies is ``crash``; a hang is ``timeout`` with every rank
killed (docs/classification.md).
"""
from __future__ import annotations

import os

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_FILE = os.path.join(HERE, "test_distributed.py")
TEST_PATHS = [TEST_FILE]
