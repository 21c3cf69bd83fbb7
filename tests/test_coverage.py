"""The coverage audit (issue 33 4a): reached overloads per test (torchconform/core/coverage.py),
stored per run by the store's sink at each batch and unioned per build (db/coverage.py),
against the census; ``torchconform coverage``; the site's coverage page.  Small fixtures:
outcomes written through StoreSink as the plugin writes them, census rows inserted."""
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import insert, select

from torchconform.core.coverage import BACKEND, DISPATCHER, MARK, RunCoverage, call_coverage, reached_ops
from torchconform.core.outcome import Outcome
from torchconform.db.coverage import build_coverage, headline
from torchconform.db.models import census_ops, op_coverage
from torchconform.db.opening import open_store
from torchconform.db.sink import StoreSink

REPO = Path(__file__).resolve().parents[1]
XSS = "aten::<script>alert(1)</script>"

CENSUS = {  # op -> status
    "aten::add.out": "native", "aten::mul.out": "native", "aten::flip": "native",
    "aten::add.Tensor": "composite", "aten::linear": "composite",
    "aten::cumsum.out": "fallback", "aten::cholesky": "missing",
    "aten::cudnn_thing": "unavailable",
}


def _o(test_id, outcome="pass", ops=None, trace=BACKEND, **kw):
    o = Outcome(test_id, outcome, suite="ops", **kw)
    o.coverage = None if ops is None else {"trace": trace, "ops": sorted(ops)}
    return o


def _run(url, build, batches, end=True):
    """One run through the store's sink, a batch per flush, as the plugin drives it."""
    sink = StoreSink(url)
    sink.pytest_torchconform_run_start(None, {"build": build, "suite": "ops", "device": "refdev"})
    for batch in batches:
        sink.pytest_torchconform_outcomes(None, batch)
    if end:
        sink.pytest_torchconform_run_end(None, {}, 0)
    return sink


def _census(url, build, rows=CENSUS):
    with open_store(url) as store:
        build_id = store.ensure_build(build, append=True)
        with store.write() as conn:
            conn.execute(insert(census_ops), [{"build_id": build_id, "op": op, "status": st, "via": "", "blocked_by": ""}
                                              for op, st in rows.items()])


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'store.db'}"


# -- per test and per run (pure) ---------------------------------------------------------------
def test_a_test_is_measured_only_by_a_trace():
    assert call_coverage(None, None) is None
    assert call_coverage(SimpleNamespace(recorded=False, ops={"aten::add.out"}), None) is None
    assert call_coverage(None, []) == {"trace": BACKEND, "ops": []}          # measured: reached nothing
    seen = SimpleNamespace(recorded=True, ops={"aten::add.Tensor", "aten::add.out"})
    assert call_coverage(seen, ["aten::add.out", "aten::mul.out"]) == {
        "trace": f"{DISPATCHER}+{BACKEND}", "ops": ["aten::add.Tensor", "aten::add.out", "aten::mul.out"]}


def test_fallback_and_missing_operators_are_reached_and_unmeasured_records_add_nothing():
    o = _o("t1", "skip_backend", ["aten::add.out"], kind="missing_op", missing_op="aten::cholesky",
           fallback_ops=["aten::cumsum.out"])
    assert reached_ops(o) == ([BACKEND], {"aten::add.out", "aten::cholesky", "aten::cumsum.out"})
    assert reached_ops(_o("t2", "pass_fallback", None, fallback_ops=["aten::cumsum.out"])) is None
    run = RunCoverage()
    run.add([o, _o("t2"), _o("t3", ops=["aten::add.out"])])
    assert run.ops == {"aten::add.out": [2, "t1"], "aten::cholesky": [1, "t1"], "aten::cumsum.out": [1, "t1"]}
    assert run.traces == {BACKEND: 2}
    assert dict((k, (n, ex)) for k, n, ex in run.take_changes()) == {
        "aten::add.out": (2, "t1"), "aten::cholesky": (1, "t1"), "aten::cumsum.out": (1, "t1"), MARK + BACKEND: (2, "")}
    assert run.take_changes() == []
    run.add([_o("t4", ops=["aten::add.out"])])
    assert run.take_changes() == [(MARK + BACKEND, 3, ""), ("aten::add.out", 3, "t1")]


# -- the store: per run at each batch, union per build -----------------------------------------
def test_each_batch_stores_the_runs_rows_and_a_killed_run_keeps_them(url):
    sink = _run(url, "b", [[_o("t1", ops=["aten::add.out", "aten::flip"])], [_o("t2", ops=["aten::add.out"])]],
                end=False)   # killed before its end: what it stored stays
    with open_store(url) as store, store.read() as conn:
        rows = {r.op: (r.tests, r.example_test) for r in conn.execute(select(op_coverage))}
    assert rows == {"aten::add.out": (2, "t1"), "aten::flip": (1, "t1"), MARK + BACKEND: (2, "")}
    sink.store.close()


