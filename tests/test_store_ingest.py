"""JUnit ingest, export and the store CLI (ingest, export, summary, builds)."""
import csv
import json
import os
import subprocess
import sys

import pytest

from pg import db_url, pg_server, store  # noqa: F401  (fixtures)
from torchconform.core.breakdown import breakdown
from torchconform.core.outcome import Outcome
from torchconform.db.junit.write import write_junit
from torchconform.db import counts, read_builds, read_rows
from torchconform.db.ingest import ingest
from torchconform.db.opening import open_store
from torchconform.errors import UserError

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "fixtures", "store", "sample_suite.py")
TC = [sys.executable, "-m", "torchconform"]


def cli(*args):
    """The real console script, in a subprocess: exit code and streams as a user sees them."""
    return subprocess.run([*TC, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def tc(capsys):
    """The CLI in-process (same parser and error handling as the console script, without
    a Python start-up per call): returns (exit code, stdout, stderr)."""
    from torchconform.cli.main import main

    def run(*args):
        code = main(list(args))
        captured = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, captured.out, captured.err)

    return run


def runner_outcomes():
    """Outcomes as the runner records them (file, class and name always set)."""
    mop = dict(outcome="skip_backend", kind="missing_op")
    outcomes = [
        Outcome("test/test_ops.py::TestCommonREFDEV::test_add_f32", "pass", suite="ops", file="test/test_ops.py",
                cls="TestCommonREFDEV", name="test_add_f32", op="add", variant="forward", dtype="float32",
                device="refdev:0", duration=0.5, repro="torchconform run -k test_add_f32"),
        Outcome("test/test_ops.py::TestCommonREFDEV::test_cat", missing_op="aten::cat.out", op="cat", suite="ops",
                file="test/test_ops.py", message="Could not run 'aten::cat.out'", **mop),
        Outcome("test/test_ops.py::TestCommonREFDEV::test_mm", "pass_fallback", fallback_ops=["aten::mm", "aten::addmm"],
                suite="ops", file="test/test_ops.py"),
        Outcome("test/test_ops.py::TestCommonREFDEV::test_div", "fail", message="AssertionError: <b>&\"x\"",
                suite="ops", file="test/test_ops.py"),
        Outcome("test/test_ops.py::TestCommonREFDEV::test_sk", "skip_backend", kind="skiplist",
                skiplist_entry="refdev-3", suite="ops", file="test/test_ops.py"),
        Outcome("test/test_ops.py::TestCommonREFDEV::test_crash", "crash", suite="ops", file="test/test_ops.py"),
        Outcome("test/test_ops.py::TestCommonREFDEV::test_x", "xfail", suite="ops", file="test/test_ops.py"),
    ]
    for o in outcomes:
        o.cls, o.name = o.test_id.split("::")[1:]
    return outcomes


@pytest.fixture(scope="module")
def pytest_junit(tmp_path_factory):
    """JUnit XML written by a real pytest run of the sample suite (no torchconform plugin)."""
    out = tmp_path_factory.mktemp("junit") / "sample.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:torchconform",
                    "-o", "junit_logging=system-err", f"--junitxml={out}", SAMPLE],
                   capture_output=True, text=True, timeout=120, cwd=str(out.parent))
    assert out.exists()
    return str(out)


def test_foreign_pytest_junit_is_classified_by_the_one_classifier(store, pytest_junit):
    result = ingest(store, [pytest_junit], "pytest-run")
    assert result["outcomes"] == 11
    got = {o.name: o for o in read_rows.iter_outcomes(store, "pytest-run")}
    kinds = {name: (o.outcome, o.kind) for name, o in got.items()}
    assert kinds == {
        "test_passes": ("pass", ""),
        "test_passes_through_fallback": ("pass_fallback", ""),
        "test_fails": ("fail", ""),
        "test_missing_operator": ("skip_backend", "missing_op"),
        "test_eligibility_skip": ("skip_eligibility", ""),
        "test_skiplisted": ("skip_backend", "skiplist"),
        "test_expected_failure": ("xfail", ""),
        "test_unexpected_pass": ("xpass", ""),
        "test_setup_error": ("error", ""),
        "test_param[float32]": ("pass", ""),
        "test_param[<script>]": ("pass", ""),
    }
    assert got["test_missing_operator"].missing_op == "aten::_foreach_add.List"
    assert got["test_passes_through_fallback"].fallback_ops == ["aten::cumsum.out"]
    assert got["test_skiplisted"].skiplist_entry == "refdev-numerics-7"
    assert got["test_fails"].message.startswith("assert [1, 2] == [1, 3]")
    assert got["test_passes"].test_id.endswith("sample_suite::test_passes")
    assert read_builds.summary(store, "pytest-run")["missing_ops"] == [{"op": "aten::_foreach_add.List", "tests": 1}]


