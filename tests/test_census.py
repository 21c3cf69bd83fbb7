"""The census's parts without a device: statuses from a made-up dispatcher table,
coverage, the diff, the store, the gate rule and the CLI's errors."""
from __future__ import annotations

import subprocess
import sys

import pytest

from torchconform.census import records
from torchconform.core import dispatch
from torchconform.census.diff import diff, gate_context, lost_operator_findings
from torchconform.core.dispatch import Keys, Row, classify, resolve_coverage
from torchconform.census.take import Census
from torchconform.ci.config import parse_config
from torchconform.ci.gate import evaluate
from torchconform.db.opening import open_store

KEYS = Keys("PrivateUse1", "AutogradPrivateUse1")
TABLE = {
    "aten::mm": {"PrivateUse1", "CPU"},
    "aten::nonzero": {"PrivateUse1", "CPU"},
    "aten::fused": {"AutogradPrivateUse1"},
    "aten::linear": {"CompositeImplicitAutograd"},
    "aten::add.Tensor": {"CompositeExplicitAutogradNonFunctional", "CPU"},
    "aten::sin": {"CPU"},
    "aten::erf": {"CPU"},
    "aten::_cudnn_rnn": {"Meta"},
    "aten::_to_sparse": {"SparseCPU"},
}


def has(op, key):
    return key in TABLE.get(op, ())


def test_classify_reads_the_dispatcher_in_its_order():
    rows = {r.op: r for r in classify(sorted(TABLE), KEYS, has, fallback_ops=["aten::nonzero"],
                                      python_decomps=["aten::erf"])}
    got = {op: (r.status, r.via) for op, r in rows.items()}
    assert got == {
        "aten::mm": ("native", ""), "aten::nonzero": ("fallback", ""), "aten::fused": ("autograd", ""),
        "aten::linear": ("composite", "CompositeImplicitAutograd"),
        "aten::add.Tensor": ("composite", "CompositeExplicitAutogradNonFunctional"),
        "aten::sin": ("missing", ""), "aten::erf": ("missing", "python-decomposition"),
        "aten::_cudnn_rnn": ("unavailable", ""), "aten::_to_sparse": ("unavailable", ""),
    }


def test_a_backend_fallback_serves_what_has_a_cpu_kernel_but_not_composites():
    keys = Keys("PrivateUse1", "AutogradPrivateUse1", backend_fallback=True)
    rows = {r.op: (r.status, r.via) for r in classify(sorted(TABLE), keys, has)}
    assert rows["aten::sin"] == rows["aten::erf"] == ("fallback", "")
    # PyTorch's boxed CPU fallback runs the operator on CPU tensors: without a CPU
    # kernel (Meta or sparse only here) it raises, so the device cannot run it.
    assert rows["aten::_cudnn_rnn"] == rows["aten::_to_sparse"] == ("missing", dispatch.NO_CPU_KERNEL)
    assert rows["aten::linear"][0] == "composite" and rows["aten::mm"][0] == "native"


def _rows(**reached):
    rows = classify(sorted(TABLE) + ["aten::loop_a", "aten::loop_b"], KEYS,
                    lambda op, key: has(op, key) or (op.startswith("aten::loop") and key == "CompositeImplicitAutograd"))
    for r in rows:
        if r.op in reached:
            r.reached = reached[r.op]
    resolve_coverage(rows)
    return {r.op: r for r in rows}


def test_coverage_follows_what_a_composite_reaches():
    rows = _rows(**{"aten::linear": ["aten::mm", "aten::add.Tensor"], "aten::add.Tensor": ["aten::nonzero"]})
    assert rows["aten::linear"].covered is True and rows["aten::add.Tensor"].covered is True
    rows = _rows(**{"aten::linear": ["aten::mm", "aten::add.Tensor"], "aten::add.Tensor": ["aten::sin"]})
    assert rows["aten::add.Tensor"].covered is False and rows["aten::add.Tensor"].blocked_by == ["aten::sin"]
    assert rows["aten::linear"].covered is False and rows["aten::linear"].blocked_by == ["aten::add.Tensor"]
    assert not rows["aten::linear"].works and rows["aten::mm"].works
    # Not traced, or reaching an untraced composite / an unknown operator: unknown, still counted as working.
    rows = _rows(**{"aten::linear": ["aten::add.Tensor"]})
    assert rows["aten::add.Tensor"].covered is None and rows["aten::linear"].covered is None
    assert rows["aten::linear"].works
    assert _rows(**{"aten::linear": ["prim::whatever"]})["aten::linear"].covered is None
    # A cycle is no evidence either way.
    rows = _rows(**{"aten::loop_a": ["aten::loop_b"], "aten::loop_b": ["aten::loop_a", "aten::mm"]})
    assert rows["aten::loop_a"].covered is None


def test_diff_tells_lost_gained_changed_added_removed():
    old = [Row("aten::a", "native"), Row("aten::b", "missing"), Row("aten::c", "native"),
           Row("aten::d", "composite", covered=True), Row("aten::gone", "native")]
    new = [Row("aten::a", "missing"), Row("aten::b", "native"), Row("aten::c", "fallback"),
           Row("aten::d", "composite", covered=False, blocked_by=["aten::a"]), Row("aten::new", "missing")]
    d = diff(old, new, "old", "new")
    assert [e["op"] for e in d.lost] == ["aten::a", "aten::d"] and d.lost[1]["now"] == "composite-blocked"
    assert d.lost[1]["blocked_by"] == ["aten::a"]
    assert [e["op"] for e in d.gained] == ["aten::b"]
    assert d.changed == [{"op": "aten::c", "was": "native", "now": "fallback"}]
    assert d.added == ["aten::new"] and d.removed == ["aten::gone"]


