"""The evaluation page (issue 16): traits beside the baseline's, the environment, numerical
error and its drift, cold and warm cost per model; and the gate naming traits that changed."""
import json

import pytest

from torchconform.core.notes import parse_timing_note, timing_note
from torchconform.core.outcome import Outcome
from torchconform.core.traitnotes import trait_note
from torchconform.db.opening import open_store

EVIL = "py/<b>evil</b>.py::m"


def _build(store, name, copies: bool, sin_abs: float):
    store.ensure_build(name, device="refdev", branch="main", profile="young-backend")
    run = store.start_run(name, suite="traits")
    store.add_outcomes(run, [
        Outcome("traits::noncontiguous_copy", "pass", suite="traits", name="noncontiguous_copy",
                message=trait_note("noncontiguous_copy", {"copies": copies, "bytes_per_call": 4096 if copies else 0})),
        Outcome("traits::precision", "pass", suite="traits", name="precision",
                message=trait_note("precision", {"float64": {"executes_as": "float32"}})),
    ])
    store.finish_run(run, 0)
    run = store.start_run(name, suite="ops")
    store.add_outcomes(run, [
        Outcome("t.py::T::test_sin_f32", "pass", op="sin", dtype="float32", max_abs_err=sin_abs, max_rel_err=1e-8),
        Outcome("t.py::T::test_add_f32", "pass", op="add", dtype="float32", max_abs_err=2e-8, max_rel_err=1e-8),
    ])
    store.finish_run(run, 0)
    run = store.start_run(name, suite="models")
    store.add_outcomes(run, [Outcome(
        f"models::{EVIL}::eval", "pass", suite="models", op=EVIL, name="eval", variant="eval",
        message=timing_note(device_cold_s=0.2, cpu_cold_s=0.1, device_warm_s=0.03, cpu_warm_s=0.01,
                            warm_calls=3, compiles=None))])
    store.finish_run(run, 0)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from torchconform.dashboard import build_site

    root = tmp_path_factory.mktemp("evaluation")
    db = root / "s.db"
    with open_store(str(db)) as store:
        _build(store, "base", copies=False, sin_abs=1e-8)
        _build(store, "new", copies=True, sin_abs=1e-6)   # 100x the error, still passing
        build_site(store, root / "out")
    return db, root / "out"


def test_timing_note_round_trip_and_refusals():
    text = timing_note(device_cold_s=1.5, device_warm_s=None, cpu_cold_s=0.25, cpu_warm_s=None, warm_calls=0,
                       compiles=2)
    assert parse_timing_note(text) == {"device_cold_s": 1.5, "device_warm_s": None, "cpu_cold_s": 0.25,
                                       "cpu_warm_s": None, "warm_calls": 0, "compiles": 2}
    assert parse_timing_note("timing: device_cold_s=1") is None     # fields missing
    assert parse_timing_note("AssertionError: timing: x=1") is None
    with pytest.raises(ValueError):
        timing_note(seconds=1.0)


def test_the_page_compares_traits_errors_and_costs_with_the_baseline(built):
    _, out = built
    html = (out / "builds" / "new" / "evaluation.html").read_text()
    assert 'href="evaluation.html"' in (out / "builds" / "new" / "index.html").read_text()
    assert "Traits changed since the baseline: copies non-contiguous inputs, bytes per call." in html
    traits = {r["trait"]: r for r in json.loads((out / "builds" / "new" / "traits.json").read_text())}
    assert (traits["copies non-contiguous inputs"]["baseline"], traits["copies non-contiguous inputs"]["value"],
            traits["copies non-contiguous inputs"]["changed"]) == ("no", "yes", "changed")
    assert traits["float64 executes as"]["value"] == "float32" and traits["float64 executes as"]["changed"] == ""
    drift = json.loads((out / "builds" / "new" / "drift.json").read_text())
    assert [(d["op"], d["dtype"], d["abs growth"]) for d in drift] == [("sin", "float32", 100.0)]  # add did not grow
    errors = {(e["op"], e["dtype"]): e for e in json.loads((out / "builds" / "new" / "numeric-errors.json").read_text())}
    assert errors[("sin", "float32")]["max abs error"] == 1e-6
    cost, = json.loads((out / "builds" / "new" / "model-cost.json").read_text())
    assert (cost["cold ratio"], cost["warm ratio"], cost["warm calls"]) == (2.0, 3.0, 3)
    # the first build has nothing to compare with
    first = (out / "builds" / "base" / "evaluation.html").read_text()
    assert "no baseline" in first and "Traits changed" not in first


def test_text_from_tests_is_escaped(built):
    _, out = built
    html = (out / "builds" / "new" / "evaluation.html").read_text()
    assert "<b>evil</b>" not in html and "&lt;b&gt;evil&lt;/b&gt;" in html


def test_the_gate_summary_lists_traits_that_changed(built):
    from torchconform.ci.pipeline import gate_build

    db, _ = built
    with open_store(str(db)) as store:
        run = gate_build(store, "new", baseline="base")
    assert "## Traits changed since the baseline (2)" in run.markdown
    assert "| copies non-contiguous inputs | no | yes |" in run.markdown
    assert "float64 executes as" not in run.markdown.split("## Traits changed")[1].split("##")[0]


def test_drift_cli_lists_errors_growth_and_history(built, capsys):
    from torchconform.cli.main import main

    db, _ = built

    def call(*args):
        code = main(["drift", "--db", str(db), *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    code, out, _ = call("--build", "new", "--baseline", "latest", "--json")
    assert code == 0
    assert [(r["op"], r["dtype"], r["abs_growth"]) for r in json.loads(out)] == [("sin", "float32", 100.0)]
    code, out, _ = call("--build", "new", "--baseline", "base")
    assert code == 0 and out.splitlines()[1].split()[:2] == ["sin", "float32"] and "add" not in out
    code, out, _ = call("--op", "sin", "--dtype", "float32", "--json")
    assert [(r["build"], r["max_abs_err"]) for r in json.loads(out)] == [("base", 1e-8), ("new", 1e-6)]
    for args, says in ((("--op", "sin"), "pass both"), (("--build", "nope"), "unknown build"),
                       (("--build", "base", "--baseline", "latest"), "no baseline")):
        code, out, err = call(*args)
        assert code != 0 and says in err and len(err.strip().splitlines()) == 1
