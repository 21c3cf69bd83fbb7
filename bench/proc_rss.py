"""Peak resident memory of a process tree, sampled from /proc: the root (a pytest
controller), its children (xdist workers) and their children (the fork server's test
processes; their RSS counts the pages they share with their worker)."""
from __future__ import annotations

import os
import threading


def _table() -> dict[int, tuple[int, int]]:
    """{pid: (ppid, rss KiB)} of every process readable now."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        out[int(entry)] = (int(fields.get("PPid", "0").strip() or 0),
                           int((fields.get("VmRSS", "0 kB").split() or ["0"])[0]))
    return out


class TreeRss:
    """``with TreeRss(find_root) as rss:`` -- ``find_root()`` returns the root pid once it
    exists (or None); peaks in MiB: ``rss.root``, ``rss.children`` {pid: MiB}, ``rss.grandchild``."""

    def __init__(self, find_root, every: float = 0.5):
        self.find_root, self.every = find_root, every
        self.root = 0.0
        self.children: dict[int, float] = {}
        self.grandchild = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _loop(self):
        root = None
        while not self._stop.wait(self.every):
            root = root or self.find_root()
            if not root:
                continue
            table = _table()
            if root in table:
                self.root = max(self.root, table[root][1] / 1024)
            kids = {pid for pid, (ppid, _) in table.items() if ppid == root}
            for pid in kids:
                self.children[pid] = max(self.children.get(pid, 0.0), table[pid][1] / 1024)
            for pid, (ppid, rss) in table.items():
                if ppid in kids:
                    self.grandchild = max(self.grandchild, rss / 1024)


def pytest_child_of(pid: int):
    """A ``find_root`` for the pytest process a ``torchconform run`` (``pid``) starts."""
    def find():
        for child, (ppid, _) in _table().items():
            if ppid == pid:
                try:
                    with open(f"/proc/{child}/cmdline", "rb") as fh:
                        if b"pytest" in fh.read():
                            return child
                except OSError:
                    continue
        return None
    return find