def test_a_build_is_the_union_of_its_runs_against_its_census(url):
    _run(url, "b", [[_o("t1", ops=["aten::add.out"]), _o("t2", ops=["aten::add.out", XSS])]])
    _run(url, "b", [[_o("t3", "skip_backend", ["aten::mul.out"], kind="missing_op", missing_op="aten::cholesky"),
                     _o("t4")]])   # t4: not traced
    _census(url, "b")
    with open_store(url) as store:
        cov = build_coverage(store, "b")
    reached = {r["op"]: (r["tests"], r["example_test"], r["status"]) for r in cov["reached_ops"]}
    assert reached == {"aten::add.out": (2, "t1", "native"), XSS: (1, "t2", ""), "aten::mul.out": (1, "t3", "native"),
                       "aten::cholesky": (1, "t3", "missing")}
    assert cov["traces"] == {BACKEND: 3}
    # backend-relevant: every status but unavailable (7); the backend's executed operators cannot
    # show composites, so they are not measured (5 measurable), never counted as unreached
    assert (cov["relevant"], cov["measurable"], cov["reached"], cov["percent"]) == (7, 5, 3, 60.0)
    assert cov["not_measured"] == ["composite"] and cov["statuses"]["composite"]["measured"] is False
    assert cov["unreached"] == [{"op": "aten::flip", "status": "native"}, {"op": "aten::cumsum.out", "status": "fallback"}]
    assert [r["op"] for r in cov["outside_census"]] == [XSS]
    assert headline(cov).startswith("coverage 60.00 %: 3 of 5 backend-relevant overloads reached (7 in all; 2 composite")


def test_the_dispatcher_trace_measures_composites(url):
    _run(url, "d", [[_o("t1", ops=["aten::add.Tensor", "aten::add.out"], trace=DISPATCHER)]])
    _census(url, "d")
    with open_store(url) as store:
        cov = build_coverage(store, "d")
    assert (cov["measurable"], cov["reached"], cov["not_measured"]) == (7, 2, [])
    assert cov["statuses"]["composite"] == {"overloads": 2, "reached": 1, "measured": True}
    assert {"op": "aten::linear", "status": "composite"} in cov["unreached"]


def test_a_backend_without_tracking_is_not_measured_never_zero(url):
    _run(url, "n", [[_o("t1"), _o("t2", "pass_fallback", fallback_ops=["aten::cumsum.out"])]])
    _census(url, "n")
    with open_store(url) as store:
        cov = build_coverage(store, "n")
        assert not store_rows(store)
    assert cov["measured"] is False and cov["percent"] is None and cov["reached"] is None and cov["unreached"] == []
    assert headline(cov).startswith("coverage not measured") and "0 %" not in headline(cov)


def store_rows(store):
    with store.read() as conn:
        return conn.execute(select(op_coverage)).all()


# -- the command ----------------------------------------------------------------------------
def _tc(*args):
    return subprocess.run([sys.executable, "-m", "torchconform", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_command_prints_figures_unreached_and_not_measured(url, tmp_path):
    _run(url, "b", [[_o("t1", ops=["aten::add.out", "aten::mul.out"])]])
    _run(url, "n", [[_o("t1")]])
    _census(url, "b")
    db = tmp_path / "store.db"
    text = _tc("coverage", "--build", "b", "--db", db, "--unreached")
    assert text.returncode == 0, text.stderr
    assert "build b: coverage 40.00 %: 2 of 5 backend-relevant overloads reached" in text.stdout
    assert "    composite  not measured (2 overloads)\n" in text.stdout
    assert "unreached (3):\n    aten::flip  [native]\n    aten::cumsum.out  [fallback]\n    aten::cholesky  [missing]" \
        in text.stdout
    data = json.loads(_tc("coverage", "--build", "b", "--db", db, "--json").stdout)
    assert data["percent"] == 40.0 and [r["op"] for r in data["reached_ops"]] == ["aten::add.out", "aten::mul.out"]
    none = _tc("coverage", "--build", "n", "--db", db)
    assert none.returncode == 0 and "coverage not measured" in none.stdout and "%" not in none.stdout
    bad = _tc("coverage", "--build", "nope", "--db", db)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "unknown build 'nope'" in bad.stderr


# -- the site -------------------------------------------------------------------------------------
def test_site_page_escapes_and_downloads(url, tmp_path):
    from torchconform.dashboard import build_site

    _run(url, "b", [[_o("t<b>1</b>", ops=["aten::add.out", XSS])]])
    _run(url, "n", [[_o("t1")]])
    _census(url, "b")
    out = tmp_path / "site"
    with open_store(url) as store:
        build_site(store, out)
        cov = build_coverage(store, "b")
    page = (out / "builds/b/coverage.html").read_text()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    assert "t<b>1</b>" not in page and "t&lt;b&gt;1&lt;/b&gt;" in page
    assert "coverage 20.00 %: 1 of 5 backend-relevant overloads reached" in page
    summary = json.loads((out / "builds/b/coverage.json").read_text())
    assert summary == dict({k: v for k, v in cov.items() if k not in ("reached_ops", "unreached")},
                           headline=headline(cov))
    reached = json.loads((out / "builds/b/coverage-reached.json").read_text())
    assert {r["operator"]: r["tests"] for r in reached} == {"aten::add.out": 1, XSS: 1}
    assert [r["operator"] for r in json.loads((out / "builds/b/coverage-unreached.json").read_text())] == \
        ["aten::flip", "aten::mul.out", "aten::cumsum.out", "aten::cholesky"]
    index = (out / "builds/b/index.html").read_text()
    assert 'href="coverage.html">Coverage audit: 20.00 % (1 of 5 backend-relevant overloads)' in index
    assert 'href="coverage.html">Coverage audit: not measured<' in (out / "builds/n/index.html").read_text()
