"""Per-model operator census: what a model's CPU runs reach (census/modeltrace.py), how the
sets travel with the outcomes into the store (census/models.py), what blocks each model on
a census, `census --models`, and the acceptance check against implementing operators one
by one on refdev (issue 17)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from torchconform.census import models
from torchconform.db import model_ops
from torchconform.core.dispatch import Row
from torchconform.census.take import Census
from torchconform.core.outcome import PASS, SKIP_BACKEND, Outcome
from torchconform.db.opening import open_store

from support import child_env

PY_MODEL = textwrap.dedent("""
    import torch

    def build():
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        return model, {"input": torch.randn(3, 4)}
""")


def _outcome(model_id, variant, ops=None, **fields):
    o = Outcome(test_id=f"models::{model_id}::{variant}", outcome=fields.pop("outcome", PASS), suite="models",
                file=model_id.split("/")[0], cls=model_id, name=variant, op=model_id, variant=variant, **fields)
    if ops is not None:
        o.trace = {"ops": sorted(ops), "torch_version": "9.9", "library_version": "1.0"}
    return o


def _model_ops(store):
    from sqlalchemy import select

    from torchconform.db.models import model_ops

    with store.read() as conn:
        return {(r.model_id, r.variant): r for r in conn.execute(select(model_ops))}


# -- what blocks a model, from made-up census rows ---------------------------------------

ROWS = {r.op: r for r in [
    Row("aten::mm", "native"),
    Row("aten::sin.out", "missing"),
    Row("aten::erf.out", "missing"),
    Row("aten::sin", "composite", "CompositeExplicitAutogradNonFunctional", ["aten::sin.out"], False,
        ["aten::sin.out"]),
    # a composite blocked through another composite: the root is what blocks
    Row("aten::outer", "composite", "CompositeImplicitAutograd", ["aten::sin", "aten::mm"], False, ["aten::sin"]),
    Row("aten::fine", "composite", "CompositeImplicitAutograd", ["aten::mm"], True, []),
    Row("aten::unknown", "composite", "CompositeImplicitAutograd", None, None, []),
]}


def test_blocking_follows_composites_to_their_roots_and_direct_wins():
    assert models.blocking(ROWS, ["aten::mm", "aten::fine", "aten::unknown"]) == {}
    assert models.blocking(ROWS, ["aten::outer", "aten::erf.out"]) == {
        "aten::sin.out": "aten::outer", "aten::erf.out": models.DIRECT}
    # reached directly as well as through a composite: direct
    assert models.blocking(ROWS, ["aten::sin", "aten::sin.out"]) == {"aten::sin.out": models.DIRECT}
    assert models.blocking(ROWS, ["aten::not_in_census"]) == {}


# -- storage ------------------------------------------------------------------------------

def test_sets_are_stored_per_versions_and_replaced(tmp_path):
    with open_store(str(tmp_path / "s.db")) as store:
        model_ops.save(store, "hf/a", "eval", "2.0", "4.1", ["aten::mm", "aten::relu", "aten::mm"])
        model_ops.save(store, "hf/a", "train", "2.0", "4.1", ["aten::mm"])
        model_ops.save(store, "hf/a", "eval", "3.0", "4.1", ["aten::sin"])
        model_ops.save(store, "hf/b", "eval", "2.0", "4.1", ["aten::cos"])
        model_ops.save(store, "hf/a", "eval", "2.0", "4.1", ["aten::add.Tensor"])  # a retrace replaces
        assert model_ops.load(store, "2.0") == {"hf/a": {"eval": {"aten::add.Tensor"}, "train": {"aten::mm"}},
                                             "hf/b": {"eval": {"aten::cos"}}}
        assert model_ops.load(store, "3.0", ["hf/a"]) == {"hf/a": {"eval": {"aten::sin"}}}
        assert model_ops.stored(store, ["hf/a", "hf/c"], "2.0") == {
            "hf/a": (("eval", "2.0", "4.1"), ("train", "2.0", "4.1"))}
        assert _model_ops(store)[("hf/a", "train")].ops == "aten::mm"


# -- the data path: the record carries the set, the store keeps it with the outcome ---------

def test_the_outcome_record_carries_the_set_but_not_as_a_field(tmp_path):
    import dataclasses

    from torchconform.collectors.sink_jsonl import JsonlSink, read_jsonl

    o = _outcome("hf/a", "eval", ["aten::mm"])
    assert "trace" not in {f.name for f in dataclasses.fields(Outcome)}   # not a results column
    assert Outcome.from_dict(o.to_dict()).trace == o.trace
    assert "trace" not in _outcome("hf/a", "eval").to_dict()
    sink = JsonlSink(tmp_path / "r.jsonl")
    sink.pytest_torchconform_outcomes(None, [o, _outcome("hf/a", "train")])
    sink.pytest_torchconform_run_end(None, {}, 0)
    _, back = read_jsonl(tmp_path / "r.jsonl")
    assert [b.trace for b in back] == [o.trace, None]


def test_add_outcomes_stores_the_sets_in_the_outcomes_transaction(tmp_path):
    with open_store(str(tmp_path / "s.db")) as store:
        store.ensure_build("b")
        run = store.start_run("b", suite="models")
        store.add_outcomes(run, [_outcome("hf/a", "eval", ["aten::mm"]), _outcome("hf/a", "train")])
        assert set(_model_ops(store)) == {("hf/a", "eval")}
        row = _model_ops(store)[("hf/a", "eval")]
        assert (row.ops, row.torch_version, row.library_version) == ("aten::mm", "9.9", "1.0")
        # one transaction: an outcome that is not stored leaves no set behind either
        with pytest.raises(RuntimeError):
            with store.write() as conn:
                store.add_outcomes(run, [_outcome("hf/z", "eval", ["aten::sin"])], conn=conn)
                raise RuntimeError("killed before the commit")
        assert set(_model_ops(store)) == {("hf/a", "eval")}


# -- the trace itself ---------------------------------------------------------------------

def test_run_model_traces_eval_train_with_backward_and_compile(tmp_path):
    import torch

    from torchconform.core.profile import load_profile
    from torchconform.suites.models.check import run_model

    path = tmp_path / "tiny.py"
    path.write_text(PY_MODEL)
    model_id = f"py/{path}::build"
    outcomes = {o.variant: o for o in run_model(model_id, "cpu", load_profile("cpu"), compile_backend="aot_eager")}
    assert {v: o.outcome for v, o in outcomes.items()} == {"eval": PASS, "train": PASS, "compile": PASS}
    sets = {v: set(o.trace["ops"]) for v, o in outcomes.items()}
    assert {"aten::addmm", "aten::relu"} <= sets["eval"]
    assert "aten::linear" not in sets["eval"]            # decomposed before the backend key is asked
    assert {"aten::threshold_backward", "aten::mm"} <= sets["train"] - sets["eval"]   # backward
    assert {"aten::addmm", "aten::relu"} <= sets["compile"]
    assert "aten::set_.source_Storage" not in sets["eval"]   # the model's copy is not traced
    assert outcomes["eval"].trace["library_version"] == models_library(model_id)
    assert models_library(model_id).startswith("file-")
    assert outcomes["eval"].trace["torch_version"] == torch.__version__
    # a set the store has at these versions is not traced again
    again = run_model(model_id, "cpu", load_profile("cpu"), variants=("eval", "train"),
                      traced=[("eval", torch.__version__, models_library(model_id))])
    assert [(o.variant, o.trace is None) for o in again] == [("eval", True), ("train", False)]


def models_library(model_id):
    from torchconform.suites.models.catalog import library_version

    return library_version(model_id)


def test_the_observer_records_what_a_backend_is_asked_for_as_the_mode_does():
    import torch

    from torchconform.census import modeltrace

    if modeltrace.native_recorder() is None:
        pytest.skip("no C++ compiler: the dispatch mode records")
    lib = torch.library.Library("tc_census_test", "DEF")  # an operator whose CPU kernel calls another
    lib.define("outer(Tensor x) -> Tensor")
    lib.impl("outer", lambda x: torch.mul(x, 2), "CPU")

    def run():
        torch.manual_seed(0)
        linear = torch.nn.Linear(4, 3)
        x = torch.randn(2, 4)
        torch.ops.tc_census_test.outer(x)  # its mul is the kernel's own call: counted for nobody
        linear(x).softmax(-1).sum().backward()

    with modeltrace.recording() as native:
        run()
    with modeltrace.recording(native=False) as mode:
        run()
    seen = modeltrace.names(native)
    assert "aten::linear" not in seen and "aten::addmm" in seen  # a composite is looked through
    assert "aten::_softmax_backward_data" in seen  # backward's calls count
    assert "aten::mul.Tensor" not in seen  # only inside a recorded operator
    assert seen == modeltrace.names(mode)  # on this graph the two recorders agree exactly


def test_library_versions_per_family(tmp_path):
    from importlib import metadata

    assert models_library("hf/bert") == metadata.version("transformers")
    # a model defined by a file: its content is the version (an edited file is traced again)
    path = tmp_path / "m.py"
    path.write_text(PY_MODEL)
    first = models_library(f"py/{path}::build")
    assert first.startswith("file-") and first == models_library(f"py/{path}::other")
    path.write_text(PY_MODEL + "\n# edited\n")
    assert models_library(f"py/{path}::build") not in ("", first)
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "bert"}')
    assert models_library(f"hfcfg/{config}").startswith(metadata.version("transformers") + "+file-")


def test_a_sweep_stores_model_ops_and_does_not_trace_twice(tmp_path):
    from torchconform.sweep.driver import SweepOptions, run_sweep

    path = tmp_path / "tiny.py"
    path.write_text(PY_MODEL)
    model_id = f"py/{path}::build"
    db = str(tmp_path / "s.db")

    def sweep(build, **extra):
        run_sweep(SweepOptions(build=build, selection=model_id, device="cpu", db=db, variants=("eval", "train"),
                               progress_stream=open(os.devnull, "w"), **extra))
        with open_store(db) as store:
            return {k: (r.ops, r.traced) for k, r in _model_ops(store).items()}

    first = sweep("b1")
    assert set(first) == {(model_id, "eval"), (model_id, "train")}
    assert "aten::threshold_backward" in first[(model_id, "train")][0]
    assert sweep("b2") == first                       # stored already: not traced, not rewritten
    retraced = sweep("b3", retrace=True)
    assert all(retraced[k][1] > first[k][1] and retraced[k][0] == first[k][0] for k in first)


# -- census --models ----------------------------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "torchconform.cli.main", *args], capture_output=True, text=True,
                          env=child_env())


def test_census_models_lists_every_blocking_operator(tmp_path):
    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        store.ensure_build("b", torch_version="9.9")
        run = store.start_run("b", suite="models")
        store.add_outcomes(run, [
            _outcome("hf/a", "eval", ["aten::outer", "aten::mm"], outcome=SKIP_BACKEND, kind="missing_op",
                     missing_op="aten::sin.out"),
            _outcome("hf/a", "train", ["aten::erf.out"], outcome=SKIP_BACKEND, kind="missing_op",
                     missing_op="aten::erf.out"),
            _outcome("hf/ok", "eval", ["aten::mm"]), _outcome("hf/untraced", "eval")])
        store.ensure_build("nocensus")
    from torchconform.census import records

    with open_store(db) as store:
        records.save(store, "b", Census("refdev", "PrivateUse1", "9.9", list(ROWS.values())))
    out = _cli("census", "--build", "b", "--models", "--db", db)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "hf/a\t2 blocking: aten::erf.out, aten::sin.out (through aten::outer)"
    assert lines[1:3] == ["hf/ok\tnothing blocks it", "hf/untraced\tno stored operator trace"]
    doc = json.loads(_cli("census", "--build", "b", "--models", "--json", "--db", db).stdout)
    got = {m["model"]: (m["traced"], m["blocking"], m["variants"]) for m in doc["models"]}
    assert got["hf/a"] == (True, {"aten::erf.out": "direct", "aten::sin.out": "aten::outer"},
                           {"eval": ["aten::sin.out"], "train": ["aten::erf.out"]})
    assert got["hf/untraced"] == (False, {}, {})
    bad = _cli("census", "--build", "nocensus", "--models", "--db", db)
    assert bad.returncode == 2 and "has no census" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


# -- acceptance: the census-based set equals implementing operators one by one -------------

# Per model, overloads only that model of the three reaches (so one profile serves all
# three: switching one model's operator to fallback changes nothing for the others), each
# on refdev's operator list (a composite cannot be made missing).  Some are reached
# directly, some only through a composite's decomposition (aten::tanh -> aten::tanh.out).
DESIGN = {
    "hf/bert": ["aten::tanh.out", "aten::gelu_backward.grad_input", "aten::native_layer_norm_backward"],
    "hf/llama": ["aten::rsqrt.out", "aten::silu.out"],
    "hf/resnet": ["aten::native_batch_norm", "aten::native_batch_norm_backward", "aten::max_pool2d_with_indices.out"],
}

# One model run per process (refdev reads its profile once per process): each failing
# variant of each model, as JSON lines {model, variant, outcome, missing_op}.
RUNNER = textwrap.dedent("""
    import json, sys
    import torch
    from torchconform.core.profile import load_profile
    from torchconform.suites.models import backend
    from torchconform.suites.models.catalog import library_version
    from torchconform.suites.models.check import run_model
    profile = load_profile("refdev")
    backend.prepare(profile)
    for model_id, variants in json.loads(sys.argv[1]).items():
        stored = [(v, torch.__version__, library_version(model_id)) for v in variants]  # no trace needed
        for o in run_model(model_id, "refdev", profile, variants=tuple(variants), traced=stored):
            print(json.dumps({"model": model_id, "variant": o.variant, "outcome": o.outcome,
                              "kind": o.kind, "missing_op": o.missing_op, "message": o.message}))
