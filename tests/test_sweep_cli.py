"""The sweep command's contract: user errors are one line, exit 2, nothing stored."""
import subprocess
import sys

import pytest

from torchconform.cli.main import main

CASES = [
    (["--shards", "2", "--shard", "5"], "out of range"),
    (["--selection", "nonesuch"], "unknown model selection"),
    (["--device", "quantum"], "no backend profile for device"),
    (["--variants", "eval,fly"], "unknown variant"),
    (["--suite", "ops", "--engine", "ray"], "--engine ray runs the models suite only"),
]


@pytest.mark.parametrize("args,text", CASES, ids=[c[1].split()[0] for c in CASES])
def test_user_errors_are_one_line_and_store_nothing(tmp_path, capsys, args, text):
    db = tmp_path / "r.db"
    code = main(["sweep", "--build", "b", "--db", str(db), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("torchconform: error:") and text in err[0], err
    assert not db.exists()


def test_console_script_exit_status_and_help(tmp_path):
    r = subprocess.run([sys.executable, "-m", "torchconform", "sweep", "--build", "b", "--db", str(tmp_path / "r.db"),
                        "--shards", "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--shards 0 must be at least 1" in r.stderr
    r = subprocess.run([sys.executable, "-m", "torchconform", "sweep", "--help"], capture_output=True, text=True,
                       timeout=120)
    for flag in ("--suite", "--selection", "--shards", "--shard", "--engine", "--ray-address", "--resume",
                 "--device", "--profile", "--workers", "--db"):
        assert flag in r.stdout
