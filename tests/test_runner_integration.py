"""The runner's integration seams: skiplists in every run, worker/controller
detection, build names, branch/commit, OpInfo recovery through wrappers, the
compile note, and `torchconform run`'s new options."""
import argparse
import datetime as dt
import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import FIXTURES, REPO, by_name, child_env, run_pytest  # noqa: E402

from torchconform.errors import UserError  # noqa: E402

SKIPLIST = FIXTURES / "runner-known.yaml"
SAMPLE = FIXTURES / "fx_skiplist.py"


# -- skiplists through the runner (no -p needed) --------------------------------------

def test_skiplist_entries_reach_outcomes_under_xdist(tmp_path):
    # No "-p torchconform.collectors.skiplist_plugin": the runner's plugin brings --tc-skiplist.
    proc, run, outcomes = run_pytest([SAMPLE, "--tc-device", "cpu", "--tc-skiplist", SKIPLIST, "-n", "2"], tmp_path)
    got = {name: (o.outcome, o.kind, o.skiplist_entry) for name, o in by_name(outcomes).items()}
    assert got == {
        # a passing test under an xfail entry is a stale expectation that still names its entry
        "test_listed_but_passes": ("xpass", "", "runner-known.yaml::stale-expectation"),
        "test_listed_and_fails": ("xfail", "", "runner-known.yaml::wrong-values"),
        "test_listed_skip": ("skip_backend", "skiplist", "runner-known.yaml::never-run"),
        "test_not_listed": ("pass", "", ""),
    }, proc.stdout[-3000:]


def test_skiplist_option_exists_and_runner_stays_inert_without_device(tmp_path):
    jsonl = tmp_path / "none.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-rX", "--rootdir", str(REPO),
         str(SAMPLE), "--tc-skiplist", str(SKIPLIST), "--tc-jsonl", str(jsonl)],
        cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300)
    # plain pytest: the skiplist plugin marks the items, nothing is recorded
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed, 1 skipped, 1 xfailed, 1 xpassed" in proc.stdout
    assert not jsonl.exists()


# -- a pytest started inside an xdist worker is a controller of its own ---------------

def test_pytest_inside_an_xdist_worker_still_records(tmp_path):
    db = tmp_path / "nested.db"
    env = child_env(PYTEST_XDIST_WORKER="gw1", PYTEST_XDIST_WORKER_COUNT="2")
    proc, run, outcomes = run_pytest(
        [SAMPLE, "-k", "not_listed", "--tc-device", "cpu", "--tc-build", "nested", "--tc-db", db,
         "--tc-branch", "feature/nested", "--tc-commit", "0123abcd"], tmp_path, env=env)
    assert [(o.outcome, o.test_id.split("::")[-1]) for o in outcomes] == [("pass", "test_not_listed")], \
        proc.stdout[-3000:]
    assert run["branch"] == "feature/nested" and run["commit"] == "0123abcd"
    from torchconform.db import read_builds
    from torchconform.db.opening import open_store

    store = open_store(f"sqlite:///{db}", create=False)
    try:
        info = read_builds.build_info(store, "nested")
        assert (info["branch"], info["commit"]) == ("feature/nested", "0123abcd")
        assert info["complete"] and info["runs"][0]["results"] == 1
    finally:
        store.close()


# -- default build names ---------------------------------------------------------------

def test_default_build_names_are_unique_within_a_second_and_sortable():
    from torchconform.collectors.settings import default_build_name

    t0 = dt.datetime(2026, 11, 30, 3, 4, 5, 10, tzinfo=dt.timezone.utc)
    a = default_build_name("refdev", "young-backend", t0)
    b = default_build_name("refdev", "young-backend", t0 + dt.timedelta(microseconds=990))
    c = default_build_name("refdev", "young-backend", t0 + dt.timedelta(seconds=1))
    assert re.fullmatch(r"refdev-young-backend-20261130T030405\.000010Z-\d{5}", a), a
    assert a != b and sorted([c, b, a]) == [a, b, c]
    names = {default_build_name("cpu", "cpu") for _ in range(200)}   # back to back in one process
    assert len(names) == 200


