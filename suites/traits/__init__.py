"""The traits suite: device probes, one ordinary test per trait of the backend
(precision, non-contiguous copies, static shapes, fallback, placeholder outputs,
memory statistics, environment), each measured against CPU through public APIs
and recorded as a trait note on its outcome (``torchconform/core/traitnotes.py``,
format in docs/traits.md).  ``summary --json`` reads the notes back as ``traits``.

Run it as ``torchconform run --suite traits --device refdev|cpu|...``.
"""
from __future__ import annotations

import os

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_FILE = os.path.join(HERE, "test_traits.py")
# ``torchconform run --suite traits`` runs this file; the suite has one selection
# (every probe), so --selection quick and full run the same tests.
TEST_PATHS = [TEST_FILE]