def test_runner_junit_properties_are_taken_as_they_are(store, tmp_path):
    outcomes = runner_outcomes()
    path = tmp_path / "run.xml"
    write_junit(str(path), {"build": "b", "suite": "ops", "device": "refdev", "profile": "young-backend",
                            "torch_version": "2.13.0"}, outcomes)
    ingest(store, [str(path)], "runner")
    back = sorted(read_rows.iter_outcomes(store, "runner"), key=lambda o: o.test_id)
    want = sorted(outcomes, key=lambda o: o.test_id)
    # JUnit keeps durations to the millisecond; everything else must survive exactly.
    assert [(o.to_dict() | {"duration": round(o.duration, 3)}) for o in back] == [o.to_dict() for o in want]
    build = read_builds.list_builds(store)[0]
    assert (build["torch_version"], build["device"], build["profile"]) == ("2.13.0", "refdev", "young-backend")


@pytest.mark.parametrize("fmt", ["junit", "json", "csv"])
def test_export_formats_round_trip(store, tmp_path, fmt):
    outcomes = runner_outcomes()
    store.ensure_build("src", branch="main")
    run = store.start_run("src")
    store.add_outcomes(run, outcomes)
    store.finish_run(run, 0)
    from torchconform.db.export import export

    path = tmp_path / f"out.{fmt}"
    with open(path, "w", encoding="utf-8", newline="") as f:
        assert export(store, "src", fmt, f) == len(outcomes)
    want = sorted(outcomes, key=lambda o: o.test_id)
    if fmt == "junit":
        ingest(store, [str(path)], "copy")
        back = list(read_rows.iter_outcomes(store, "copy"))
        assert [o.to_dict() for o in back] == [o.to_dict() for o in want]
        assert read_builds.summary(store, "copy") == breakdown("copy", outcomes)
    elif fmt == "json":
        data = json.loads(path.read_text())
        assert data["build"]["name"] == "src" and data["build"]["branch"] == "main"
        assert [Outcome.from_dict(d) for d in data["outcomes"]] == want
    else:
        rows = list(csv.DictReader(open(path, newline="", encoding="utf-8")))
        assert [r["test_id"] for r in rows] == [o.test_id for o in want]
        mm = next(r for r in rows if r["test_id"].endswith("test_mm"))
        assert mm["fallback_ops"] == "aten::mm aten::addmm" and mm["outcome"] == "pass_fallback"


