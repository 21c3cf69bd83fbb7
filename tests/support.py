"""Helpers shared by several test files (tests/ is on sys.path: no package)."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def refdev_with(needed) -> str:
    """Load refdev; skip only when its profile deliberately lacks (or only falls back
    for) one of ``needed``.  An operator absent from describe() altogether is a refdev
    bug and must fail, not skip."""
    from torchconform import refdev

    name = refdev.load()
    info = refdev.describe()
    lacking = [op for op in needed if op in info["missing"] or op in info["fallback"]]
    if lacking:
        pytest.skip(f"profile {info['profile']} lacks {', '.join(lacking)}")
    return name


def child_env(**extra) -> dict:
    """Environment for a child pytest: without the xdist worker variables of this
    run (the child would take itself for a worker and record nothing)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT_TEST"))}
    env.update(extra)
    return env


def _namespace_runs() -> bool:
    """Whether a private mount namespace works here (a small or read-only file system
    without touching the host)."""
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


needs_namespace = pytest.mark.skipif(not _namespace_runs(),
                                     reason="no private mount namespace here (unshare -Urm + mount tmpfs)")
