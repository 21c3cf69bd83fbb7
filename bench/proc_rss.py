"""Peak resident memory of processes, sampled from /proc by a background thread: one
reader of the process table (``table``) and one sampling thread (``Sampler``) for every
bench.  ``TreeRss``: a process tree, the root (a pytest controller), its children (xdist
workers) and their children (the fork server's test processes; their RSS counts the pages
they share with their worker)."""
from __future__ import annotations

import os
import threading


def table(argv: bool = False) -> dict[int, tuple]:
    """{pid: (ppid, rss KiB)} of every process readable now; with ``argv``,
    {pid: (ppid, rss KiB, [argv...])}."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
            if argv:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    args = fh.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        row = (int(fields.get("PPid", "0").strip() or 0), int((fields.get("VmRSS", "0 kB").split() or ["0"])[0]))
        out[int(entry)] = (*row, args) if argv else row
    return out


def descendants(pid: int, procs: dict) -> set[int]:
    """Every process below ``pid`` in a ``table()``."""
    mine, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, row in procs.items() if row[0] in frontier} - mine
        mine |= frontier
    return mine


class Sampler:
    """``with Sampler(every=...)``: calls ``self.sample()`` every ``every`` seconds on a
    background thread until the block ends (subclasses say what a sample records)."""

    def __init__(self, every: float = 0.5):
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _loop(self):
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        """Take one reading; each bench's sampler says what it reads (seed_scale, zoo_scale)."""
        raise NotImplementedError(f"{type(self).__name__} must define sample()")


class TreeRss(Sampler):
    """``with TreeRss(find_root) as rss:`` -- ``find_root()`` returns the root pid once it
    exists (or None); peaks in MiB: ``rss.root``, ``rss.children`` {pid: MiB}, ``rss.grandchild``."""

    def __init__(self, find_root, every: float = 0.5):
        super().__init__(every)
        self.find_root = find_root
        self.root_pid = None
        self.root = 0.0
        self.children: dict[int, float] = {}
        self.grandchild = 0.0

    def sample(self) -> None:
        self.root_pid = self.root_pid or self.find_root()
        if not self.root_pid:
            return
        procs = table()
        root = self.root_pid
        if root in procs:
            self.root = max(self.root, procs[root][1] / 1024)
        kids = {pid for pid, (ppid, _) in procs.items() if ppid == root}
        for pid in kids:
            self.children[pid] = max(self.children.get(pid, 0.0), procs[pid][1] / 1024)
        for pid, (ppid, rss) in procs.items():
            if ppid in kids:
                self.grandchild = max(self.grandchild, rss / 1024)


def pytest_child_of(pid: int):
    """A ``find_root`` for the pytest process a ``torchconform run`` (``pid``) starts."""
    def find():
        for child, (ppid, _) in table().items():
            if ppid == pid:
                try:
                    with open(f"/proc/{child}/cmdline", "rb") as fh:
                        if b"pytest" in fh.read():
                            return child
                except OSError:
                    continue
        return None
    return find