def test_truncated_xml_names_file_and_line_and_stores_nothing(store, tmp_path):
    good = tmp_path / "good.xml"
    write_junit(str(good), {"suite": "ops"}, runner_outcomes())
    bad = tmp_path / "bad.xml"
    text = good.read_text()
    bad.write_text(text[: len(text) * 2 // 3])
    with pytest.raises(UserError, match=r"bad\.xml:\d+: malformed or truncated XML") as info:
        # The good file comes first: its outcomes must be rolled back with the rest.
        ingest(store, [str(good), str(bad)], "partial")
    line = int(str(info.value).split("bad.xml:")[1].split(":")[0])
    assert line > 1
    assert read_builds.list_builds(store) == []
    # The same store object is still usable: nothing of the rolled-back ingest lingers.
    ingest(store, [str(good)], "partial")
    assert read_builds.summary(store, "partial") == breakdown("partial", runner_outcomes())


def test_not_junit_and_missing_files(store, tmp_path):
    other = tmp_path / "pom.xml"
    other.write_text("<project><artifactId>x</artifactId></project>")
    with pytest.raises(UserError, match="not a JUnit XML report"):
        ingest(store, [str(other)], "x")
    with pytest.raises(UserError, match="no such file"):
        ingest(store, [str(tmp_path / "nope.xml")], "x")
    assert read_builds.list_builds(store) == []


def test_cli_ingest_summary_builds_export(tmp_path, pytest_junit, tc):
    db = str(tmp_path / "cli.db")
    r = tc("ingest", pytest_junit, "--build", "b1", "--suite", "sample", "--db", db)
    assert r.returncode == 0, r.stderr
    assert "ingested 11 outcomes" in r.stdout
    # Same name again without --append: refused, nothing added.
    again = tc("ingest", pytest_junit, "--build", "b1", "--db", db)
    assert again.returncode == 2 and "already exists" in again.stderr and again.stderr.count("\n") == 1
    summ = tc("summary", "--build", "b1", "--json", "--db", db)
    data = json.loads(summ.stdout)
    assert data["total"] == 11 and data["outcomes"]["skip_backend"] == 2
    with open_store(db) as store:
        assert data == read_builds.summary(store, "b1")
        assert list(counts.summary_by(store, "b1", "suite")) == ["sample"]
    text = tc("summary", "--build", "b1", "--db", db).stdout
    assert "build b1: 11 outcomes" in text and "aten::_foreach_add.List" in text
    appended = tc("ingest", pytest_junit, "--build", "b1", "--append", "--db", db)
    assert appended.returncode == 0
    builds = json.loads(tc("builds", "--json", "--db", db).stdout)
    assert [(b["name"], b["runs"], b["results"]) for b in builds] == [("b1", 2, 22)]
    assert "b1" in tc("builds", "--db", db).stdout
    out = tmp_path / "b1.csv"
    exp = tc("export", "--build", "b1", "--format", "csv", "--out", str(out), "--db", db)
    assert exp.returncode == 0 and len(out.read_text().splitlines()) == 12
    unknown = tc("export", "--build", "nope", "--format", "json", "--out", str(tmp_path / "n.json"), "--db", db)
    assert unknown.returncode == 2 and "unknown build 'nope'" in unknown.stderr
    assert not (tmp_path / "n.json").exists()
    bad = tc("summary", "--build", "nope", "--db", db)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_cli_bad_xml_exit_2(tmp_path):
    db = str(tmp_path / "cli.db")
    bad = tmp_path / "trunc.xml"
    bad.write_text('<?xml version="1.0"?>\n<testsuites>\n<testsuite name="x">\n<testcase name="a"')
    r = cli("ingest", str(bad), "--build", "b1", "--db", db)
    assert r.returncode == 2
    assert "trunc.xml:4: malformed or truncated XML" in r.stderr and r.stderr.count("\n") == 1
    with open_store(db) as store:
        assert read_builds.list_builds(store) == []


def test_unittest_xml_report_like_pytorch_ci(tmp_path):
    """Several suites per file, unittest-xml-reporting's skip/xfail/unexpected-success spellings."""
    path = os.path.join(HERE, "fixtures", "store", "unittest_xml_report.xml")
    with open_store(str(tmp_path / "ci.db")) as store:
        ingest(store, [path], "pytorch-ci")
        outcomes_by_name = {o.name: o for o in read_rows.iter_outcomes(store, "pytorch-ci")}
        got = {name: (o.outcome, o.kind, o.missing_op) for name, o in outcomes_by_name.items()}
        by_suite = counts.summary_by(store, "pytorch-ci", "suite")
    assert got == {
        "test_add_privateuse1_float32": ("pass", "", ""),
        "test_pow_privateuse1_float32": ("skip_backend", "missing_op", "aten::pow.Tensor_Tensor_out"),
        "test_div_privateuse1_float16": ("fail", "", ""),
        "test_sub_privateuse1_complex64": ("skip_eligibility", "", ""),
        "test_sum_privateuse1_bfloat16": ("xfail", "", ""),
        "test_mean_privateuse1_float32": ("xpass", "", ""),
    }
    assert set(by_suite) == {"TestBinaryUfuncsPRIVATEUSE1-20260101000000", "TestReductionsPRIVATEUSE1-20260101000000"}
    assert outcomes_by_name["test_add_privateuse1_float32"].test_id == (
        "test_binary_ufuncs.py::TestBinaryUfuncsPRIVATEUSE1::test_add_privateuse1_float32")
    assert outcomes_by_name["test_add_privateuse1_float32"].cls == "TestBinaryUfuncsPRIVATEUSE1"
