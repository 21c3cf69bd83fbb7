"""One build from several suites (``run --suite all`` / ``--suite-set``) and a suite sharded
across machines (``run --shards N --shard I``): each part is a run of the same build,
and the build is complete only when every planned part has finished."""
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from support import child_env
from torchconform.db import read_builds
from torchconform.db.opening import open_store
from torchconform.errors import UserError
from torchconform.suites.sets import Step, load_set

TESTS = Path(__file__).resolve().parent
HEALTHY = f"py/{TESTS / 'fixtures' / 'zoo' / 'faulty.py'}::healthy"
UPSTREAM = TESTS / "fixtures" / "upstream"
TC = [sys.executable, "-m", "torchconform"]


def tc(args, cwd, check=0, timeout=900):
    proc = subprocess.run(TC + [str(a) for a in args], cwd=cwd, env=child_env(), capture_output=True, text=True,
                          timeout=timeout)
    if check is not None:
        assert proc.returncode == check, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def stored_ids(db: Path, build: str, shard=None) -> list[str]:
    query = ("SELECT t.test_id FROM results r JOIN tests t ON t.id = r.test_pk JOIN builds b ON b.id = r.build_id "
             "JOIN runs u ON u.id = r.run_id WHERE b.name = ?")
    params = [build]
    if shard is not None:
        query += " AND u.shard = ?"
        params.append(shard)
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute(query, params)]


def test_a_suite_set_runs_every_suite_into_one_build(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("steps:\n  - {suite: ops, selection: quick}\n  - {suite: modules, selection: quick}\n"
                    "  - {suite: upstream, needs: pytorch_src}\n"
                    f"  - {{suite: models, selection: '{HEALTHY}'}}\n")
    db = tmp_path / "t.db"
    proc = tc(["run", "--suite-set", plan, "--ops", "abs,nn.Linear", "-n", "0", "--db", db, "--build", "whole",
               "--pytorch-src", UPSTREAM, "--files", "test_fake_tensor_ops", "--json"], tmp_path)
    data = json.loads(proc.stdout)
    assert data["complete"] is True and set(data["steps"]) == {"ops", "modules", "upstream", "models"}
    by_suite = json.loads(tc(["summary", "--build", "whole", "--by", "suite", "--json", "--db", db], tmp_path).stdout)
    assert set(by_suite) == {"ops", "modules", "upstream", "models"}
    assert all(b["total"] > 0 for b in by_suite.values())
    assert data["total"] == sum(b["total"] for b in by_suite.values())
    info = json.loads(tc(["builds", "--json", "--db", db], tmp_path).stdout)[0]
    assert info["runs"] == 4 and info["complete"] is True
    assert [p["suite"] for p in info["metadata"]["plan"]] == ["ops", "modules", "upstream", "models"]


def test_shards_together_are_the_whole_selection_and_complete_the_build_only_together(tmp_path):
    db = tmp_path / "t.db"
    select = ["--suite", "ops", "--ops", "abs,add,mul,sin,cos", "-n", "0", "--db", db]
    tc(["run", *select, "--build", "whole"], tmp_path)
    tc(["run", *select, "--build", "sharded", "--shards", "2", "--shard", "0"], tmp_path)
    state = {b["name"]: b for b in json.loads(tc(["builds", "--json", "--db", db], tmp_path).stdout)}
    assert state["sharded"]["complete"] is False  # shard 1 has not run yet
    summary = json.loads(tc(["summary", "--build", "sharded", "--json", "--db", db], tmp_path).stdout)
    assert summary["unfinished_runs"] == [{"run": None, "suite": "ops", "shard": "1/2", "status": "not started",
                                           "exit_status": None, "results": 0, "planned": None}]
    tc(["run", *select, "--build", "sharded", "--shards", "2", "--shard", "1"], tmp_path)
    first, second = stored_ids(db, "sharded", "0/2"), stored_ids(db, "sharded", "1/2")
    assert first and second and not set(first) & set(second)
    assert sorted(first + second) == sorted(stored_ids(db, "whole"))
    state = {b["name"]: b for b in json.loads(tc(["builds", "--json", "--db", db], tmp_path).stdout)}
    assert state["sharded"]["complete"] is True
    bad = tc(["run", *select, "--build", "x", "--shards", "2", "--shard", "2"], tmp_path, check=2)
    assert "out of range" in bad.stderr


def test_a_plan_step_not_run_leaves_the_build_incomplete(tmp_path):
    with open_store(str(tmp_path / "t.db")) as store:
        store.add_plan("b", [{"suite": "ops", "shards": 1}, {"suite": "models", "shards": 2}])
        store.finish_run(store.start_run("b", suite="ops"), 0)
        store.finish_run(store.start_run("b", suite="models", shard="0/2"), 0)
        info = read_builds.build_info(store, "b")
        assert info["complete"] is False and info["missing_runs"] == [{"suite": "models", "shard": "1/2"}]
        assert {b["name"]: b for b in read_builds.list_builds(store)}["b"]["unfinished_runs"] == 1
        store.add_plan("b", [{"suite": "models", "shards": 2}] * 2)  # a shard records it again: no change
        assert [p["suite"] for p in store.build_row("b")["metadata"]["plan"]] == ["ops", "models"]
        store.finish_run(store.start_run("b", suite="models", shard="1/2"), 1)
        assert read_builds.build_info(store, "b")["complete"] is True


def test_suite_set_errors_are_one_line(tmp_path):
    assert [s.suite for s in load_set("all")[1]] == ["traits", "ops", "modules", "upstream", "models", "distributed"]
    assert [s.suite for s in load_set("quick")[1]] == ["traits", "ops", "modules", "upstream", "models", "distributed"]
    for text, needle in [("steps: []\n", "non-empty list"), ("steps:\n  - {suite: nope}\n", "unknown suite 'nope'"),
                         ("steps:\n  - {suite: ops, when: x}\n", "unknown key 'when'"),
                         ("steps:\n  - {suite: ops}\n  - {suite: ops}\n", "names a suite twice")]:
        path = tmp_path / "p.yaml"
        path.write_text(text)
        with pytest.raises(UserError, match=needle):
            load_set(str(path))
    with pytest.raises(UserError, match="unknown suite set 'nightly'"):
        load_set("nightly")
    # a file of sets: its one set whatever the file is called; of several, the one named after it
    (tmp_path / "mine.yaml").write_text("sets:\n  upstream-only:\n    - {suite: upstream, needs: pytorch_src}\n")
    assert load_set(str(tmp_path / "mine.yaml")) == ("upstream-only", [Step("upstream", "full", "pytorch_src")])
    (tmp_path / "two.yaml").write_text("sets:\n  a: [{suite: ops}]\n  two: [{suite: modules}]\n")
    assert load_set(str(tmp_path / "two.yaml")) == ("two", [Step("modules")])
    (tmp_path / "both.yaml").write_text("sets:\n  a: [{suite: ops}]\n  b: [{suite: modules}]\n")
    with pytest.raises(UserError, match="holds the suite sets a, b and none is named after the file"):
        load_set(str(tmp_path / "both.yaml"))
    proc = tc(["run", "--suite", "all", "--no-db"], tmp_path, check=2)
    assert "drop --no-db" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