def _census(rows):
    return Census(device="refdev", backend_key="PrivateUse1", torch_version="2.x", rows=rows, profile="refdev")


@pytest.fixture
def store(tmp_path):
    with open_store(str(tmp_path / "c.db")) as s:
        yield s


def test_records_round_trip_and_replace(store):
    rows = [Row("aten::a", "native"), Row("aten::b", "composite", "CompositeImplicitAutograd", ["aten::a"], True),
            Row("aten::c", "composite", "CompositeExplicitAutograd", None, None),
            Row("aten::d", "composite", "CompositeImplicitAutograd", [], True),
            Row("aten::e", "composite", "CompositeImplicitAutograd", ["aten::z"], False, ["aten::z"])]
    assert records.save(store, "b1", _census(rows)) == 5
    assert records.load(store, "b1") == rows
    assert store.build_row("b1")["device"] == "refdev"
    assert store.build_row("b1")["metadata"]["census"]["counts"]["composite"] == 4
    records.save(store, "b1", _census(rows[:1]))           # a new reading replaces the old one
    assert records.load(store, "b1") == rows[:1]
    store.ensure_build("plain", device="refdev")
    assert records.load(store, "plain") is None


def _gate(store, baseline, build):
    config = parse_config({})
    with gate_context(store, baseline, build):
        return evaluate({}, {}, config).rule("lost_operator")


def test_gate_rule_warns_on_lost_operators_and_skips_quietly(store):
    records.save(store, "old", _census([Row("aten::a", "native"), Row("aten::b", "missing")]))
    records.save(store, "new", _census([Row("aten::a", "missing"), Row("aten::b", "native")]))
    store.ensure_build("nocensus", device="refdev")
    rule = _gate(store, "old", "new")
    assert rule.mode == "warn" and rule.status == "warn" and rule.count == 1
    assert rule.findings == [{"lost_op": "aten::a", "was": "native", "now": "missing"}]
    records.save(store, "same", _census([Row("aten::a", "missing"), Row("aten::b", "native")]))
    same = _gate(store, "new", "same")
    assert same.findings == [] and same.status == "pass" and same.detail == "0 operators lost"
    for pair in (("old", "nocensus"), ("nocensus", "new"), (None, "new")):
        quiet = _gate(store, *pair)
        assert quiet.status == "pass" and quiet.detail == "no census to compare"
    assert lost_operator_findings() == (None, "no census to compare")   # outside any context
    assert evaluate({}, {}, parse_config({"rules": {"lost_operator": "fail"}})).rule("lost_operator").status == "pass"


def test_trace_records_what_a_composite_reaches():
    from torchconform.census.trace import trace_composite

    assert trace_composite("aten::linear", "CPU") == ["aten::mm", "aten::t"]
    assert trace_composite("aten::softmax.int", "CPU") == ["aten::_softmax"]
    assert trace_composite("aten::no_such_op", "CPU") is None


def _cli(*args, db):
    return subprocess.run([sys.executable, "-m", "torchconform", "census", *args, "--db", db],
                          capture_output=True, text=True, timeout=120)


def test_cli_reads_stored_census_and_refuses_bad_input(store, tmp_path):
    records.save(store, "old", _census([Row("aten::a", "native"), Row("aten::b", "missing")]))
    records.save(store, "new", _census([Row("aten::a", "missing"), Row("aten::b", "native")]))
    store.ensure_build("plain", device="refdev")
    db = store.url
    out = _cli("--build", "new", "--baseline", "old", "--csv", str(tmp_path / "c.csv"), db=db)
    assert out.returncode == 0, out.stderr
    assert "aten::a\tmissing" in out.stdout and "1 lost, 1 gained" in out.stdout
    assert "lost     aten::a  native -> missing" in out.stdout
    assert (tmp_path / "c.csv").read_text().splitlines()[1].startswith("aten::a,missing")
    for args, needle in [
        (("--build", "plain"), "has no census"),
        (("--build", "new", "--baseline", "plain"), "'plain' has no census"),
        (("--build", "new", "--baseline", "new"), "is the build itself"),
        (("--build", "absent"), "absent"),
        (("--build", "new", "--csv", str(tmp_path / "no" / "c.csv")), "does not exist"),
        (("--build", "x", "--device", "nodev"), "device 'nodev' is not registered"),
    ]:
        r = _cli(*args, db=db)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("torchconform: error:"), r.stderr


def test_the_census_is_compared_with_what_the_builds_tests_found():
    from torchconform.census.agreement import compare
    from torchconform.core.outcome import Outcome

    rows = classify(sorted(TABLE), Keys("PrivateUse1", "AutogradPrivateUse1", backend_fallback=True), has)
    outcomes = [
        Outcome("t1", "pass_fallback", fallback_ops=["aten::sin"]),          # census: fallback (agrees)
        Outcome("t2", "skip_backend", kind="missing_op", missing_op="aten::_cudnn_rnn"),   # missing (agrees)
        Outcome("t3", "skip_backend", kind="missing_op", missing_op="aten::mm"),   # census: native (a broken kernel)
        Outcome("t4", "pass_fallback", fallback_ops=["aten::fused"]),        # census: autograd
        Outcome("t5", "skip_backend", kind="missing_collective", missing_op="all_to_all"),  # not an operator
        Outcome("t6", "pass"),
    ]
    got = compare(rows, outcomes)
    assert got.seen_by_both == 4
    assert [(op, st) for op, st, _ in got.disagree] == [("aten::fused", "autograd"), ("aten::mm", "native")]
    assert "4 operators known to both, 2 agree, 2 disagree" in got.line()
    assert got.to_dict()["found"]["aten::mm"] == {"missing": 1, "fallback": 0}

