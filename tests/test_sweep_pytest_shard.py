"""--suite ops|upstream: the pytest plugin keeps exactly this shard of the collected tests."""
import subprocess
import sys


def _collect(tmp_path, *args):
    r = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_many.py"), "--collect-only", "-q",
                        "-p", "torchconform.sweep.pytest_shard", "-p", "no:cacheprovider", *args],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    return {line.strip() for line in r.stdout.splitlines() if "::" in line}


def test_shards_of_pytest_items_are_disjoint_and_complete(tmp_path):
    (tmp_path / "test_many.py").write_text(
        "import pytest\n@pytest.mark.parametrize('i', range(10))\ndef test_x(i):\n    pass\n")
    everything = _collect(tmp_path)
    assert len(everything) == 10
    parts = [_collect(tmp_path, "--tc-sweep-shards", "3", "--tc-sweep-shard", str(i)) for i in range(3)]
    assert set().union(*parts) == everything
    assert sum(len(p) for p in parts) == 10 and sorted(len(p) for p in parts) == [3, 3, 4]
    assert parts[1] == _collect(tmp_path, "--tc-sweep-shards", "3", "--tc-sweep-shard", "1")  # deterministic
