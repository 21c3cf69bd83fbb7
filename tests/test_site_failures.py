"""Why a test failed: the message normaliser and failure clusters (torchconform/core/clusters.py), the
site's per-build failure data and clusters page, user categories, and the gate's clusters."""
import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "site"))
import site_files  # noqa: E402

from torchconform.ci.pipeline import gate_build
from torchconform.core.clusters import Failure, cluster, load_categories, order, signature
from torchconform.core.outcome import Outcome
from torchconform.dashboard import build_site
from torchconform.dashboard.render import read_data_file
from torchconform.db.opening import open_store
from torchconform.errors import UserError

CLOSE = "AssertionError: Tensor-likes are not close! Mismatched elements: {} / {} ({}%)"
LEAK = "torchconform memory leak: {} bytes still allocated at 0x{:x}"
XSS = '<img src=x onerror="alert(2)"> </script><script>alert(3)</script>'
REPRO = "/venv/bin/python -m pytest /src/{id} --tc-device refdev --tc-ops {op}"
FILE = "test/test_ops.py"


# -- the normaliser ------------------------------------------------------------------------------
@pytest.mark.parametrize("message, expected", [
    ("Mismatched elements: 17 / 100 (17.0%)", "Mismatched elements: <n> / <n> (<n>)"),
    ("diff 1.5e-05 at -3 allowed +0.25", "diff <n> at <n> allowed <n>"),
    ("leak at 0x7f3a2b1c00 of 4096 bytes", "leak at <addr> of <n> bytes"),
    ("got [3, 4] and [1,2,3,]", "got [<shape>] and [<shape>]"),
    ("index (3, 4) and (7,)", "index (<shape>) and (<shape>)"),
    ("expected torch.Size([2, 3, 5]) got torch.Size([])", "expected torch.Size([<shape>]) got torch.Size([<shape>])"),
    ("Could not run 'aten::add.out' from \"PrivateUse1\"", "Could not run '<name>' from \"<name>\""),
    ("dtype 'float32' vs torch.bfloat16 and int64 on cuda:0", "dtype 'float32' vs torch.bfloat16 and int64 on cuda:<n>"),
    ("doesn't work, can't", "doesn't work, can't"),
    ("first line 12\nsecond line 99", "first line <n>"),
    ("", "(no message)"),
])
def test_signature_takes_out_what_varies_per_test(message, expected):
    assert signature(message) == expected


def test_signature_takes_out_the_tests_own_name_and_qualified_op_but_not_words():
    name = "test_forward_addmm_refdev_float32"
    assert signature(f"{name} failed in torch.addmm and aten::addmm.out", name, "addmm") == \
        "<test> failed in torch.<op> and aten::<op>.out"
    # an op that is a plain word is left alone where it is one
    assert signature("mismatch at index 3", "test_index", "index") == "mismatch at index <n>"


# -- clusters ------------------------------------------------------------------------------------
def _f(i, message, op="add", dtype="float32", outcome="fail"):
    return Failure(f"t::test_{op}_{dtype}_{i}", outcome, message, f"pytest t::test_{i}", f"test_{op}_{i}", op, dtype)


def test_messages_differing_only_in_numbers_are_one_cluster():
    found = cluster([_f(1, CLOSE.format(3, 100, 3.0), "add", "float32"),
                     _f(2, CLOSE.format(41, 64, 64.1), "mul", "float16"),
                     _f(3, LEAK.format(4096, 0x7F00AA), "add", "float32", "error")])
    assert [(c.signature, c.tests) for c in found] == [
        ("AssertionError: Tensor-likes are not close! Mismatched elements: <n> / <n> (<n>)", 2),
        ("torchconform memory leak: <n> bytes still allocated at <addr>", 1)]
    close = found[0]
    assert sorted(close.ops) == ["add", "mul"] and sorted(close.dtypes) == ["float16", "float32"]
    assert close.example.test_id == "t::test_add_float32_1" and close.example.repro == "pytest t::test_1"
    assert dict(found[1].outcomes) == {"error": 1}


def test_new_clusters_since_the_baseline_come_first():
    baseline = cluster([_f(1, CLOSE.format(1, 2, 50))])
    now = cluster([_f(1, CLOSE.format(1, 2, 50)), _f(2, CLOSE.format(3, 4, 75)), _f(3, CLOSE.format(5, 6, 83)),
                   _f(4, LEAK.format(8, 0xFF))])
    ordered = order(now, baseline)
    assert [(c.tests, c.new) for c in ordered] == [(1, True), (3, False)]
    assert "memory leak" in ordered[0].signature
    assert not any(c.new for c in order(now, None))   # no baseline: nothing is new


