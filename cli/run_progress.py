"""The progress reader of ``torchconform run``: a thread that reads the run's outcome records
(JSON lines) as the child pytest's plugin appends them (collectors/sink_jsonl.py) and draws
the progress line on stderr (sweep/progress.py), for a quiet run (no ``-v``).

``RunProgress`` is what cli/cmd_run.py and cli/run_child.py use: ``start`` once pytest runs,
``abandon`` when the CLI is leaving in an exception (a terminal gets its cursor back),
``stop`` when pytest has ended, and ``finish`` to end the display on the very records the
breakdown counts.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import threading

from torchconform.sweep.progress import Progress, class_counts

INTERVAL = 60.0   # seconds before the first plain line when stderr is not a terminal


class _Follow(threading.Thread):
    """Reads the run's JSON lines as the plugin appends them (collectors/sink_jsonl.py) and
    tells ``progress`` the planned count and each outcome."""

    def __init__(self, path: str, progress):
        super().__init__(name="torchconform-progress", daemon=True)
        self.path, self.progress = path, progress
        self.stopped = threading.Event()

    def run(self):
        fh, rest = None, ""
        try:
            while not self.stopped.wait(0.5):
                if fh is None:
                    if not os.path.exists(self.path):
                        continue
                    fh = open(self.path, encoding="utf-8", errors="replace")
                *lines, rest = (rest + fh.read()).split("\n")
                names = []
                for line in lines:
                    with contextlib.suppress(ValueError, KeyError, TypeError):   # a line cut short
                        rec = json.loads(line)
                        if rec.get("type", "outcome") == "outcome":
                            names.append(rec["outcome"])
                        elif rec.get("type") == "run_planned":
                            self.progress.set_total(int(rec["run"]["planned"]))
                if names:
                    self.progress.add(names)
        finally:
            if fh is not None:
                fh.close()

    def stop(self):
        self.stopped.set()
        if self.ident is not None:   # never started (pytest could not start): nothing to wait for,
            self.join()              # and the error that stopped it is what the user must see


class RunProgress:
    """The progress display of one run, fed from its JSON lines file ``jsonl``."""

    def __init__(self, jsonl: str):
        self.display = Progress(None, stream=sys.stderr, interval=INTERVAL, unit="tests", describe=class_counts)
        self.follow = _Follow(jsonl, self.display)

    def start(self) -> None:
        self.follow.start()

    def abandon(self) -> None:
        """The run is left in an exception: close the display without its final line."""
        self.display.close(final=False)

    def stop(self) -> None:
        """pytest has ended: stop reading (what was left unread is synced by ``finish``)."""
        self.follow.stop()

    def finish(self, run: dict, outcomes, final: bool) -> None:
        """End the display on the run's records as read back (``run`` its run record)."""
        if run.get("planned") is not None:
            self.display.set_total(int(run["planned"]))
        self.display.sync(o.outcome for o in outcomes)
        self.display.close(final=final)
