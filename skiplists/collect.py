"""Collect tests (without running them) and record what skiplist entries match on.

``collect(pytest_args)`` runs ``pytest --collect-only`` in a subprocess with this
module loaded as a plugin; the plugin writes one JSON line per collected item with
its ``TestInfo`` (op, variant, dtype and kind come from the live item, which a
bare node id cannot give).  A subprocess, because device set-up and PyTorch's test
infrastructure must start fresh for each collection.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile

from torchconform import settings
from torchconform.skiplists.entries import TestInfo, info_from_item
from torchconform.errors import UserError

ENV_OUT = "TORCHCONFORM_COLLECT_OUT"


def pytest_collection_finish(session):
    out = settings.given(ENV_OUT)
    if not out:
        return
    with open(out, "w", encoding="utf-8") as fh:
        for item in session.items:
            fh.write(json.dumps(dataclasses.asdict(info_from_item(item))) + "\n")


def collect(pytest_args: list[str], cwd: str | None = None, env: dict | None = None) -> list[TestInfo]:
    """TestInfo of every test ``pytest <pytest_args>`` would run."""
    with tempfile.TemporaryDirectory(prefix="tc-collect-") as tmp:
        out = os.path.join(tmp, "collected.jsonl")
        run_env = dict(os.environ if env is None else env)
        run_env[ENV_OUT] = out
        cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
               "-p", "torchconform.skiplists.collect", *pytest_args]
        proc = subprocess.run(cmd, cwd=cwd, env=run_env, capture_output=True, text=True)
        # 5 = nothing collected: an empty list is a valid answer.
        if proc.returncode not in (0, 5) or not os.path.exists(out):
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
            raise UserError(f"collecting tests with `pytest {' '.join(pytest_args)}` failed (exit {proc.returncode}: "
                            f"{tail[0]}); check the --collect arguments")
        with open(out, encoding="utf-8") as fh:
            return [TestInfo(**json.loads(line)) for line in fh if line.strip()]