def test_user_categories_name_a_cluster_and_are_checked(tmp_path):
    path = tmp_path / "categories.yaml"
    path.write_text("categories:\n  - name: Numerics\n    message: 'not close'\n    outcomes: [fail]\n"
                    "  - name: Leaks\n    message: 'memory leak'\n", encoding="utf-8")
    cats = load_categories(path)
    found = cluster([_f(1, CLOSE.format(1, 2, 3)), _f(2, "different: not close"), _f(3, LEAK.format(1, 2), outcome="error"),
                     _f(4, "not close, but an error", outcome="error"), _f(5, "other")], cats)
    assert [(c.signature, c.category, c.tests) for c in found] == [
        ("Numerics", "Numerics", 2), ("Leaks", "Leaks", 1), ("not close, but an error", "", 1), ("other", "", 1)]
    for text, error in [("- name: x\n  message: '(['\n", "bad regex"), ("- message: x\n", "needs a name"),
                        ("- {name: x, message: y, outcomes: [pass]}\n", "outcomes must be"), ("a: [", "invalid YAML")]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(UserError, match=error):
            load_categories(path)
    with pytest.raises(UserError, match="no such file"):
        load_categories(tmp_path / "absent.yaml")


# -- the site ------------------------------------------------------------------------------------
def _op(op, dtype, outcome, message="", kind="", **extra):
    name = f"test_forward_{op}_refdev_{dtype}"
    tid = f"{FILE}::TestCommonREFDEV::{name}"
    return Outcome(tid, outcome, suite="ops", file=FILE, cls="TestCommonREFDEV", name=name, op=op, variant="forward",
                   dtype=dtype, kind=kind, message=message, repro=REPRO.format(id=tid, op=op), **extra)


def outcomes(version):
    """b1: two numerics failures (numbers differ); b2 adds a memory leak, a test named <script> and a skip."""
    out = [_op("add", "float32", "fail", CLOSE.format(3, 100, 3.0)),
           _op("mul", "float16", "fail", CLOSE.format(41, 64, 64.1)),
           _op("sub", "float32", "pass")]
    if version > 1:
        out += [_op("div", "float32", "error", LEAK.format(4096, 0x7F3A2B)),
                _op("pow", "float64", "skip_backend", "NotImplementedError: aten::pow.out", kind="missing_op",
                    missing_op="aten::pow.out"),
                Outcome(f"{FILE}::TestXSS::<script>alert(1)</script>", "crash", suite="ops", file=FILE,
                        name="<script>alert(1)</script>", op="xss", message=XSS, repro="run </script> here")]
    return out


def write(store):
    for version in (1, 2):
        name = f"b{version}"
        store.ensure_build(name, branch="main", device="refdev")
        run = store.start_run(name, suite="ops", selection="t")
        store.add_outcomes(run, outcomes(version))
        store.finish_run(run, 0)
        time.sleep(0.01)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("failures")
    categories = root / "categories.yaml"
    categories.write_text("- name: Memory leaks\n  message: 'memory leak'\n", encoding="utf-8")
    with open_store(str(root / "s.db")) as store:
        write(store)
        build_site(store, root / "out")
        build_site(store, root / "cats", categories=categories)
    return root


def _rows(folder):
    """A build's failure data as {test id: (label, message, repro, op, cluster)}, each repro joined."""
    return site_files.failure_rows(folder.parents[2], folder.name)


def test_failure_data_has_every_failure_and_skip_with_message_and_repro(site):
    folder = site / "out/data/failures/b2"
    raw = "".join(f.read_text(encoding="utf-8") for f in folder.iterdir())
    # nothing from a test closes the script element it is loaded by
    assert "</script>" not in raw and "<\\/script>" in raw
    # the rows name no test: the ids travel once, in data/tests.js
    assert "test_forward_add_refdev_float32" not in raw
    rows = _rows(folder)
    by_op = {r[3]: (tid, *r[:3]) for tid, r in rows.items()}
    assert set(by_op) == {"add", "mul", "div", "pow", "xss"}          # the pass is not there
    tid, label, message, repro = by_op["div"]
    assert (label, message) == ("error", LEAK.format(4096, 0x7F3A2B))
    assert repro == REPRO.format(id=tid, op="div")                    # the stored command, from its template
    assert by_op["pow"][1:3] == ("skip_backend/missing_op", "NotImplementedError: aten::pow.out")
    assert by_op["xss"][1:] == ("crash", XSS, "run </script> here")   # a command of its own, whole
    # the two numerics failures share a cluster; a skip is in none
    assert rows[by_op["add"][0]][4] == rows[by_op["mul"][0]][4] >= 0 and rows[by_op["pow"][0]][4] == -1


def test_build_page_loads_the_failure_data_and_links_the_clusters(site):
    html = (site / "out/builds/b2/index.html").read_text(encoding="utf-8")
    assert 'href="clusters.html"' in html and "static/failures.js" in html
    assert '"root":"../../","slug":"b2"' in html
    assert "Tensor-likes" not in html          # messages load lazily, not with the page
    assert "4 failed, errored, crashed or timed-out tests in" in html and "1 skipped by the backend" in html
    home = (site / "out/index.html").read_text(encoding="utf-8")
    assert "Tensor-likes" not in home and "failures/" not in home


