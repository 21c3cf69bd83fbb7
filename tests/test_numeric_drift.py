"""Numerical drift per operator and dtype (issue 16): every comparison test records its
largest absolute and relative error against the CPU reference; the store (schema
0007_numeric_errors), JUnit, JSON lines, export and ingest keep them; db/drift.py reads
them per op x dtype; the gate's ``numeric_drift`` rule warns when one grew."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pg import db_url, pg_server  # noqa: F401  (fixtures)
from torchconform.ci.config import parse_config
from torchconform.ci.gate import evaluate
from torchconform.core import numeric
from torchconform.core.outcome import Outcome
from torchconform.db import drift, migrate, read_builds, read_rows
from torchconform.db.export import export
from torchconform.db.ingest import ingest
from torchconform.db.junit.read import parse_junit
from torchconform.db.models import HEAD_REVISION
from torchconform.db.opening import make_engine, open_store
from torchconform.errors import UserError

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import child_env  # noqa: E402

TC = [sys.executable, "-m", "torchconform"]
TRAIT = "float64_as_float32"


# -- what a comparison records ------------------------------------------------------------------
def test_errors_of_a_comparison():
    import torch

    nan, inf = math.nan, math.inf
    assert numeric.tensor_errors(torch.ones(3), torch.ones(3)) == (0.0, 0.0)
    found = numeric.tensor_errors(torch.tensor([1.0, 2.0, 0.5]), torch.tensor([1.0, 2.002, 0.0], dtype=torch.float64))
    assert found == (pytest.approx(0.5), pytest.approx(0.002 / 2.002))   # a zero reference: absolute error only
    assert numeric.tensor_errors(torch.tensor([nan, inf, 1.0]), torch.tensor([nan, inf, 1.0])) == (0.0, 0.0)
    assert numeric.tensor_errors(torch.tensor([nan, 1.0]), torch.tensor([1.0, 1.0])) == (inf, inf)
    assert numeric.tensor_errors(torch.tensor([1 + 1j]), torch.tensor([1 + 2j]))[0] == pytest.approx(1.0)
    assert numeric.tensor_errors(torch.tensor([3, 4]), torch.tensor([3, 4])) == (0.0, 0.0)
    assert numeric.tensor_errors(torch.zeros(2, 3), torch.zeros(3, 2)) is None   # the assertion says why
    tally = numeric.Tally()
    tally.add([torch.ones(2), None, (torch.tensor(3.0), 1.0)], [torch.ones(2) * 1.5, None, (torch.tensor(3.0), 1.0)])
    assert tally.fields() == {"max_abs_err": 0.5, "max_rel_err": pytest.approx(1 / 3)}
    assert numeric.Tally().fields() == {"max_abs_err": None, "max_rel_err": None}   # compared nothing
    with pytest.raises(ValueError):
        Outcome("t", "pass", max_abs_err=-1.0)


def test_the_models_suite_records_its_comparisons(tmp_path):
    import torch

    from torchconform.core.profile import load_profile
    from torchconform.suites.models.check import run_model
    from torchconform.suites.models.compare import assert_same

    tally = numeric.Tally()
    assert_same({"out": torch.tensor([1.0, 2.0 + 2e-6])}, {"out": torch.tensor([1.0, 2.0])}, "eval", tally)
    assert tally.max_abs == pytest.approx(2e-6, rel=0.1) and tally.max_rel == pytest.approx(1e-6, rel=0.1)
    with pytest.raises(AssertionError):   # a failing comparison's error is recorded too
        assert_same({"out": torch.tensor([1.0, 3.0])}, {"out": torch.tensor([1.0, 2.0])}, "eval", tally)
    assert tally.max_abs == 1.0
    path = tmp_path / "tiny.py"
    path.write_text("import torch\n\ndef build():\n    model = torch.nn.Sequential(torch.nn.Linear(4, 8), "
                    "torch.nn.ReLU())\n    return model, {'input': torch.randn(3, 4)}\n")
    outcomes = run_model(f"py/{path}::build", "cpu", load_profile("cpu"), variants=("eval", "train"))
    assert [(o.variant, o.outcome, o.max_abs_err, o.max_rel_err) for o in outcomes] == \
        [("eval", "pass", 0.0, 0.0), ("train", "pass", 0.0, 0.0)]


# -- schema ---------------------------------------------------------------------------------------
def test_a_0006_store_refuses_then_upgrades_keeping_its_results(db_url, cli):
    from alembic import command

    with open_store(db_url) as store:
        store.ensure_build("old")
        run = store.start_run("old")
        store.add_outcomes(run, [Outcome("t::sin", "pass", op="sin", dtype="float32", repro="pytest t::sin",
                                         max_abs_err=1e-7, max_rel_err=1e-7)])
        store.finish_run(run, 0)
    engine = make_engine(open_store(db_url, check_schema=False).url)
    with engine.begin() as conn:   # what a store written before 0007_numeric_errors holds
        command.downgrade(migrate._config(conn), "0006_model_ops")
        assert migrate.current_revision(conn) == "0006_model_ops"
    engine.dispose()
    with pytest.raises(UserError, match=r"older schema \(0006_model_ops.*run `torchconform db upgrade"):
        open_store(db_url)
    code, out, err = cli("db", "upgrade", "--db", db_url)
    assert code == 0, err
    assert f"upgraded from 0006_model_ops to {HEAD_REVISION}" in out
    with open_store(db_url) as store:
        (old,) = read_rows.iter_outcomes(store, "old")
        assert (old.outcome, old.repro, old.max_abs_err, old.max_rel_err) == ("pass", "pytest t::sin", None, None)
        assert drift.op_errors(store, "old") == []   # stored before errors existed: counts nowhere
        run = store.start_run("old")
        store.add_outcomes(run, [Outcome("t::add", "pass", op="add", dtype="float32", max_abs_err=2.5e-7,
                                         max_rel_err=1e-7)])
        got = {o.test_id: (o.max_abs_err, o.max_rel_err) for o in read_rows.iter_outcomes(store, "old")}
        assert got == {"t::sin": (None, None), "t::add": (2.5e-7, 1e-7)}
    assert cli("db", "upgrade", "--db", db_url)[1].count("already at") == 1


# -- a real run ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ops_run(tmp_path_factory):
    """abs and sin on refdev (young-backend: float64 computed as float32), eager comparisons,
    through one xdist worker (the errors travel worker -> controller with the report)."""
    tmp = tmp_path_factory.mktemp("drift-run")
    db, junit = tmp / "store.db", tmp / "run.xml"
    proc = subprocess.run([*TC, "run", "--suite", "ops", "--device", "refdev", "--ops", "abs,sin", "-k",
                           "compare_cpu and not compile", "-n", "1", "--build", "run-a", "--db", str(db),
                           "--junit", str(junit)], cwd=tmp, env=child_env(), capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp, str(db), junit


def test_a_run_records_the_errors_of_its_comparisons(ops_run):
    tmp, db, junit = ops_run
    with open_store(db) as store:
        outcomes = {o.name: o for o in read_rows.iter_outcomes(store, "run-a")}
        traits = read_builds.build_info(store, "run-a")["metadata"].get("declared_traits") or []
        errors = drift.op_errors(store, "run-a")
        history = drift.error_history(store, "sin", "float32")
    passing = [o for o in outcomes.values() if o.outcome == "pass"]
    assert len(passing) >= 6, sorted((o.name, o.outcome) for o in outcomes.values())
    for o in outcomes.values():
        compared = o.outcome == "pass"
        assert (o.max_abs_err is not None) == compared and (o.max_rel_err is not None) == compared, o
    # refdev runs the CPU's own kernels: an eager float32 or integer comparison is exact
    for name in ("test_compare_cpu_abs_refdev_float32", "test_compare_cpu_sin_refdev_float32",
                 "test_compare_cpu_abs_refdev_int64", "test_compare_cpu_grad_abs_refdev_float32"):
        assert (outcomes[name].max_abs_err, outcomes[name].max_rel_err) == (0.0, 0.0), outcomes[name]
    sin64 = outcomes["test_compare_cpu_sin_refdev_float64"]
    if TRAIT in traits:   # float64 computed as float32: a real, small error inside the float32 tolerance
        assert 0.0 < sin64.max_abs_err < 1e-4 and 0.0 < sin64.max_rel_err < 1e-4
    cells = {(e["op"], e["dtype"]): e for e in errors}
    assert cells[("sin", "float32")]["max_abs_err"] == 0.0 and cells[("sin", "float64")]["tests"] == 1
    assert [(h["build"], h["max_abs_err"]) for h in history] == [("run-a", 0.0)]
    # the run's own JUnit carries them, and reads them back exactly
    from_junit = {o.name: (o.max_abs_err, o.max_rel_err) for o in parse_junit(str(junit))}
    assert from_junit == {n: (o.max_abs_err, o.max_rel_err) for n, o in outcomes.items()}
    jsonl = next((tmp / ".torchconform" / "runs").glob("run-a*.jsonl"))   # the JSON lines sink's
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert {r["name"]: r["max_abs_err"] for r in lines if r.get("type") == "outcome"}[sin64.name] == sin64.max_abs_err


def _trait_build(store, name="traits"):
    store.ensure_build(name, device="refdev", profile="young-backend", declared_traits=[TRAIT])
    run = store.start_run(name, suite="ops")
    store.add_outcomes(run, [
        Outcome("t.py::T::test_exp_f64", "fail", op="exp", dtype="float64", kind="trait:" + TRAIT,
                message="Tensor-likes are not close! [attributed to trait float64_as_float32: by rule]",
                max_abs_err=math.inf, max_rel_err=math.inf, repro="pytest t.py::T::test_exp_f64"),
        Outcome("t.py::T::test_sin_f32", "pass", op="sin", dtype="float32", max_abs_err=1.1920928955078125e-07,
                max_rel_err=3.0e-08, repro="pytest t.py::T::test_sin_f32"),
        Outcome("t.py::T::test_cos_f32", "skip_backend", op="cos", dtype="float32", kind="missing_op",
                missing_op="aten::cos.out", repro="pytest t.py::T::test_cos_f32"),
    ])
    store.finish_run(run, 1)


def _kept(o):
    return (o.test_id, o.outcome, o.kind, o.op, o.dtype, o.message, o.max_abs_err, o.max_rel_err)


@pytest.mark.parametrize("build", ["traits", "run-a"])
def test_export_ingest_round_trip_keeps_errors_and_traits(ops_run, tmp_path, build):
    _, db, _ = ops_run
    with open_store(db) as store:
        if build == "traits" and build not in read_builds.test_counts(store):
            _trait_build(store)
        before = [_kept(o) for o in read_rows.iter_outcomes(store, build)]
        declared = read_builds.build_info(store, build)["metadata"].get("declared_traits")
        with open(tmp_path / "b.xml", "w", encoding="utf-8") as out:
            export(store, build, "junit", out)
        with open(tmp_path / "b.json", "w", encoding="utf-8") as out:
            export(store, build, "json", out)
        copy = f"{build}-copy-{os.getpid()}"
        ingest(store, [str(tmp_path / "b.xml")], copy)
        assert [_kept(o) for o in read_rows.iter_outcomes(store, copy)] == before
        assert read_builds.build_info(store, copy)["metadata"].get("declared_traits") == declared
    assert any(k[6] is not None for k in before) and (build != "traits" or declared == [TRAIT])
    dumped = json.loads((tmp_path / "b.json").read_text())
    assert [(o["test_id"], o["max_abs_err"], o["max_rel_err"]) for o in dumped["outcomes"]] == \
        [(k[0], k[6], k[7]) for k in before]


# -- the gate rule ----------------------------------------------------------------------------------
def _pair(store, grow=100.0):
    """Builds base and new: new's sin float32 errors are ``grow`` times base's, still passing."""
    cells = [("sin", "float32", 2e-8, 1e-8), ("sin", "float64", 1e-15, 1e-16), ("add", "float32", 0.0, 0.0),
             ("mul", "float32", 3e-9, 1e-9)]
    for name, factor in (("base", 1.0), ("new", grow)):
        store.ensure_build(name, device="refdev", branch="main")
        run = store.start_run(name, suite="ops")
        outcomes = []
        for op, dtype, abs_err, rel_err in cells:
            scale = factor if (op, dtype) == ("sin", "float32") else 1.0
            for variant in ("compare_cpu", "out"):
                tid = f"t.py::TestCommonREFDEV::test_{variant}_{op}_refdev_{dtype}"
                outcomes.append(Outcome(tid, "pass", op=op, dtype=dtype, variant=variant, device="refdev",
                                        max_abs_err=abs_err * scale * (1 if variant == "out" else 0.5),
                                        max_rel_err=rel_err * scale, repro=f"pytest {tid}"))
        # a test that compared nothing counts nowhere
        outcomes.append(Outcome("t.py::TestCommonREFDEV::test_compare_cpu_exp_refdev_float32",
                                "pass", op="exp", dtype="float32", max_abs_err=None if name == "base" else 1e-3,
                                max_rel_err=None if name == "base" else 1e-3))
        store.add_outcomes(run, outcomes)
        store.finish_run(run, 0)


def test_numeric_drift_warns_naming_op_and_dtype(tmp_path, cli, db_url):
    db = db_url
    with open_store(db) as store:
        _pair(store)
        moved = {(d["op"], d["dtype"]): d for d in drift.drift(store, "new", "base", 1e-12, 1e-12)}
        history = drift.error_history(store, "sin", "float32", device="refdev")
        (sin32,) = [e for e in drift.op_errors(store, "new") if (e["op"], e["dtype"]) == ("sin", "float32")]
        assert (sin32["max_abs_err"], sin32["max_rel_err"], sin32["tests"], sin32["abs_test"]) == \
            (2e-6, 1e-6, 2, "t.py::TestCommonREFDEV::test_out_sin_refdev_float32")
    assert [(h["build"], h["max_abs_err"], h["tests"]) for h in history] == \
        [("base", 2e-8, 2), ("new", 2e-6, 2)]
    assert moved[("sin", "float32")]["abs_growth"] == pytest.approx(100)
    assert moved[("add", "float32")]["abs_growth"] == 1 == moved[("sin", "float64")]["abs_growth"]
    assert ("exp", "float32") not in moved
    code, out, err = cli("gate", "--db", db, "--build", "new", "--baseline", "base", "--reruns", "0",
                         "--summary", tmp_path / "summary.md", "--json")
    assert code == 0, err
    result = json.loads(out)
    (rule,) = [r for r in result["rules"] if r["rule"] == "numeric_drift"]
    assert (rule["status"], rule["mode"], rule["count"]) == ("warn", "warn", 1)
    (finding,) = rule["findings"]
    assert (finding["op"], finding["dtype"], finding["test_id"]) == \
        ("sin", "float32", "t.py::TestCommonREFDEV::test_out_sin_refdev_float32")
    assert finding["abs_growth"] == pytest.approx(100) and finding["rel_growth"] == pytest.approx(100)
    assert "sin float32" in rule["detail"] and "100x" in rule["detail"]
    assert "numeric_drift | warn | WARN" in (tmp_path / "summary.md").read_text()
    code, out, _ = cli("gate", "--db", db, "--build", "new", "--baseline", "base", "--reruns", "0")
    assert code == 0 and "warn  numeric_drift" in out and "sin float32: abs err 2e-08 -> 2e-06 (100x)" in out
    # mode fail fails the gate, with the drifted test's repro command
    config = tmp_path / "gate.yaml"
    config.write_text("rules:\n  numeric_drift: {mode: fail, factor: 10}\n")
    code, out, _ = cli("gate", "--db", db, "--build", "new", "--baseline", "base", "--reruns", "0",
                       "--config", config, "--summary", tmp_path / "failed.md")
    assert code == 1 and "fail  numeric_drift" in out
    assert "pytest t.py::TestCommonREFDEV::test_out_sin_refdev_float32" in (tmp_path / "failed.md").read_text()
    # a larger factor lets the same growth through
    config.write_text("rules:\n  numeric_drift: {mode: fail, factor: 200}\n")
    code, out, _ = cli("gate", "--db", db, "--build", "new", "--baseline", "base", "--reruns", "0", "--config", config)
    assert code == 0 and "pass  numeric_drift" in out


def test_numeric_drift_rule_floors_and_config():
    def records(abs_err, rel_err=0.0, outcome="pass"):
        return {"t::a": {"test_id": "t::a", "outcome": outcome, "op": "sin", "dtype": "float32",
                         "max_abs_err": abs_err, "max_rel_err": rel_err}}

    def rule(old, new, **params):
        return evaluate(old, new, parse_config({"rules": {"numeric_drift": params}})).rule("numeric_drift")

    assert rule(records(1e-8), records(9e-8)).status == "pass"                       # 9x < factor 10
    assert rule(records(0.0), records(1e-13)).status == "pass"                       # under the floor: noise
    assert rule(records(0.0), records(1e-7)).status == "warn"                        # was exact, now is not
    assert rule(records(1e-8, 1e-9), records(1e-8, 1e-6)).findings[0]["message"].startswith("rel err")
    assert rule(records(None), records(1e-3)).status == "pass"                       # baseline compared nothing
    assert rule(records(1e-8), records(1e-3, outcome="fail")).status == "pass"       # not inside tolerance
    assert rule(records(1e-8), records(1e-3), factor=1e6).status == "pass"
    assert rule(records(1e-8), records(1e-3), mode="off").status == "off"
    with pytest.raises(UserError, match="factor"):
        parse_config({"rules": {"numeric_drift": {"factor": 0.5}}})
    with pytest.raises(UserError, match="unknown key 'facter'"):
        parse_config({"rules": {"numeric_drift": {"facter": 2}}})
