"""The gate's acceptance, end to end on refdev.

Builds come from real runs of a tiny fixture suite (tests/fixtures/gate/suite)
through pytest with the torchconform plugin on refdev, under two refdev
profiles: A (everything native) and B (aten::sin missing, aten::exp on CPU
fallback).  The gate is then driven through its CLI, as CI would.
"""
import fcntl
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from torchconform.core.outcome import Outcome
from torchconform.db import read_builds, read_changes
from torchconform.db.opening import open_store

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures" / "gate"
SUITE = [str(FIXTURES / "suite" / "fx_small_ops.py"), str(FIXTURES / "suite" / "fx_flaky.py")]
PROFILE_A = FIXTURES / "profiles" / "gate-a.yaml"
PROFILE_B = FIXTURES / "profiles" / "gate-b.yaml"


def read_outcomes(jsonl: Path) -> dict:
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    return {r["test_id"]: Outcome.from_dict(r) for r in records if r.get("type") == "outcome"}


def _clean_env() -> dict:
    """This process's environment less what would leak into the child: our own
    settings, GitHub's summary file, and xdist's worker variables (a child that
    believes it is an xdist worker writes no JSON lines)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("TORCHCONFORM_", "PYTEST_", "GITHUB_")) or k == "TORCHCONFORM_REFDEV_CACHE"}


def run_build(db: str, build: str, profile: Path, tmp: Path, *pytest_args: str, env: dict | None = None,
              branch: str = "main") -> dict:
    """Run the fixture suite on refdev with the plugin and store the outcomes as ``build``."""
    jsonl = tmp / f"{build}.jsonl"
    full_env = _clean_env()
    full_env.update(TORCHCONFORM_REFDEV_PROFILE=str(profile), **(env or {}))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", *SUITE,
         "--tc-device", "refdev", "--tc-jsonl", str(jsonl), *pytest_args],
        cwd=HERE.parent, env=full_env, capture_output=True, text=True, timeout=900)  # a fresh machine compiles refdev first
    assert jsonl.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    run = next(r for r in records if r.get("type") == "run_start")["run"]
    outcomes = list(read_outcomes(jsonl).values())
    assert outcomes, proc.stdout[-2000:] + proc.stderr[-2000:]
    with open_store(db) as store:
        # what the runner's store sink records (db/sink.py), the backend profile included: A and
        # B differ only in refdev's simulated profile, so they are one series (db/series.py)
        store.ensure_build(build, device=run["device"], profile=run["profile"], branch=branch,
                           torch_version=run["torch_version"], backend_profile=run["backend_profile"])
        run_id = store.start_run(build, suite="gate-fixture", command=run["command_line"])
        store.add_outcomes(run_id, outcomes)
        store.finish_run(run_id, proc.returncode)
    return read_outcomes(jsonl)


def gate(db: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The console command in a child process, as CI runs it."""
    full_env = _clean_env()
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "torchconform", "gate", "--db", db, *args],
                          capture_output=True, text=True, env=full_env, timeout=300)


