"""A progress display: done of total, counts per outcome, ETA.

On a terminal it is a rich progress bar redrawn in place; elsewhere (CI logs, a
pipe) it prints a plain line after ``interval`` seconds, then at twice the last
wait each time (at most every ``MAX_INTERVAL``), and one at the end, so a log
stays a few lines long however long the run.  The sweep counts models (one ``update``
per model); ``torchconform run`` counts tests, read from its JSON lines as they
are written.
"""
from __future__ import annotations

import sys
import time
from collections import Counter

from torchconform.core.outcome import FAILED, OUTCOMES, PASSED, SKIPPED, XFAIL, XPASS

MAX_INTERVAL = 600.0   # seconds: the longest wait between two plain lines

# The breakdown's classes (torchconform/core/breakdown.py format_breakdown), in its order and words.
CLASSES = (("passed", PASSED), ("failed", FAILED), ("skipped", SKIPPED), ("xfail", {XFAIL}), ("xpass", {XPASS}))


def outcome_counts(counts: Counter) -> str:
    """``pass 3 crash 1``: every outcome met, by its own name."""
    return " ".join(f"{o} {counts[o]}" for o in OUTCOMES if counts[o])


def class_counts(counts: Counter) -> str:
    """``passed 437 failed 10 skipped 140``: the breakdown's classes met (its numbers)."""
    return " ".join(f"{name} {n}" for name, members in CLASSES if (n := sum(counts[o] for o in members)))


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """``total`` may be None until known (``set_total``); ``describe`` words the counts."""

    def __init__(self, total: int | None, stream=None, interval: float = 10.0, unit: str = "models",
                 describe=outcome_counts):
        self.total = total
        self.done = 0
        self.counts: Counter = Counter()
        self.stream = stream or sys.stderr
        self.interval = interval
        self.unit = unit
        self.describe = describe
        self.start = time.monotonic()
        self._last = self.start
        self._printed = None
        self._bar = self._task = None
        if hasattr(self.stream, "isatty") and self.stream.isatty():
            self._bar = self._make_bar()
        if self._bar is not None and self.total is not None:
            self._show()

    def _make_bar(self):
        """The rich progress bar on this terminal (None on a dumb one); drawn from the first ``_show``."""
        from rich.console import Console
        from rich.progress import BarColumn, SpinnerColumn, TextColumn
        from rich.progress import Progress as RichProgress
        from rich.table import Column

        console = Console(file=self.stream)
        if console.is_dumb_terminal:
            return None  # TERM=dumb: plain lines
        return RichProgress(
            SpinnerColumn(finished_text=" "), BarColumn(bar_width=24),
            TextColumn("{task.fields[line]}", table_column=Column(no_wrap=True, overflow="ellipsis")),
            console=console, redirect_stdout=False, transient=False)

    def eta(self) -> float | None:
        if not self.done or self.total is None:
            return None
        elapsed = time.monotonic() - self.start
        return elapsed / self.done * max(self.total - self.done, 0)

    def line(self, final: bool = False) -> str:
        took = _clock(time.monotonic() - self.start)
        if self.total is not None and self.done >= self.total:
            when = f"in {took}"
        elif final:
            when = f"stopped after {took}"
        else:
            eta = self.eta()
            when = "ETA --:--" if eta is None else f"ETA {_clock(eta)}"
        total = "?" if self.total is None else self.total
        return f"{self.done}/{total} {self.unit}  {self.describe(self.counts) or 'no outcomes yet'}  {when}"

    def set_total(self, total: int) -> None:
        self.total = total
        self._show()

    def add(self, outcomes, done: int | None = None) -> None:
        """``done`` more finished (default: one per outcome), with these outcome names."""
        outcomes = list(outcomes)
        self.counts.update(outcomes)
        self.done += len(outcomes) if done is None else done
        self._show()

    def update(self, outcomes) -> None:
        """One more finished (a model), with its outcome records."""
        self.add([o.outcome for o in outcomes], done=1)

    def sync(self, outcomes) -> None:
        """Say exactly these outcome names (the records the report is made of), nothing else."""
        self.counts = Counter(outcomes)
        self.done = sum(self.counts.values())
        self._show()

    def _show(self, final: bool = False) -> None:
        if self._bar is not None:
            total = self.total if self.total is None else max(self.total, self.done)
            if self._task is None:
                self._task = self._bar.add_task(self.unit, total=total, line="")
                self._bar.start()
            self._bar.update(self._task, completed=self.done, total=total, line=self.line(final))
            return
        now = time.monotonic()
        if final or now - self._last >= self.interval or (self.total is not None and self.done >= self.total):
            state = (self.done, self.total, self.describe(self.counts))
            if state != self._printed:   # the same numbers are not said twice
                self.stream.write(self.line(final) + "\n")
                self.stream.flush()
                self._printed = state
            self._last = now
            self.interval = min(self.interval * 2, max(self.interval, MAX_INTERVAL))

    def close(self, final: bool = True) -> None:
        """End the display; ``final``: leave (or print) its last state, else leave nothing."""
        if final and (self.total is not None or self.done > 0):
            self._show(final=True)
        if self._task is not None:
            self._bar.live.transient = not final
            self._bar.stop()
