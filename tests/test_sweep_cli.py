"""The sweep command's contract: user errors are one line, exit 2, nothing stored."""
import os
import subprocess
import sys


def _run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "torchconform", "sweep", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_user_errors_are_one_line_and_store_nothing(tmp_path):
    db = tmp_path / "r.db"
    cases = [
        (["--build", "b", "--shards", "2", "--shard", "5"], "out of range"),
        (["--build", "b", "--selection", "nonesuch"], "unknown model selection"),
        (["--build", "b", "--device", "quantum"], "no backend profile for device"),
        (["--build", "b", "--variants", "eval,fly"], "unknown variant"),
        (["--build", "b", "--suite", "ops", "--engine", "ray"], "--engine ray runs the models suite only"),
    ]
    for args, text in cases:
        r = _run(*args, "--db", str(db))
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("torchconform: error:") and text in lines[0], r.stderr
    assert not db.exists()


def test_help_lists_the_options():
    r = _run("--help")
    for flag in ("--suite", "--selection", "--shards", "--shard", "--engine", "--ray-address", "--resume",
                 "--device", "--profile", "--workers", "--db"):
        assert flag in r.stdout
