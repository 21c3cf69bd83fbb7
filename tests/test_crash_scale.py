"""A crash-heavy run stores exactly the generated truth (bench/crash_tree.py, the small
version of bench/crash_scale.py): segfaults, aborts, hangs and memory hogs in several
files, through `torchconform run -n 2` on refdev, with no INTERNALERROR, and no crash
makes a worker collect the files again (each file is imported once per worker)."""
import collections
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
import crash_tree  # noqa: E402
from runner_support import FIXTURES, REPO, by_name, child_env, run_pytest  # noqa: E402

FILES = 4
LIMIT_MB = 512


def test_a_crash_heavy_run_stores_exactly_the_generated_truth(tmp_path):
    src = tmp_path / "checkout"
    truth = crash_tree.generate(str(src / "test"), 2000, files=FILES, classes=4, seed=31,
                                counts=dict(segv=12, abort=12, hang=12, hog=12, output=3),
                                hog_mib=4 * LIMIT_MB, output_kib=1024)
    log = tmp_path / "collections.log"
    db = tmp_path / "tc.db"
    names = ",".join(f"test_gen{f:03d}" for f in range(FILES))
    cmd = [sys.executable, "-m", "torchconform", "run", "--suite", "upstream", "--pytorch-src", str(src),
           "--files", names, "-n", "2", "--timeout", "3", "--memory-limit-mb", str(LIMIT_MB),
           "--db", str(db), "--build", "crashy", "--jsonl", str(tmp_path / "crashy.jsonl")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=child_env(**{crash_tree.COLLECT_LOG_ENV: str(log)}),
                          capture_output=True, text=True, timeout=900)
    pytest_log = (tmp_path / "crashy.log").read_text(errors="replace")
    assert proc.returncode == 0, proc.stderr[-3000:] + pytest_log[-3000:]
    assert "INTERNALERROR" not in pytest_log and "replacing crashed worker" not in pytest_log

    from torchconform.db.read_rows import iter_outcomes
    from torchconform.db.opening import open_store

    with open_store(f"sqlite:///{db}", create=False) as store:
        outcomes = list(iter_outcomes(store, "crashy"))
    result = crash_tree.compare(truth, crash_tree.stored_by_id(outcomes, "test/"))
    assert (result["stored"], result["lost"], result["duplicated"], result["extra"], result["misclassified"]) \
        == (2000, 0, 0, 0, 0), json.dumps(result["examples"], indent=1)
    # a hog's crash names its test and the limit
    hog = next(o for o in outcomes if "ran out of memory" in o.message)
    assert f"(limit {LIMIT_MB} MiB)" in hog.message and hog.test_id in hog.message
    # 48 crashes and timeouts, and each file was collected once by each of the two workers
    collected = collections.Counter(line.split()[1] for line in log.read_text().splitlines())
    assert collected == {f"test_gen{f:03d}": 2 for f in range(FILES)}, collected


def test_a_worker_that_ends_its_session_mid_run_does_not_end_the_run(tmp_path):
    # Without the fork server a worker runs its tests itself: a session it ends holding
    # tests (pytest-xdist's `assert not crashitem`) is a crash of that test, and the run goes on.
    proc, run, outcomes = run_pytest([FIXTURES / "fx_exit_midrun.py", "--tc-device", "cpu", "-n", "2",
                                      "--tc-fork-server", "off", "-p", "no:randomly"], tmp_path, timeout=600)
    text = proc.stdout + proc.stderr
    assert "assert not crashitem" not in text, text[-3000:]
    got = by_name(outcomes)
    assert len(outcomes) == 25 and len(got) == 25, sorted(got)
    assert got["test_exits_the_session"].outcome == "crash"
    assert all(o.outcome == "pass" for name, o in got.items() if name != "test_exits_the_session")
    assert run["total"] == 25


def test_a_memory_limit_without_workers_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "torchconform", "run", "--device", "cpu", "--ops", "abs", "-n", "0",
                           "--memory-limit-mb", "100", "--db", str(tmp_path / "t.db")],
                          cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and not (tmp_path / "t.db").exists()
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--memory-limit-mb 100 needs workers" in lines[0] and "-n 1" in lines[0], proc.stderr


def test_a_test_past_the_memory_limit_is_a_crash_naming_it_with_or_without_the_fork_server(tmp_path):
    for mode in ("on", "off"):
        proc, run, outcomes = run_pytest([FIXTURES / "fx_memory_hog.py", "--tc-device", "cpu", "-n", "2",
                                          "--tc-fork-server", mode, "--tc-memory-limit-mb", "512", "-p", "no:randomly"],
                                         tmp_path, jsonl=f"{mode}.jsonl", timeout=600)
        got = by_name(outcomes)
        assert {k: v.outcome for k, v in got.items()} == {
            "test_before": "pass", "test_python_hog": "crash", "test_torch_hog": "crash", "test_after": "pass"}, mode
        for name in ("test_python_hog", "test_torch_hog"):
            assert "ran out of memory (limit 512 MiB)" in got[name].message and got[name].test_id in got[name].message
