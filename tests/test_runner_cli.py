"""`torchconform run`: the JSON contract, storing, JUnit, and one-line user errors."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import REPO, child_env  # noqa: E402

TC = [sys.executable, "-m", "torchconform"]


def tc(*args, cwd, env=None, timeout=900):
    return subprocess.run([*TC, *map(str, args)], cwd=cwd, env=env or child_env(), capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    db = tmp / "store.db"
    proc = tc("run", "--suite", "ops", "--device", "refdev", "--ops", "add,cdist,cumsum", "-k",
              "float32 and (compare_cpu_ or compile)", "-n", "1", "--build", "cli-build", "--db", db,
              "--junit", tmp / "run.xml", "--json", cwd=tmp)
    return tmp, db, proc


def test_run_json_contract(cli_run):
    tmp, _, proc = cli_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)  # stdout is only the JSON; progress went to stderr
    assert set(data) == {"build", "total", "outcomes", "pass_kinds", "backend_skip_kinds", "missing_ops", "fail_kinds",
                         "complete", "unfinished_runs",
                         "not_run",   # -k left tests out (core/not_run.py)
                         "tiers", "near_misses"}  # the comparisons' tolerance tiers (core/tiers.py)
    assert data["fail_kinds"] == {}   # no float64 test here: nothing a declared trait explains
    assert data["build"] == "cli-build"
    assert data["complete"] is True and data["unfinished_runs"] == []
    # add, cdist, cumsum x (compare_cpu, compare_cpu_grad, compile) in float32
    assert data["total"] == 9
    assert data["outcomes"]["pass"] >= 1 and data["outcomes"]["pass_fallback"] >= 1
    assert data["backend_skip_kinds"]["missing_op"] == data["outcomes"]["skip_backend"]
    from torchconform import refdev
    truth = refdev.describe("young-backend")
    assert {m["op"] for m in data["missing_ops"]} <= set(truth["missing"])
    if "aten::_cdist_forward" in truth["missing"]:
        assert data["missing_ops"][0] == {"op": "aten::_cdist_forward", "tests": 3}
    assert (tmp / ".torchconform" / "runs" / "cli-build.jsonl").exists()
    assert (tmp / "run.xml").read_text().count("<testcase") == 9


def test_compile_variant_notes_graphs(cli_run):
    tmp, _, _ = cli_run
    from torchconform.collectors.sink_jsonl import read_jsonl
    _, outcomes = read_jsonl(tmp / ".torchconform" / "runs" / "cli-build.jsonl")
    compiled = [o for o in outcomes if o.variant == "compile_compare_cpu" and o.op == "add"]
    assert compiled and compiled[0].outcome == "pass"
    # refdev's profile compiles with refdev's own backend (aot_eager underneath)
    assert compiled[0].message == "compiled: backend=refdev graphs=1 graph_breaks=0 recompiles=0"
    from torchconform.core.notes import parse_compile_note
    assert parse_compile_note(compiled[0].message)["graph_breaks"] == 0


def test_run_is_stored(cli_run):
    tmp, db, proc = cli_run
    stored = tc("summary", "--build", "cli-build", "--json", "--db", db, cwd=tmp, timeout=300)
    if stored.returncode != 0 and "invalid choice" in stored.stderr:
        pytest.skip("store commands not available in this tree")
    assert stored.returncode == 0, stored.stderr
    assert json.loads(stored.stdout) == json.loads(proc.stdout)


def test_human_breakdown_on_cpu(tmp_path):
    proc = tc("run", "--device", "cpu", "--ops", "add", "-k", "test_compare_cpu_add and float32", "-n", "0", "--no-db",
              cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "build cpu-cpu-" in proc.stdout and "1 outcomes" in proc.stdout
    assert "natively 1" in proc.stdout


@pytest.mark.parametrize("args, needle", [
    (["--suite", "nosuch"], "unknown suite 'nosuch'"),
    (["--device", "cpu", "--profile", "refdev"], "profile 'refdev' is for device 'refdev', not 'cpu'"),
    (["--profile", "missing-profile"], "backend profile 'missing-profile' not found"),
    (["--device", "neuron", "--ops", "add"], "device 'neuron': cannot import backend module"),
])
def test_user_errors_are_one_line(tmp_path, args, needle):
    proc = tc("run", "--no-db", *args, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, (proc.stdout, proc.stderr[-2000:])
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("torchconform: error: ") and needle in last
    assert proc.stderr.count(needle) == 1  # said once, even when pytest found it
    assert proc.stdout == ""


def test_a_bad_skiplist_is_one_line_before_anything_runs(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("backend: refdev\nentries:\n  - id: x\n    match: {op: [}\n")
    proc = tc("run", "--no-db", "--ops", "abs", "-n", "0", "--skiplist", bad, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"torchconform: error: {bad}:4: invalid YAML: expected the node "
                                                "content, but found '}'; fix the syntax"]


def test_a_reader_that_stops_reading_ends_the_command_quietly(cli_run):
    """`summary --json | head -1`: no BrokenPipeError traceback, the status of a SIGPIPE death."""
    import signal

    tmp, db, _ = cli_run
    proc = subprocess.Popen([*TC, "summary", "--build", "cli-build", "--json", "--db", str(db)], cwd=tmp,
                            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # the reader goes away before the command writes (its JSON, a few kB, would otherwise fit
    # the pipe's buffer whole if written before the close: no broken pipe to see)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 128 + signal.SIGPIPE
    assert err == ""
