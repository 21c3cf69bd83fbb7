"""Per-operator performance (issue 33, item 1): the perf suite times each operator on the device
and on CPU in the same test, the store keeps the rows per build (schema 0010_perf_results),
``torchconform perf`` prints them, and the gate's ``perf_regression`` rule judges the
device/CPU ratio against the baseline's, with a threshold and a floor.

The end-to-end check runs refdev three times: twice as it is and once with a refdev profile
whose ``slow_ops`` adds 20 ms to every call of ``aten::add`` (``add.out``: what ``torch.add``
runs as on refdev).  Its verdicts do not depend on the machine's load: the delay is about a
thousand times the operator's own time, and every judgement divides the device's time by the
CPU's measured in the same test."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchconform.ci.config import parse_config
from torchconform.core import perf
from torchconform.core.outcome import Outcome
from torchconform.db import perf as perf_db
from torchconform.db.opening import open_store
from torchconform.errors import UserError

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import child_env  # noqa: E402

TC = [sys.executable, "-m", "torchconform"]
OPS = "add,mul,abs"
SLOW_S = 0.02


def _row(op, dev_min, cpu_min, direction="forward", dtype="float32", scale=1.0):
    figures = {"dev_first": dev_min * 10, "dev_min": dev_min, "dev_median": dev_min * 1.1, "dev_max": dev_min * 2,
               "cpu_first": cpu_min * 10, "cpu_min": cpu_min, "cpu_median": cpu_min * 1.1, "cpu_max": cpu_min * 2}
    return {"op": op, "dtype": dtype, "direction": direction, "sample": "[20x20] [20x20]", "calls": 5,
            **{k: v * scale for k, v in figures.items()}}


# -- the judgement (pure) ----------------------------------------------------------------------
def test_a_loaded_machine_slowing_both_sides_is_no_regression():
    old = [_row("conv2d", 1e-3, 5e-4), _row("add", 1e-3, 1e-3)]
    loaded = [_row("conv2d", 1e-3, 5e-4, scale=3.0), _row("add", 1e-3, 1e-3, scale=3.0)]   # 3x slower machine
    assert [d["verdict"] for d in perf.compare(old, loaded)] == ["same", "same"]
    slowed = [_row("conv2d", 1e-3, 5e-4, scale=3.0), _row("add", 1e-3 * 1.3, 1e-3)]
    (top, other) = perf.compare(old, slowed)
    assert (top["op"], top["verdict"], round(top["change"], 3)) == ("add", "regression", 1.3)
    assert other["verdict"] == "same"
    assert perf.compare(old, slowed, threshold=1.5)[0]["verdict"] == "same"
    assert [d["op"] for d in perf.regressions(old, slowed)] == ["add"]


def test_the_floor_leaves_tiny_operators_unjudged_unless_one_side_crosses_it():
    old = [_row("abs", 5e-6, 4e-6)]
    assert perf.compare(old, [_row("abs", 9e-6, 4e-6)])[0]["verdict"] == "below floor"   # 1.8x of almost nothing
    assert perf.compare(old, [_row("abs", 9e-6, 4e-6)], floor_s=1e-6)[0]["verdict"] == "regression"
    (d,) = perf.compare(old, [_row("abs", 5e-3, 4e-6)])   # now above the floor: judged
    assert d["verdict"] == "regression" and d["change"] == pytest.approx(1000)
    assert perf.compare(old, [_row("abs", 5e-6, 4e-6, direction="backward")]) == []   # not in both


def test_noisy_readings_are_not_judged():
    """Under heavy load a device's autograd thread pays a scheduler wake-up per call: every
    reading slow, the median far above the minimum.  Seen on refdev at a load of 14 on 2 cores:
    cummax backward 0.057 ms -> 2.8 ms (median 10.5 ms) in a repeat of the same build."""
    old = [_row("cummax", 5.7e-4, 4.2e-4, direction="backward")]
    disturbed = {**_row("cummax", 2.8e-3, 1.5e-4, direction="backward"), "dev_median": 1.05e-2}
    (d,) = perf.compare(old, [disturbed])
    assert d["verdict"] == "noisy" and d["spread"] == pytest.approx(1.05e-2 / 2.8e-3)
    assert perf.compare(old, [disturbed], max_spread=5.0)[0]["verdict"] == "regression"
    steady_but_slow = _row("cummax", 2.8e-3, 4.2e-4, direction="backward")   # median 1.1x min: judged
    assert perf.compare(old, [steady_but_slow])[0]["verdict"] == "regression"


def test_note_and_slowest():
    rows = [_row("a", 2e-5, 1e-5), _row("b", 9e-5, 1e-5), {**_row("c", 1e-5, 1e-5), "cpu_min": None}]
    assert [r["op"] for r in perf.slowest(rows)] == ["b", "a", "c"]
    assert perf.note_text(rows[:1]) == "perf: forward device 20.0us cpu 10.0us ratio 2x"


def test_gate_config_takes_perf_regression_and_refuses_a_threshold_of_one():
    config = parse_config({"rules": {"perf_regression": {"mode": "fail", "threshold": 1.5, "floor_s": 1e-3,
                                                               "max_spread": 1.4}}})
    rule = config.rule("perf_regression")
    assert (rule.mode, rule.params["threshold"], rule.params["floor_s"], rule.params["max_spread"]) == \
        ("fail", 1.5, 1e-3, 1.4)
    with pytest.raises(UserError, match="perf_regression.threshold"):
        parse_config({"rules": {"perf_regression": {"threshold": 1.0}}})


# -- refdev's slow_ops --------------------------------------------------------------------------
def test_refdev_slow_ops_is_checked(tmp_path):
    from torchconform.refdev import profiles

    good = tmp_path / "slow.yaml"
    good.write_text("name: slow\nslow_ops: {aten::add.Tensor: 0.002, aten::mul: 1}\n")
    assert profiles.load_profile(str(good)).slow_ops == {"aten::add.Tensor": 0.002, "aten::mul": 1.0}
    for bad, said in (("slow_ops: {add: 0.1}", "is not an operator name"),
                      ("slow_ops: {aten::add: 0}", "above 0"), ("slow_ops: {aten::add: 60}", "at most 10"),
                      ("slow_ops: [aten::add]", "must be a mapping")):
        path = tmp_path / "bad.yaml"
        path.write_text(f"name: bad\n{bad}\n")
        with pytest.raises(UserError, match=said):
            profiles.load_profile(str(path))


# -- the store and the CLI (stored rows, no device) -----------------------------------------------
def _store_build(store, name, rows, device="refdev"):
    store.ensure_build(name, device=device, branch="main", profile="refdev")
    run = store.start_run(name, suite="perf")
    outcomes = []
    for r in rows:
        o = Outcome(f"suites/perf/test_perf.py::TestPerfREFDEV::test_perf_{r['op']}_refdev_float32", "pass",
                    suite="perf", op=r["op"], dtype="float32", variant="perf", device=device)
        o.perf = [r]
        outcomes.append(o)
    store.add_outcomes(run, outcomes)
    store.finish_run(run, 0)


@pytest.fixture
def perf_store(tmp_path):
    db = str(tmp_path / "perf.db")
    with open_store(db) as store:
        _store_build(store, "base", [_row("add", 1e-3, 1e-3), _row("mul", 2e-3, 1e-3), _row("abs", 5e-6, 4e-6)])
        _store_build(store, "new", [_row("add", 2e-3, 1e-3), _row("mul", 2e-3, 1e-3), _row("abs", 9e-6, 4e-6)])
        _store_build(store, "plain", [])
    return db


def test_rows_round_trip_and_history(perf_store):
    with open_store(perf_store) as store:
        rows = perf_db.build_rows(store, "new")
        assert [(r["op"], r["dev_min"], r["cpu_min"], r["ratio"]) for r in rows] == \
            [("abs", 9e-6, 4e-6, 9e-6 / 4e-6), ("add", 2e-3, 1e-3, 2.0), ("mul", 2e-3, 1e-3, 2.0)]
        history = perf_db.history(store, "new", op="add")
        assert [(p["build"], p["ratio"]) for p in history[("add", "float32", "forward", "eager")]] == \
            [("base", 1.0), ("new", 2.0)]
        assert not perf_db.has_rows(store, "plain")


def test_perf_command_table_json_csv_and_errors(perf_store, cli):
    code, out, err = cli("perf", "--db", perf_store, "--build", "new", "--baseline", "base")
    assert code == 0, err
    assert "slowest relative to CPU" in out and "1 regressions" in out and "(1 below the 200 us floor, 0 noisy" in out
    code, out, _ = cli("perf", "--db", perf_store, "--build", "new", "--baseline", "base", "--json")
    result = json.loads(out)
    assert [(r["op"], r["verdict"]) for r in result["regressions"]] == [("add", "regression")]
    assert result["slowest"][0]["op"] == "abs" and result["baseline"] == "base"
    code, out, _ = cli("perf", "--db", perf_store, "--build", "new", "--op", "add", "--csv")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("op,dtype,direction,variant,sample,calls,dev_first") and len(lines) == 2
    for args, said in ((("--build", "plain"), "has no perf results; run `torchconform run --suite perf"),
                       (("--build", "new", "--op", "nope"), "no perf results for operator 'nope'"),
                       (("--build", "new", "--baseline", "plain"), "baseline 'plain' has no perf results"),
                       (("--build", "new", "--threshold", "1"), "is not a slowdown factor"),
                       (("--build", "gone"), "gone")):
        code, out, err = cli("perf", "--db", perf_store, *args)
        assert code != 0 and said in err and len(err.strip().splitlines()) == 1, err


def test_gate_warns_naming_the_slowed_operator(perf_store, cli, tmp_path):
    code, out, err = cli("gate", "--db", perf_store, "--build", "new", "--baseline", "base", "--reruns", "0", "--json")
    assert code == 0, err
    (rule,) = [r for r in json.loads(out)["rules"] if r["rule"] == "perf_regression"]
    assert (rule["status"], rule["count"]) == ("warn", 1)
    assert [f["op"] for f in rule["findings"]] == ["add"] and "add float32 forward 2x" in rule["detail"]
    config = tmp_path / "gate.yaml"
    config.write_text("rules:\n  perf_regression: {mode: fail}\n")
    code, out, _ = cli("gate", "--db", perf_store, "--build", "new", "--baseline", "base", "--reruns", "0",
                       "--config", config)
    assert code == 1 and "fail  perf_regression" in out
    config.write_text("rules:\n  perf_regression: {mode: fail, threshold: 2.5}\n")
    code, out, _ = cli("gate", "--db", perf_store, "--build", "new", "--baseline", "base", "--reruns", "0",
                       "--config", config)
    assert code == 0 and "pass  perf_regression" in out


def test_site_has_a_perf_page_with_escaped_names(tmp_path, cli):
    db = str(tmp_path / "site.db")
    evil = "<script>alert(1)</script>"
    with open_store(db) as store:
        _store_build(store, "base", [_row(evil, 1e-3, 1e-3)])
        _store_build(store, "new", [_row(evil, 2e-3, 1e-3)])
    code, out, err = cli("site", "--db", db, "--out", tmp_path / "site")
    assert code == 0, err
    (page,) = [p for p in (tmp_path / "site" / "builds").glob("*/perf.html") if "new" in p.parent.name]
    html = page.read_text()
    assert evil not in html and "&lt;script&gt;" in html and "slowed relative to CPU" in html
    records = json.loads((page.parent / "perf.json").read_text())
    assert records[0]["op"] == evil and records[0]["verdict"] == "regression"
    assert (page.parent / "perf.csv").read_text().startswith("op,dtype,direction")
    assert (page.parent / "perf-history.json").exists()


# -- end to end on refdev ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    """Builds a and b: refdev young-backend as it is; c: the same with aten::add slowed."""
    tmp = tmp_path_factory.mktemp("perf-runs")
    db = tmp / "store.db"
    slow = tmp / "young-slow-add.yaml"
    shipped = Path(__file__).resolve().parents[1] / "refdev" / "profiles" / "young-backend.yaml"
    slow.write_text(shipped.read_text() + f"\nslow_ops:\n  aten::add: {SLOW_S}\n")
    for build, extra in (("a", []), ("b", []), ("c", ["--refdev-profile", str(slow)])):
        proc = subprocess.run([*TC, "run", "--suite", "perf", "--device", "refdev", "--ops", OPS, "--build", build,
                               "--db", str(db), *extra], cwd=tmp,
                              # the eager timings are this file's; the compiled variant is test_perf_compiled.py's
                              env=child_env(TORCHCONFORM_PERF_CALLS="3", TORCHCONFORM_PERF_VARIANTS="eager"),
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return str(db)


def test_every_timed_operator_has_device_and_cpu_figures(three_runs):
    with open_store(three_runs) as store:
        rows = perf_db.build_rows(store, "a")
    assert {(r["op"], r["direction"]) for r in rows} == {(op, d) for op in OPS.split(",") for d in ("forward", "backward")}
    for r in rows:
        assert r["calls"] == 3 and r["dtype"] == "float32" and r["sample"]
        assert all(r[f] is not None and r[f] > 0 for f in perf.FIGURES), r
        assert r["dev_min"] <= r["dev_median"] <= r["dev_max"] and r["cpu_min"] <= r["cpu_median"] <= r["cpu_max"]


REPEAT_THRESHOLD = 10.0


# The planted delay is judged alone: whether a loaded machine's readings are too noisy to
# judge is the noise rule's own test (above), so here no spread makes a timing "noisy".
NOT_JUDGING_NOISE = 1e9


def test_the_slowed_operator_regresses_and_a_repeat_does_not(three_runs, cli, tmp_path):
    with open_store(three_runs) as store:
        # The repeat is judged at a threshold no machine load reaches on a warm minimum but far
        # below the planted delay (its change is asserted > 50x below): the verdict must not
        # depend on load.  Repeats at the default 1.25x are measured figures (docs/perf.md).
        again = perf_db.compare(store, "b", "a", threshold=REPEAT_THRESHOLD)
        slowed = perf_db.compare(store, "c", "a", max_spread=NOT_JUDGING_NOISE)
        c_add = next(r for r in perf_db.build_rows(store, "c", "add") if r["direction"] == "forward")
    assert [d for d in again if d["verdict"] == "regression"] == []
    # the delay is inside the device's reading: at least SLOW_S on each warm call
    assert c_add["dev_min"] >= SLOW_S
    top = slowed[0]
    assert (top["op"], top["direction"], top["verdict"]) == ("add", "forward", "regression")
    assert top["change"] > 50
    config = tmp_path / "gate.yaml"
    config.write_text(f"rules:\n  perf_regression:\n    max_spread: {NOT_JUDGING_NOISE:.0f}\n")
    code, out, err = cli("gate", "--db", three_runs, "--build", "c", "--baseline", "a", "--reruns", "0", "--json",
                         "--config", str(config))
    (rule,) = [r for r in json.loads(out)["rules"] if r["rule"] == "perf_regression"]
    assert rule["status"] == "warn" and rule["findings"][0]["op"] == "add"
