"""JSON-lines sink: one record per line, appended and flushed per batch.

Lines: ``{"type": "run_start", "run": {...}}``, then ``{"type": "outcome", ...}``
(the Outcome fields; ``{"type": "run_planned", "run": {..., "planned": N}}`` once collection
is done), then ``{"type": "run_end", "run": {...}, "exitstatus": N}``.
Appending and flushing each batch means a killed run keeps every finished batch;
a half-written last line (killed mid-write) is ignored by :func:`read_jsonl`.
"""
from __future__ import annotations

import json
import os
import time

from torchconform.core.outcome import Outcome


class JsonlSink:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")
        self._next_sync = 0.0

    # A serial run writes after every test; the kernel keeps what was written when the
    # process dies (even by SIGKILL or abort), so fsync only guards against the machine
    # going down: once a second, and at run end, is enough.
    FSYNC_EVERY = 1.0

    def _write(self, records, sync: bool = False):
        self._fh.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
        self._fh.flush()
        now = time.monotonic()
        if sync or now >= self._next_sync:
            os.fsync(self._fh.fileno())
            self._next_sync = now + self.FSYNC_EVERY

    def pytest_torchconform_run_start(self, config, run):
        self._write([{"type": "run_start", "run": run}])

    def pytest_torchconform_planned(self, config, run, planned):
        self._write([{"type": "run_planned", "run": run}])

    def pytest_torchconform_outcomes(self, config, outcomes):
        self._write([{"type": "outcome", **o.to_dict()} for o in outcomes])

    def pytest_torchconform_run_end(self, config, run, exitstatus):
        self._write([{"type": "run_end", "run": run, "exitstatus": int(exitstatus)}], sync=True)
        self._fh.close()


def read_jsonl(path) -> tuple[dict, list[Outcome]]:
    """(run dict of the last run_start/run_end seen, outcomes) from a JSONL file."""
    run, outcomes = {}, []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
            kind = rec.pop("type", "outcome")
            if kind in ("run_start", "run_planned", "run_end"):
                run = rec.get("run", run)
            else:
                outcomes.append(Outcome.from_dict(rec))
    return run, outcomes
