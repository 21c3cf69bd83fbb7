"""The census on refdev against describe()'s ground truth, one child process per
profile (a backend registers once per process), then the two builds compared."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import child_env

from torchconform import refdev
from torchconform.census.diff import gate_context
from torchconform.ci.config import parse_config
from torchconform.ci.gate import evaluate
from torchconform.db.opening import open_store

def _census(profile: str, build: str, db: str, *extra) -> dict:
    r = subprocess.run([sys.executable, "-m", "torchconform", "census", "--device", "refdev", "--build", build,
                        "--db", db, "--json", *extra], capture_output=True, text=True, timeout=300,
                       env=child_env(TORCHCONFORM_REFDEV_PROFILE=profile))
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def censuses(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("census") / "c.db")
    young = _census("young-backend", "young", db)
    full = _census("full", "full", db, "--baseline", "young")
    return db, young, full


def _status(doc: dict) -> dict[str, dict]:
    return {r["op"]: r for r in doc["rows"]}


def test_young_backend_census_agrees_with_describe(censuses):
    _, young, _ = censuses
    info = refdev.describe("young-backend")
    rows = _status(young)
    assert young["refdev_profile"] == "young-backend" and young["backend_key"] == "PrivateUse1"
    assert young["seconds"] > 0   # its time budget is a bench figure (bench/census.py), never a test's verdict
    bad_missing = [op for op in info["missing"]
                   if not (rows[op]["status"] == "missing"
                           or (rows[op]["status"] == "composite" and rows[op]["covered"] is not False))]
    assert bad_missing == []
    assert [op for op in info["fallback"] if rows[op]["status"] != "fallback"] == []
    assert [op for op in info["implemented"] if rows[op]["status"] in ("missing", "unavailable")] == []
    # Nothing describe() does not name is served by refdev's own kernels.
    ours = set(info["implemented"]) | set(info["fallback"])
    assert {op for op, r in rows.items() if r["status"] in ("native", "fallback")} <= ours
    # Composites are told apart from native: some reach a missing operator and say which.
    blocked = [r for r in young["rows"] if r["status"] == "composite" and r["covered"] is False]
    assert blocked and all(rows[b]["status"] not in ("native", "fallback") for r in blocked for b in r["blocked_by"])
    traced = [r for r in young["rows"] if r["status"] == "composite" and r["reached"] is not None]
    assert len(traced) > young["counts"]["composite"] / 2


def test_full_census_misses_nothing_describe_does_not_list(censuses):
    _, _, full = censuses
    info = refdev.describe("full")
    missing = {r["op"] for r in full["rows"] if r["status"] == "missing"}
    assert missing <= set(info["missing"])
    assert full["seconds"] > 0


def test_builds_diff_and_gate_rule_on_real_censuses(censuses):
    db, young, full = censuses
    d = full["diff"]
    assert d["lost"] == [] and d["added"] == d["removed"] == []
    young_rows = _status(young)
    gained = {e["op"] for e in d["gained"]}
    assert {op for op, r in young_rows.items() if r["status"] == "missing"} - set(refdev.describe("full")["missing"]) <= gained
    with open_store(db, create=False) as store, gate_context(store, "full", "young"):
        rule = evaluate({}, {}, parse_config({})).rule("lost_operator")
    assert rule.status == "warn" and {f["lost_op"] for f in rule.findings} == gained
