"""The perf suite's compiled variant (issue 33, item 1): the same forward call through
``torch.compile``, its first call including the compile, timed on the device and on CPU in
the same test, stored with ``variant`` compiled (schema 0014_perf_variant) and compared only
with the same operator compiled in the baseline.

The end-to-end run times add and relu (float32, 2 warm calls) on refdev in both variants.  No
verdict here depends on the machine's load: the assertions are about which rows exist and
what they are compared with; ``first >= min`` holds whatever the load, as the first call
compiles (a tenth of a second and more) and a warm call of these operators takes microseconds."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchconform.core import perf
from torchconform.core.outcome import Outcome
from torchconform.db import migrate, read_rows
from torchconform.db import perf as perf_db
from torchconform.db.models import HEAD_REVISION
from torchconform.db.opening import make_engine, open_store
from torchconform.errors import UserError

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import child_env  # noqa: E402

TC = [sys.executable, "-m", "torchconform"]
OPS = "add,nn.functional.relu"


def _row(op, dev_min, cpu_min, variant=None, direction="forward"):
    row = {"op": op, "dtype": "float32", "direction": direction, "sample": "[20x20]", "calls": 5,
           "dev_first": dev_min * 10, "dev_min": dev_min, "dev_median": dev_min, "dev_max": dev_min * 2,
           "cpu_first": cpu_min * 10, "cpu_min": cpu_min, "cpu_median": cpu_min, "cpu_max": cpu_min * 2}
    if variant:
        row["variant"] = variant
    return row


# -- the judgement (pure) ----------------------------------------------------------------------
def test_a_compiled_timing_is_never_compared_with_an_eager_one():
    eager_only = [_row("add", 1e-3, 1e-3)]
    compiled_only = [_row("add", 9e-3, 1e-3, "compiled")]
    assert perf.compare(eager_only, compiled_only) == [] and perf.compare(compiled_only, eager_only) == []
    old = [_row("add", 1e-3, 1e-3), _row("add", 1e-3, 1e-3, "compiled")]
    new = [_row("add", 1e-3, 1e-3), _row("add", 3e-3, 1e-3, "compiled")]
    got = {d["variant"]: (d["verdict"], round(d["change"], 3)) for d in perf.compare(old, new)}
    assert got == {"eager": ("same", 1.0), "compiled": ("regression", 3.0)}
    assert perf.key(_row("add", 1, 1)) == ("add", "float32", "forward", "eager")   # a row without one is eager
    assert perf.note_text([_row("add", 2e-5, 1e-5, "compiled")]).startswith(
        "perf: compiled forward first device 200.0us cpu 100.0us, warm device 20.0us")


def test_the_cpu_side_compiles_with_torchs_own_backend():
    from torchconform.suites.perf.compiled import cpu_backend

    assert [cpu_backend(b) for b in ("inductor", "aot_eager", "refdev", "neuron")] == \
        ["inductor", "aot_eager", "aot_eager", "aot_eager"]


def test_the_variants_setting(monkeypatch):
    from torchconform.suites.perf.compiled import variants

    monkeypatch.delenv("TORCHCONFORM_PERF_VARIANTS", raising=False)
    assert variants() == ("eager", "compiled")
    monkeypatch.setenv("TORCHCONFORM_PERF_VARIANTS", " compiled ")
    assert variants() == ("compiled",)
    monkeypatch.setenv("TORCHCONFORM_PERF_VARIANTS", "eager,inductor")
    with pytest.raises(UserError, match=r"TORCHCONFORM_PERF_VARIANTS='eager,inductor' names no perf variant "
                                        r"\(inductor\); set it to a comma-separated list of eager, compiled "
                                        r"\(default eager,compiled\)"):
        variants()


# -- the store: an old store's rows stay eager ---------------------------------------------------
def _store(store, build, rows):
    store.ensure_build(build, device="refdev", branch="main", profile="refdev")
    run = store.start_run(build, suite="perf")
    o = Outcome("suites/perf/test_perf.py::TestPerfREFDEV::test_perf_add_refdev_float32", "pass", suite="perf",
                op="add", dtype="float32", variant="perf", device="refdev")
    o.perf = rows
    store.add_outcomes(run, [o])
    store.finish_run(run, 0)


def test_a_0013_store_upgrades_with_its_rows_eager(tmp_path, cli):
    from alembic import command
    from sqlalchemy import text

    db = f"sqlite:///{tmp_path / 'old.db'}"
    with open_store(db) as store:
        _store(store, "old", [_row("add", 1e-3, 1e-3)])
    engine = make_engine(open_store(db, check_schema=False).url)
    with engine.begin() as conn:   # what a store written before 0014_perf_variant holds
        command.downgrade(migrate._config(conn), "0013_not_run")
        assert "variant" not in [c[1] for c in conn.execute(text("PRAGMA table_info(perf_results)"))]
    engine.dispose()
    code, out, err = cli("db", "upgrade", "--db", db)
    assert code == 0 and f"upgraded from 0013_not_run to {HEAD_REVISION}" in out, err
    with open_store(db) as store:
        (old,) = perf_db.build_rows(store, "old")
        assert (old["variant"], old["dev_min"]) == ("eager", 1e-3)
        _store(store, "new", [_row("add", 1e-3, 1e-3), _row("add", 5e-3, 1e-3, "compiled")])
        changes = perf_db.compare(store, "new", "old")
    assert [(c["variant"], c["verdict"]) for c in changes] == [("eager", "same")]   # compiled: nothing to compare


# -- end to end on refdev ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("perf-compiled")
    db = tmp / "store.db"
    proc = subprocess.run([*TC, "run", "--suite", "perf", "--device", "refdev", "--ops", OPS, "--build", "a",
                           "--db", str(db)], cwd=tmp, capture_output=True, text=True, timeout=900,
                          env=child_env(TORCHCONFORM_PERF_CALLS="2", TORCHCONFORM_PERF_VARIANTS="eager,compiled"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return str(db)


def test_compiled_rows_are_stored_with_device_and_cpu_timings(compiled_run):
    with open_store(compiled_run) as store:
        rows = perf_db.build_rows(store, "a")
        notes = {o.op + " " + o.variant: o.message for o in read_rows.iter_outcomes(store, "a")}
    compiled = [r for r in rows if r["variant"] == "compiled"]
    assert sorted(r["op"] for r in compiled) == sorted(OPS.split(","))
    assert {(r["op"], r["direction"]) for r in rows if r["variant"] == "eager"} == \
        {(op, d) for op in OPS.split(",") for d in ("forward", "backward")}
    for r in compiled:
        assert (r["direction"], r["dtype"], r["calls"]) == ("forward", "float32", 2)
        assert all(r[f] is not None and r[f] > 0 for f in perf.FIGURES), r
        assert r["dev_first"] >= r["dev_min"] and r["cpu_first"] >= r["cpu_min"]
        assert r["dev_min"] <= r["dev_median"] <= r["dev_max"] and r["cpu_min"] <= r["cpu_median"] <= r["cpu_max"]
    assert notes["add perf_compiled"].startswith("perf: compiled forward first device")
    # one graph per side; refdev's own backend compiles the device side, aot_eager the CPU side
    assert notes["add perf_compiled"].endswith("(backend=refdev cpu_backend=aot_eager graphs=2 graph_breaks=0)")


def test_the_comparison_and_the_command_keep_variants_apart(compiled_run, cli):
    with open_store(compiled_run) as store:
        rows = {(r["op"], r["direction"], r["variant"]): r for r in perf_db.build_rows(store, "a")}
        changes = perf_db.compare(store, "a", "a")
    assert {(c["op"], c["direction"], c["variant"]) for c in changes} == set(rows)
    for c in changes:   # each compared with its own variant's timing: the same row, change 1
        assert c["old_dev_min"] == rows[(c["op"], c["direction"], c["variant"])]["dev_min"] and c["change"] == 1.0
    code, out, err = cli("perf", "--db", compiled_run, "--build", "a", "--op", "add", "--csv")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("op,dtype,direction,variant,sample,calls,dev_first"), err
    assert sorted(line.split(",")[3] for line in lines[1:]) == ["compiled", "eager", "eager"]
    code, out, err = cli("perf", "--db", compiled_run, "--build", "a", "--json")
    assert sorted(r["variant"] for r in json.loads(out)["rows"]) == ["compiled"] * 2 + ["eager"] * 4
    code, out, err = cli("perf", "--db", compiled_run, "--build", "a")
    assert code == 0 and " compiled " in out


def test_the_site_shows_the_variant(compiled_run, cli, tmp_path):
    code, out, err = cli("site", "--db", compiled_run, "--out", tmp_path / "site")
    assert code == 0, err
    (page,) = (tmp_path / "site" / "builds").glob("*/perf.html")
    assert "compiled" in page.read_text()
    assert (page.parent / "perf.csv").read_text().startswith("op,dtype,direction,variant,")
    records = json.loads((page.parent / "perf.json").read_text())
    assert sorted(r["variant"] for r in records) == ["compiled"] * 2 + ["eager"] * 4