def test_two_cli_runs_in_one_second_keep_two_builds(tmp_path):
    # what "running the main job twice keeps both builds" needs: distinct default names
    code = "from torchconform.collectors.settings import default_build_name as d; print(d('cpu', 'cpu'))"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    names = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert names[0] != names[1] and all(n.startswith("cpu-cpu-") for n in names)


# -- branch and commit ------------------------------------------------------------------

def test_source_revision_precedence(tmp_path):
    from torchconform.collectors.settings import source_revision

    gh = {"GITHUB_HEAD_REF": "pr-branch", "GITHUB_REF_NAME": "123/merge", "GITHUB_SHA": "abc"}
    assert source_revision("given", "c0ffee", cwd=str(tmp_path), env=gh) == ("given", "c0ffee")
    assert source_revision(cwd=str(tmp_path), env=gh) == ("pr-branch", "abc")
    assert source_revision(cwd=str(tmp_path), env={"GITHUB_REF_NAME": "main", "GITHUB_SHA": "def"}) == ("main", "def")
    assert source_revision(cwd=str(tmp_path), env={}) == ("", "")          # not a checkout: quietly nothing


def test_source_revision_from_a_git_checkout(tmp_path):
    from torchconform.collectors.settings import source_revision

    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=trunk"]
    subprocess.run([*git, "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "f.txt").write_text("x")
    subprocess.run([*git, "-C", str(tmp_path), "add", "f.txt"], check=True)
    subprocess.run([*git, "-C", str(tmp_path), "commit", "-q", "-m", "one"], check=True)
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert source_revision(cwd=str(tmp_path), env={}) == ("trunk", head)
    subprocess.run(["git", "-C", str(tmp_path), "checkout", "-q", "--detach"], check=True)
    assert source_revision(cwd=str(tmp_path), env={}) == ("", head)       # detached: no branch name


# -- OpInfo name through wrappers -------------------------------------------------------

class _FakeOp:
    name = "linalg.norm"
    variant_test_name = "subgradients_at_zero"


def _instantiated(kwonly: bool):
    def test_compare_cpu(self, device, dtype, op):
        pass

    pk = {"op": _FakeOp(), "dtype": "torch.float64", "device": "refdev:0"}
    if kwonly:
        def instantiated_test(self, *, param_kwargs=pk):
            pass
    else:
        def instantiated_test(self, param_kwargs=pk):
            pass
    return functools.wraps(test_compare_cpu)(instantiated_test)


def _wrap(fn):
    @functools.wraps(fn)
    def outer(*args, **kwargs):
        return fn(*args, **kwargs)
    return outer


class _Holder:
    pass


@pytest.mark.parametrize("shape", ["bound", "wrapped-bound", "partial-of-bound", "kwonly-wrapped-bound"])
def test_op_is_recovered_through_wrapped_methods(shape):
    from types import SimpleNamespace

    from torchconform.collectors.testinfo import item_info

    fn = _instantiated(kwonly=shape.startswith("kwonly"))
    name = "test_compare_cpu_linalg_norm_subgradients_at_zero_refdev_float64"
    setattr(_Holder, name, fn)
    bound = getattr(_Holder(), name)
    obj = {"bound": bound, "wrapped-bound": _wrap(_wrap(bound)), "partial-of-bound": functools.partial(_wrap(bound)),
           "kwonly-wrapped-bound": _wrap(bound)}[shape]
    item = SimpleNamespace(nodeid=f"suites/ops/test_ops.py::TestCommonREFDEV::{name}", obj=obj)
    info = item_info(item, "refdev")
    assert (info["op"], info["variant"], info["dtype"], info["device"]) == \
        ("linalg.norm.subgradients_at_zero", "compare_cpu", "float64", "refdev:0")


# -- compile note -----------------------------------------------------------------------

def test_compile_note_round_trips():
    from torchconform.core.notes import compile_note, parse_compile_note

    text = compile_note("aot_eager", 2, 1, 3)
    assert text == "compiled: backend=aot_eager graphs=2 graph_breaks=1 recompiles=3"
    assert parse_compile_note(text) == {"backend": "aot_eager", "graphs": 2, "graph_breaks": 1, "recompiles": 3}
    assert parse_compile_note("AssertionError: graphs=1") is None and parse_compile_note("") is None


# -- torchconform run options -----------------------------------------------------------

def _run_args(*argv):
    from torchconform.cli import cmd_run

    parser = argparse.ArgumentParser()
    cmd_run.register(parser.add_subparsers())
    return cmd_run, parser.parse_args(["run", *argv])


def test_run_passes_skiplists_branch_and_commit():
    cmd_run, args = _run_args("--device", "cpu", "--skiplist", str(SKIPLIST), "--skiplist", str(SKIPLIST),
                              "--skiplist-audit", "--branch", "main", "--commit", "abc123")
    cmd = cmd_run.build_command(args, "b", "/tmp/x.jsonl", None)
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--tc-skiplist"] == [str(SKIPLIST.resolve())] * 2
    assert "--tc-skiplist-audit" in cmd
    assert cmd[cmd.index("--tc-branch") + 1] == "main" and cmd[cmd.index("--tc-commit") + 1] == "abc123"
    plain = cmd_run.build_command(_run_args("--device", "cpu")[1], "b", "/tmp/x.jsonl", None)
    assert not [a for a in plain if a.startswith(("--tc-skiplist", "--tc-branch", "--tc-commit"))]  # none by default


@pytest.mark.parametrize("argv, needle", [
    (["--skiplist", "no/such.yaml"], "--skiplist no/such.yaml: no such file"),
    (["--skiplist-audit"], "--skiplist-audit needs a skiplist"),
])
def test_run_skiplist_user_errors(argv, needle, monkeypatch):
    monkeypatch.delenv("TORCHCONFORM_SKIPLIST", raising=False)
    cmd_run, args = _run_args("--device", "cpu", *argv)
    with pytest.raises(UserError, match=re.escape(needle)):
        cmd_run.build_command(args, "b", "/tmp/x.jsonl", None)


def test_pytorch_src_reaches_the_suite_before_its_arguments(tmp_path, monkeypatch):
    # --pytorch-src must be in the environment when the upstream suite computes its pytest arguments.
    monkeypatch.setenv("TORCHCONFORM_PYTORCH_SRC", "/elsewhere")
    monkeypatch.setenv("TORCHCONFORM_UPSTREAM_FILES", "test_other")
    monkeypatch.chdir(tmp_path)
    cmd_run, args = _run_args("--suite", "upstream", "--device", "cpu", "--no-db",
                              "--pytorch-src", str(tmp_path / "src"), "--files", "test_ops")
    with pytest.raises(UserError) as err:
        cmd_run.run_command(args)
    assert str(tmp_path / "src") in str(err.value) and "/elsewhere" not in str(err.value)


def test_run_end_to_end_records_branch_and_commit(tmp_path):
    db = tmp_path / "cli.db"
    proc = subprocess.run(
        [sys.executable, "-m", "torchconform", "run", "--device", "cpu", "--suite", "ops", "--ops", "add",
         "-k", "test_compare_cpu_add and float32", "-n", "0", "--db", str(db), "--build", "cli-branch",
         "--branch", "release/9", "--commit", "feedbeef", "--json"],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["total"] == 1
    out = subprocess.run([sys.executable, "-m", "torchconform", "builds", "--json", "--db", str(db)],
                         cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    build = [b for b in json.loads(out.stdout) if b["name"] == "cli-branch"][0]
    assert (build["branch"], build["commit"]) == ("release/9", "feedbeef")
