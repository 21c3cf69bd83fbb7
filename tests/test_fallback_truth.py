"""Fallback seen through the dispatcher, checked against a known truth: refdev's
boxed-backend profile registers PyTorch's standard boxed CPU fallback for its key (no
counters, no memory_stats, as a typical real backend) and keeps, apart from anything the
plugin reads, a table of the operators that fallback served.  Every pass_fallback must
name exactly those of its test; no native pass may have used the fallback; a test that
reached an operator with no CPU kernel is skip_backend/missing_op naming it; and the
census lists as missing exactly refdev's ground-truth missing operators."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import FIXTURES, REPO, child_env  # noqa: E402

from torchconform.collectors.sink_jsonl import read_jsonl  # noqa: E402

# Native on young-backend's set (add, abs), served by the fallback in boxed mode
# (nonzero, sort, cumsum: young-backend's counted fallbacks; cos: young-backend lacks it).
OPS = "add,abs,nonzero,sort,cumsum,cos"


def _env(**extra):
    return child_env(TORCHCONFORM_REFDEV_PROFILE="boxed-backend", PYTHONPATH=str(FIXTURES), **extra)


@pytest.fixture(scope="module")
def boxed_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("boxed")
    truth, jsonl, db = tmp / "truth.json", tmp / "out.jsonl", tmp / "store.db"
    proc = subprocess.run(
        [sys.executable, "-m", "torchconform", "run", "--suite", "ops", "--device", "refdev", "--refdev-profile",
         "boxed-backend", "--ops", OPS, "-n", "0", "--db", str(db), "--jsonl", str(jsonl), "--build", "boxed-truth",
         "--", "-p", "fx_boxed_truth"],
        cwd=REPO, env=_env(FX_TRUTH_OUT=truth), capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    _, outcomes = read_jsonl(jsonl)
    return outcomes, json.loads(truth.read_text()), db


def test_every_fallback_pass_names_exactly_what_the_boxed_fallback_served(boxed_run):
    outcomes, truth, _ = boxed_run
    passes = [o for o in outcomes if o.outcome in ("pass", "pass_fallback")]
    assert len(passes) > 20
    fallback = [o for o in passes if o.outcome == "pass_fallback"]
    assert fallback, "no test went through the boxed fallback"
    for o in passes:
        served = sorted(op if "::" in op else "aten::" + op for op in truth.get(o.test_id, {}))
        assert o.fallback_ops == served, (o.test_id, o.outcome, o.fallback_ops, served)
        # 0 native passes that used the fallback
        assert (o.outcome == "pass_fallback") == bool(served), o.test_id
    assert {op for o in fallback for op in o.fallback_ops} >= {"aten::nonzero", "aten::sort.values_stable"}


def test_the_census_missing_operators_are_refdevs_ground_truth(tmp_path):
    code = (
        "import json, torch\n"
        "from torchconform import refdev\n"
        "refdev.load()\n"
        "from torchconform.core.dispatch import aten_ops, classify, device_keys\n"
        "keys = device_keys('refdev')\n"
        "rows = classify(aten_ops(), keys)\n"
        "d = refdev.describe()\n"
        "print(json.dumps({'backend_fallback': keys.backend_fallback,\n"
        "  'census_missing': sorted(r.op for r in rows if r.status == 'missing'),\n"
        "  'census_fallback': sorted(r.op for r in rows if r.status == 'fallback'),\n"
        "  'truth_missing': sorted(d['missing']), 'truth_fallback': sorted(d['fallback'])}))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["backend_fallback"] is True
    assert got["census_missing"] == got["truth_missing"] and got["truth_missing"]
    assert got["census_fallback"] == got["truth_fallback"]
    # operators whose only kernels the CPU fallback cannot call are missing, not fallback
    assert "aten::_thnn_fused_gru_cell" in got["census_missing"]


def test_census_and_run_agree_on_every_operator_both_see(boxed_run):
    outcomes, _, db = boxed_run
    proc = subprocess.run([sys.executable, "-m", "torchconform", "census", "--build", "boxed-truth", "--device",
                           "refdev", "--db", str(db), "--no-trace", "--json"],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    agreement = json.loads(proc.stdout)["agreement"]
    assert agreement["disagree"] == []
    # both the fallback passes and the missing operators are known to the census
    assert agreement["seen_by_both"] >= 3
    assert any(f["fallback"] for f in agreement["found"].values())