""")


def test_the_autograd_slot_decides_which_composite_runs():
    from torchconform.core.dispatch import Keys, classify, trace_key

    table = {"aten::silu_backward": {"CPU", "CompositeImplicitAutograd", "CompositeExplicitAutogradNonFunctional"},
             "aten::gelu_backward": {"CPU", "CompositeExplicitAutogradNonFunctional"},
             "aten::both": {"CompositeImplicitAutograd", "CompositeExplicitAutograd"}}
    keys = Keys("PrivateUse1", "AutogradPrivateUse1")

    def has(op, key):
        return key in table[op]

    assert {r.op: r.via for r in classify(sorted(table), keys, has)} == {
        "aten::silu_backward": "CompositeImplicitAutograd",   # decomposed at the autograd key
        "aten::gelu_backward": "CompositeExplicitAutogradNonFunctional", "aten::both": "CompositeExplicitAutograd"}
    assert [trace_key(op, keys, has) for op in sorted(table)] == ["PrivateUse1", "PrivateUse1", "AutogradPrivateUse1"]


def _profile(path, missing, fallback):
    path.write_text(json.dumps({"name": path.stem, "missing": {"share_percent": 0, "ops": sorted(missing)},
                                "fallback": {"ops": sorted(fallback)}}))
    return str(path)


def test_census_blocking_equals_implementing_operators_one_by_one(tmp_path):
    db = str(tmp_path / "s.db")
    missing = {op for ops in DESIGN.values() for op in ops}
    env = child_env(TORCHCONFORM_REFDEV_PROFILE=_profile(tmp_path / "p0.yaml", missing, ()))
    # The census and the models' sets, the user's way (the sweep stores the traces).
    for cmd in (["census", "--device", "refdev", "--build", "b", "--db", db, "--diff-only"],
                ["sweep", "--suite", "models", "--selection", ",".join(DESIGN), "--build", "b", "--db", db]):
        done = subprocess.run([sys.executable, "-m", "torchconform.cli.main", *cmd], capture_output=True,
                              text=True, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
    from torchconform.census import records
    from torchconform.db.read_rows import iter_outcomes

    with open_store(db) as store:
        blocks = models.blocking_for_build(store, "b", records.require(store, "b"))
        first = [(o.op, o.variant, o.outcome, o.kind, o.missing_op) for o in iter_outcomes(store, "b")]
    census_sets = {m: set(blocks[m].ops) for m in DESIGN}
    assert all(blocks[m].traced for m in DESIGN)
    assert all(2 <= len(s) <= 4 for s in census_sets.values()), census_sets
    assert blocks["hf/bert"].ops["aten::tanh.out"] == "aten::tanh"          # through a composite
    assert blocks["hf/resnet"].ops["aten::native_batch_norm"] == models.DIRECT

    # One by one: every variant that stops at a missing operator names it; switch the
    # operators found to fallback, rerun what did not pass, until everything passes.
    found = {m: set() for m in DESIGN}
    failing = {}
    for model_id, variant, outcome, kind, missing_op in first:
        if outcome != PASS and outcome != "pass_fallback":
            assert kind == "missing_op", (model_id, variant, outcome)
            found[model_id].add(missing_op)
            failing.setdefault(model_id, []).append(variant)
    for step in range(1, 6):
        if not failing:
            break
        fallback = set().union(*found.values())
        env["TORCHCONFORM_REFDEV_PROFILE"] = _profile(tmp_path / f"p{step}.yaml", missing - fallback, fallback)
        runner = tmp_path / "runner.py"
        runner.write_text(RUNNER)
        done = subprocess.run([sys.executable, str(runner), json.dumps(failing)], capture_output=True, text=True,
                              env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        failing = {}
        for rec in map(json.loads, done.stdout.splitlines()):
            if rec["outcome"] not in (PASS, "pass_fallback"):
                assert rec["kind"] == "missing_op", rec
                assert rec["missing_op"] not in fallback, rec   # it progressed past what was switched
                found[rec["model"]].add(rec["missing_op"])
                failing.setdefault(rec["model"], []).append(rec["variant"])
    assert not failing, failing
    assert found == census_sets