def test_clusters_page_groups_escapes_and_puts_new_ones_first(site):
    html = (site / "out/builds/b2/clusters.html").read_text(encoding="utf-8")
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    records = json.loads((site / "out/builds/b2/clusters.json").read_text(encoding="utf-8"))
    assert [(r["new since baseline"], r["tests"]) for r in records] == [(True, 1), (True, 1), (False, 2)]
    numerics = records[2]
    assert numerics["signature"] == "AssertionError: Tensor-likes are not close! Mismatched elements: <n> / <n> (<n>)"
    assert numerics["operators"] == ["add", "mul"] and numerics["dtypes"] == ["float16", "float32"]
    assert numerics["first build seen"] == "b1" and numerics["fail"] == 2
    assert numerics["example repro"] == REPRO.format(id=numerics["example test"], op="add")
    # the page shows the example's repro command and links the cluster's tests on the build page
    assert f"<code>{REPRO.format(id=numerics['example test'], op='add')}</code>" in html
    assert f'href="index.html#cluster={numerics["cluster"]}"' in html
    assert html.index("memory leak") < html.index("Tensor-likes")
    first = json.loads((site / "out/builds/b1/clusters.json").read_text(encoding="utf-8"))
    assert [r["new since baseline"] for r in first] == [False]          # no baseline: nothing new


def test_a_user_category_names_its_cluster(site):
    records = json.loads((site / "cats/builds/b2/clusters.json").read_text(encoding="utf-8"))
    leak = next(r for r in records if r["category"])
    assert (leak["signature"], leak["category"], leak["tests"]) == ("Memory leaks", "Memory leaks", 1)
    assert "Memory leaks" in (site / "cats/builds/b2/clusters.html").read_text(encoding="utf-8")


def test_a_kept_build_gives_its_clusters_back(site, tmp_path):
    out = tmp_path / "again"
    with open_store(str(site / "s.db")) as store:
        build_site(store, out)
        before = {p: p.read_bytes() for p in (out / "builds").rglob("clusters.*")}
        build_site(store, out)      # every build kept: the clusters come from their downloads
    assert {p: p.read_bytes() for p in (out / "builds").rglob("clusters.*")} == before


@pytest.mark.parametrize("command", ["site", "gate"])
def test_cli_takes_categories_and_refuses_a_bad_file(site, tmp_path, command):
    import subprocess

    bad = tmp_path / "bad.yaml"
    bad.write_text("- name: x\n  message: '(['\n", encoding="utf-8")
    args = ["--out", str(tmp_path / "o")] if command == "site" else ["--build", "b2", "--baseline", "b1"]
    run = subprocess.run([sys.executable, "-m", "torchconform", command, "--db", str(site / "s.db"), *args,
                          "--categories", str(bad)], capture_output=True, text=True)
    assert run.returncode == 2 and "bad regex" in run.stderr
    if command == "gate":   # a good file names the summary's cluster
        good = tmp_path / "good.yaml"
        good.write_text("- {name: Leaks, message: memory leak}\n", encoding="utf-8")
        summary = tmp_path / "summary.md"
        run = subprocess.run([sys.executable, "-m", "torchconform", "gate", "--db", str(site / "s.db"), *args,
                              "--reruns", "0", "--summary", str(summary), "--categories", str(good)],
                             capture_output=True, text=True)
        assert run.returncode in (0, 1), run.stderr
        assert "| **new** | **Leaks** | 1 (error 1) |" in summary.read_text(encoding="utf-8")


# -- the gate ------------------------------------------------------------------------------------
def test_gate_summary_lists_new_clusters_first_with_a_repro(tmp_path):
    with open_store(str(tmp_path / "g.db")) as store:
        write(store)
        run = gate_build(store, "b2", baseline="b1", reruns=0)
    text = run.markdown
    assert "## Failure clusters (3, 2 new since the baseline)" in text
    section = text[text.index("## Failure clusters"):]
    lines = [line for line in section.splitlines() if line.startswith("| **new**") or line.startswith("|  |")]
    assert len(lines) == 3 and lines[-1].startswith("|  |") and "Tensor-likes" in lines[-1]
    assert all(line.startswith("| **new**") for line in lines[:2])
    add = f"{FILE}::TestCommonREFDEV::test_forward_add_refdev_float32"
    assert f"`{REPRO.format(id=add, op='add')}`" in lines[-1] and "`add`, `mul`" in lines[-1]


def test_failure_data_in_chunks_keeps_every_row(site, tmp_path, monkeypatch):
    from torchconform.dashboard import failures

    monkeypatch.setattr(failures, "CHUNK", 2)
    with open_store(str(site / "s.db")) as store:
        build_site(store, tmp_path / "chunked")
    folder = tmp_path / "chunked/data/failures/b2"
    assert sorted(f.name for f in folder.iterdir()) == ["0.js", "1.js", "2.js", "index.js"]
    assert read_data_file(folder / "index.js")["chunks"] == 3
    assert _rows(folder) == _rows(site / "out/data/failures/b2")      # the same rows, however cut
