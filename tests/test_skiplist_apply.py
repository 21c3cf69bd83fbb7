"""Skiplists applied by the plugin, end to end: outcomes in the store, propose, prune, lint --collect.

Uses tests/fixtures/skiplist/fx_skip_sample.py on ``--tc-device cpu`` (runs anywhere):
``mul`` fails on purpose, ``add``/``neg``/``test_plain`` pass.
"""
import os
import subprocess
import sys

import pytest
from support import child_env

from torchconform.db import read_rows
from torchconform.db.opening import open_store

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAMPLE = os.path.join(HERE, "fixtures", "skiplist", "fx_skip_sample.py")
ISSUE = "https://github.com/example/backend/issues"

LIST = f"""\
backend: cpu
entries:
  - id: mul-wrong-values
    match: {{op: mul, kind: test_value}}
    mode: xfail
    category: known_bug
    reason: mul gives wrong values on this device
    issue: {ISSUE}/7
    added: 2026-11-30
  - id: neg-int
    match: {{op: neg, dtype: int64}}
    mode: xfail
    category: known_bug
    reason: neg on int64 was wrong, fixed since then (a stale expectation)
    issue: {ISSUE}/8
    added: 2026-11-30
  - id: plain-too-slow
    match: {{test: "*::test_plain_*"}}
    mode: skip
    category: too_slow
    reason: takes minutes on this device
    issue: {ISSUE}/9
    added: 2026-11-30
  - id: sub-gone
    match: {{op: sub}}
    mode: skip
    category: known_bug
    reason: sub used to crash the compiler; the test is gone now
    issue: {ISSUE}/10
    added: 2026-11-30
"""


def cli(*args, check=None):
    proc = subprocess.run([sys.executable, "-m", "torchconform.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=child_env())
    if check is not None:
        assert proc.returncode == check, proc.stdout + proc.stderr
    return proc


def run_sample(tmp, *args):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "torchconform.collectors.skiplist_plugin", SAMPLE, *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=child_env())
    return proc


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("skiplist-apply")
    listing = tmp / "cpu-known.yaml"
    listing.write_text(LIST)
    db = f"sqlite:///{tmp / 'results.db'}"
    with_list = run_sample(tmp, "--tc-device", "cpu", "--tc-skiplist", str(listing), "--tc-db", db, "--tc-build", "with-list")
    bare = run_sample(tmp, "--tc-device", "cpu", "--tc-db", db, "--tc-build", "bare")
    assert with_list.returncode == 0, with_list.stdout[-3000:] + with_list.stderr[-3000:]
    assert bare.returncode == 1, bare.stdout[-3000:]
    store = open_store(db)
    try:
        outcomes = {name: {o.name: o for o in read_rows.iter_outcomes(store, name)} for name in ("with-list", "bare")}
    finally:
        store.close()
    return {"tmp": tmp, "list": str(listing), "db": db, "outcomes": outcomes}


def test_skip_and_xfail_entries_end_as_their_outcomes_with_the_entry(world):
    got = world["outcomes"]["with-list"]
    plain = got["test_plain_cpu"]
    assert (plain.outcome, plain.kind, plain.skiplist_entry) == ("skip_backend", "skiplist", "cpu-known.yaml::plain-too-slow")
    assert "takes minutes on this device" in plain.message
    for dtype in ("float32", "int64"):
        mul = got[f"test_value_mul_cpu_{dtype}"]
        assert (mul.outcome, mul.skiplist_entry) == ("xfail", "cpu-known.yaml::mul-wrong-values")
    assert got["test_value_neg_cpu_int64"].outcome == "xpass"          # the stale expectation
    assert got["test_value_neg_cpu_float32"].outcome == "pass"          # the entry is for int64 only
    assert got["test_value_add_cpu_float32"].outcome == "pass"
    bare = world["outcomes"]["bare"]
    assert bare["test_value_mul_cpu_float32"].outcome == "fail" and bare["test_plain_cpu"].outcome == "pass"


def test_plain_pytest_applies_the_same_entries(world):
    proc = run_sample(world["tmp"], "--tc-skiplist", world["list"], "-rsxX")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "1 skipped, 2 xfailed, 1 xpassed" in proc.stdout
    assert "torchconform skiplist: cpu-known.yaml::plain-too-slow" in proc.stdout
    # the stale expectation is reported with its proposed removal
    summary = proc.stdout.split("torchconform skiplist: proposed removals", 1)[1]
    assert "cpu-known.yaml::neg-int: its test passed (1 xpass" in summary and "remove the entry" in summary


def test_prune_proposes_removing_stale_entries(world):
    out = cli("skiplist", "propose", "--build", "with-list", "--db", world["db"], "--skiplist", world["list"], "--prune", check=0).stdout
    removals = out.split("remove:", 1)[1]
    assert "id: neg-int" in removals and "passed (1 xpass)" in removals
    assert "id: sub-gone" in removals and "matches none of the build's" in removals
    assert "mul-wrong-values" not in removals and "plain-too-slow" not in removals
    assert "entries: []" in out    # every failure of that build is already covered


def test_lint_collect_finds_the_stale_entry(world):
    proc = cli("skiplist", "lint", world["list"], "--collect", SAMPLE)
    assert proc.returncode == 1
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1 and "[stale] entry sub-gone (op sub) matches none of the 7 collected tests" in lines[0]
    assert lines[0].startswith(world["list"] + ":24: error:")
    assert cli("skiplist", "lint", world["list"]).returncode == 0   # without --collect it looks fine


def test_propose_turns_failures_into_entries_that_apply(world):
    tmp = world["tmp"]
    printed = cli("skiplist", "propose", "--build", "bare", "--db", world["db"], "--skiplist", world["list"], check=0).stdout
    assert "entries: []" in printed   # mul is already covered by the listing
    empty = tmp / "empty.yaml"
    empty.write_text("backend: cpu\nentries: []\n")
    printed = cli("skiplist", "propose", "--build", "bare", "--db", world["db"], "--skiplist", str(empty), check=0).stdout
    assert "op: mul" in printed and "kind: test_value" in printed and "dtype: [float32, int64]" in printed
    assert "mode: xfail" in printed and "category: known_bug" in printed
    assert "issue.invalid" in printed and not empty.read_text().count("mul")    # printed, not written
    # Against a baseline where mul already failed, nothing is new.
    since = cli("skiplist", "propose", "--build", "bare", "--baseline", "bare", "--db", world["db"],
                "--skiplist", str(empty), check=0).stdout
    assert "entries: []" in since
    # --write needs a real issue; with one, the file gains an entry that lints clean and applies.
    assert cli("skiplist", "propose", "--build", "bare", "--db", world["db"], "--skiplist", str(empty),
               "--write", str(empty)).returncode == 2
    cli("skiplist", "propose", "--build", "bare", "--db", world["db"], "--skiplist", str(empty),
        "--write", str(empty), "--issue", f"{ISSUE}/77", check=0)
    assert cli("skiplist", "lint", str(empty)).returncode == 0
    proc = run_sample(tmp, "--tc-skiplist", str(empty))
    assert "2 xfailed" in proc.stdout and proc.returncode == 0, proc.stdout[-2000:]


def test_bad_yaml_is_one_line_with_position_and_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("backend: cpu\nentries:\n  - match: {op: add\n    mode: skip\n")
    proc = cli("skiplist", "lint", str(bad))
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"torchconform: error: {bad}:") and "invalid YAML" in lines[0]
    proc = run_sample(tmp_path, "--tc-skiplist", str(bad), "--collect-only")
    assert proc.returncode != 0 and f"{bad}:" in proc.stderr and "Traceback" not in proc.stderr