@pytest.fixture
def gate_here(capsys, monkeypatch):
    """The same CLI entry point (``cli.main.main``) in this process: cheaper, same contract."""
    from torchconform.cli.main import main

    def call(db: str, *args: str, env: dict | None = None):
        for key in ("GITHUB_STEP_SUMMARY", "TORCHCONFORM_DB"):
            monkeypatch.delenv(key, raising=False)
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()
        code = main(["gate", "--db", db, *args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)
    return call


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Builds A and B, made once per test session: under xdist the workers share
    them through a folder next to their own temp folders, under a file lock
    (every test below adds builds of its own name, so sharing is safe)."""
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's temp folder sits in the session's; alone, ours is the session's.
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "gate-e2e-shared"
    shared.mkdir(exist_ok=True)
    db = str(shared / "results.db")
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (shared / "done").exists():
                run_build(db, "A", PROFILE_A, shared)
                run_build(db, "B", PROFILE_B, shared)
                (shared / "done").write_text("A B")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return {"db": db, "tmp": tmp_path_factory.mktemp("gate-e2e"),
            "A": read_outcomes(shared / "A.jsonl"), "B": read_outcomes(shared / "B.jsonl")}


def test_fixture_builds_differ_as_the_profiles_say(builds):
    a, b = builds["A"], builds["B"]
    sin = [t for t in a if "test_sin" in t]
    assert sin and all(a[t].outcome == "pass" for t in a)
    assert all(b[t].outcome == "skip_backend" and b[t].missing_op.startswith("aten::sin") for t in sin)
    exp = [t for t in b if "test_exp" in t]
    assert exp and all(b[t].outcome == "pass_fallback" and "aten::exp.out" in b[t].fallback_ops for t in exp)


def test_gate_fails_naming_operator_regressions_and_fallback_creep(builds):
    tmp = builds["tmp"]
    summary, junit, step = tmp / "ab.md", tmp / "ab.xml", tmp / "step.md"
    proc = gate(builds["db"], "--build", "B", "--baseline", "A", "--summary", str(summary),
                "--junit", str(junit), "--reruns", "1", env={"GITHUB_STEP_SUMMARY": str(step)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gate FAILED" in proc.stdout
    text = summary.read_text()
    assert step.read_text().strip() == text.strip()
    assert "### `aten::sin.out` (3 tests)" in text
    for tid in [t for t in builds["A"] if "test_sin" in t]:
        assert tid in text
    assert "## New missing operators" in text and "| `aten::sin.out` | 3 | 3 |" in text
    assert "## Fallback creep (2 tests" in text and "`aten::exp.out`" in text
    assert "## Repro commands" in text and "--tc-device refdev" in text
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    for rule in ("regression", "new_missing_op", "fallback_creep"):
        assert cases[rule].find("failure") is not None, rule
    assert cases["missing_tests"].find("failure") is None


def test_gate_back_from_b_to_a_passes_and_reports_fixes(builds, gate_here):
    proc = gate_here(builds["db"], "--build", "A", "--baseline", "B", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["passed"] and out["exit_code"] == 0
    assert out["fixes"]["ops_implemented"] == [{"operator": "aten::sin.out", "tests": 3}]
    assert {f["test_id"] for f in out["fixes"]["tests"]} == {t for t in builds["A"] if "test_sin" in t}
    assert {f["test_id"] for f in out["fixes"]["now_native"]} == {t for t in builds["A"] if "test_exp" in t}


def test_latest_baseline_and_first_build(builds, gate_here):
    proc = gate_here(builds["db"], "--build", "B", "--baseline", "latest:main", "--json", "--reruns", "0")
    assert proc.returncode == 1 and json.loads(proc.stdout)["baseline"] == "A"
    first = gate_here(builds["db"], "--build", "A", "--baseline", "latest")
    assert first.returncode == 2 and "no baseline" in first.stderr and len(first.stderr.strip().splitlines()) == 1
    ok = gate_here(builds["db"], "--build", "A", "--baseline", "latest", "--allow-no-baseline")
    assert ok.returncode == 0 and "first build" in ok.stdout


def test_flaky_test_is_confirmed_stored_and_does_not_fail(builds, gate_here):
    tmp = builds["tmp"]
    state = tmp / "flaky-state"
    state.write_text("1")                  # fail once, then pass
    new = run_build(builds["db"], "F", PROFILE_A, tmp, env={"TC_GATE_FLAKY_STATE": str(state)})
    flaky_id = next(t for t in new if "test_sometimes_fails" in t)
    assert new[flaky_id].outcome == "fail"
    summary = tmp / "flaky.md"
    proc = gate(builds["db"], "--build", "F", "--baseline", "A", "--reruns", "2", "--summary", str(summary),
                env={"TC_GATE_FLAKY_STATE": str(state)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "flaky (not failing)" in proc.stdout and flaky_id in proc.stdout
    text = summary.read_text()
    assert "## Flaky tests (1" in text and "1: fail, 2: pass, 3: pass" in text
    with open_store(builds["db"]) as store:
        history = [h for h in read_changes.test_history(store, flaky_id) if h["build"] == "F"]
        assert [(h["attempt"], h["outcome"]) for h in history] == [(1, "fail"), (2, "pass"), (3, "pass")]
        assert [f["flaky"] for f in read_changes.flaky_tests(store, test_id=flaky_id)] == [True]
    # Gating the same build again reuses the stored confirmation: no new attempts.
    again = gate_here(builds["db"], "--build", "F", "--baseline", "A", "--reruns", "2")
    assert again.returncode == 0 and flaky_id in again.stdout
    with open_store(builds["db"]) as store:
        assert len([h for h in read_changes.test_history(store, flaky_id) if h["build"] == "F"]) == 3


def test_a_run_that_lost_half_its_tests_fails_on_missing_tests(builds, gate_here):
    # Same device and profile as A, but the run stopped after half the tests.
    half = run_build(builds["db"], "H", PROFILE_A, builds["tmp"], "-k", "sin or flaky")
    assert 0 < len(half) <= len(builds["A"]) / 2
    proc = gate_here(builds["db"], "--build", "H", "--baseline", "A", "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rules = {r["rule"]: r for r in json.loads(proc.stdout)["rules"]}
    assert rules["missing_tests"]["status"] == "fail"
    assert len(rules["missing_tests"]["findings"]) == len(builds["A"]) - len(half)
    assert all(r["status"] == "pass" for name, r in rules.items() if name not in ("missing_tests",))


def test_input_errors_exit_2_with_one_line(builds, tmp_path, gate_here):
    unknown = gate_here(builds["db"], "--build", "nope", "--baseline", "A")
    assert unknown.returncode == 2 and "unknown build 'nope'" in unknown.stderr
    bad = tmp_path / "gate.yaml"
    bad.write_text("rules:\n  regression: {mode: maybe}\n")
    proc = gate_here(builds["db"], "--build", "B", "--baseline", "A", "--config", str(bad))
    assert proc.returncode == 2 and str(bad) in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = gate_here(builds["db"], "--build", "B", "--baseline", "A", "--summary", str(tmp_path / "no" / "s.md"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    with open_store(builds["db"]) as store:
        assert not [b for b in read_builds.list_builds(store) if b["name"] == "nope"]
