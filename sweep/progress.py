"""A progress line: models done of total, counts per outcome, ETA.

On a terminal the line redraws in place; otherwise (CI logs) it prints a new
line at most every ``interval`` seconds and at the end.
"""
from __future__ import annotations

import sys
import time
from collections import Counter

from torchconform.collectors.outcome import OUTCOMES


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def __init__(self, total: int, stream=None, interval: float = 10.0, width: int = 24):
        self.total = total
        self.done = 0
        self.counts: Counter = Counter()
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = interval
        self.width = width
        self.start = time.monotonic()
        self._last = 0.0

    def eta(self) -> float | None:
        if not self.done:
            return None
        elapsed = time.monotonic() - self.start
        return elapsed / self.done * (self.total - self.done)

    def line(self) -> str:
        frac = self.done / self.total if self.total else 1.0
        filled = int(round(frac * self.width))
        bar = "#" * filled + "-" * (self.width - filled)
        counts = " ".join(f"{o} {self.counts[o]}" for o in OUTCOMES if self.counts[o])
        eta = self.eta()
        eta_text = "ETA --:--" if eta is None else f"ETA {_clock(eta)}"
        return f"[{bar}] {self.done}/{self.total} models  {counts or 'no outcomes yet'}  {eta_text}"

    def update(self, outcomes) -> None:
        self.done += 1
        for o in outcomes:
            self.counts[o.outcome] += 1
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r\x1b[K" + self.line())
            self.stream.flush()
        elif now - self._last >= self.interval or self.done == self.total:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._last = now

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
