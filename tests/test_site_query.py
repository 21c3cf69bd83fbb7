"""The search page's query language (static/query.js, run under node), the test attributes
it reads (data/attrs.js, pages/search.py) and the missing-operator leaderboard chart.

The browser tests (tests/test_site_browser.py) run the same queries on the fixture site;
these check the parser's trees and errors, and the Python side's data, without a browser."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "site"))
import site_data  # noqa: E402
import site_files  # noqa: E402

from torchconform.dashboard import build_site, charts  # noqa: E402
from torchconform.dashboard.pages import search  # noqa: E402
from torchconform.dashboard.styles import CODE_LABELS  # noqa: E402

QUERY_JS = Path(search.__file__).parent.parent / "static" / "query.js"
NODE = shutil.which("node")


def run_js(script: str):
    """Run ``script`` under node with ``q`` = static/query.js; returns what it printed as JSON."""
    if NODE is None:
        pytest.skip("node is not installed")
    prelude = f"const q = require({json.dumps(str(QUERY_JS))});\n"
    out = subprocess.run([NODE, "-e", prelude + script], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def parse(query: str):
    return run_js(f"""
let got;
try {{ got = q.parse({json.dumps(query)}); }} catch (e) {{ got = {{error: e.message, ours: e instanceof q.QueryError}}; }}
console.log(JSON.stringify(got));""")


def term(field, value):
    return {"type": "term", "field": field, "value": value}


def test_or_binds_looser_than_and():
    assert parse("op:add outcome:fail OR op:mul") == {"type": "or", "items": [
        {"type": "and", "items": [term("op", "add"), term("outcome", "fail")]}, term("op", "mul")]}
    # AND is the default and may be written; parentheses group
    assert parse("a AND (b or c)") == {"type": "and", "items": [
        term("", "a"), {"type": "or", "items": [term("", "b"), term("", "c")]}]}


def test_negation_quotes_and_test_ids():
    assert parse('-outcome:pass NOT msg:"not close"') == {"type": "and", "items": [
        {"type": "not", "item": term("outcome", "pass")}, {"type": "not", "item": term("msg", "not close")}]}
    # a quoted keyword is a word; a test id with :: is a free word, not a field
    assert parse('"or" suites/ops/test_ops.py::TestX') == {"type": "and", "items": [
        term("", "or"), term("", "suites/ops/test_ops.py::TestX")]}
    assert parse("OP:Add") == term("op", "Add")     # field names in any case; the value as typed
    assert parse("   ") is None


@pytest.mark.parametrize("query, message", [
    ("a OR", "OR needs a term on each side."),
    ("AND a", "AND needs a term on each side."),
    ("op:", "'op:' needs a value"),
    ("colour:red", "Unknown field 'colour:'"),
    ('"abc', "A quote is not closed"),
    ("(a", "A '(' is not closed."),
    ("a)", "A ')' has no '(' before it."),
    ("- a", "A '-' must be followed"),
    ("a NOT", "NOT must be followed"),
])
def test_malformed_queries_raise_one_query_error(query, message):
    got = parse(query)
    assert got["ours"] is True and message in got["error"]


def evaluate(query: str, outcomes=None) -> list:
    """The indices of a small table of tests a query matches (its build: picks codes)."""
    env = {"builds": [{"slug": "b1", "name": "B1"}, {"slug": "b2", "name": "b2"}],
           "outcomes": outcomes or {"pass": "PH", "fail": "F", "failed": "FECT", "missing_op": "M"}}
    return run_js(f"""
const env = {json.dumps(env)};
const ids = ["t::add_f32", "t::add_f64", "t::addmm_f32", "t::mul_f32"];
const codes = {{b1: "PFMC", b2: "PPPP"}};
const columns = {{op: {{values: ["add", "addmm", "mul"], numbers: Int32Array.from([1, 1, 2, 3])}},
                 dtype: {{values: ["float32", "float64"], numbers: Int32Array.from([1, 2, 1, 0])}}}};
let got;
try {{
  const info = q.analyse(q.parse({json.dumps(query)}), env);
  const test = q.compile(info.tree, env, {{ids: ids, lower: ids.map(s => s.toLowerCase()), codes: codes[info.build || "b1"],
                                        columns: columns, messages: {{"t::addmm_f32": "notimplementederror: addmm"}}}});
  got = {{build: info.build, hits: ids.map((_, i) => i).filter(test)}};
}} catch (e) {{ got = {{error: e.message}}; }}
console.log(JSON.stringify(got));""")


def test_compiled_queries_match_the_right_tests():
    assert evaluate("op:add")["hits"] == [0, 1]                    # exact: not addmm
    assert evaluate("op:add*")["hits"] == [0, 1, 2]                # the wildcard
    assert evaluate("op:ADD -dtype:float64")["hits"] == [0]
    assert evaluate("outcome:failed")["hits"] == [1, 3]             # fail and crash
    assert evaluate("dtype:float32 outcome:failed")["hits"] == []
    assert evaluate("-dtype:float32 outcome:failed")["hits"] == [1, 3]
    assert evaluate("outcome:pass OR op:mul")["hits"] == [0, 3]
    assert evaluate("build:b1 not outcome:pass")["hits"] == [1, 2, 3]
    assert evaluate("build:B2 outcome:pass") == {"build": "b2", "hits": [0, 1, 2, 3]}   # by name or slug
    assert evaluate('msg:"addmm"')["hits"] == [2]
    assert evaluate("F64")["hits"] == [1]                           # free words: the test id, any case
    assert evaluate("dtype:complex128")["hits"] == []
    # build: is lifted out of the tree: here both ORed terms look at b1
    assert evaluate("build:b1 op:mul OR outcome:missing_op") == {"build": "b1", "hits": [2, 3]}
    assert "Unknown outcome 'passed'" in evaluate("outcome:passed")["error"]
    assert "No build named 'b9'" in evaluate("build:b9")["error"]
    assert "cannot follow NOT" in evaluate("-build:b1")["error"]


def test_decode_column_reads_what_python_writes():
    values = np.array([0, 1, 63, 64, 4095, 4096, 5000])
    width, text = search.encode_attrs(values, 5000)
    assert width == 3 and len(text) == 3 * len(values)
    assert search.decode_attrs(width, text).tolist() == values.tolist()
    got = run_js(f"console.log(JSON.stringify(Array.from(q.decodeColumn({json.dumps({'width': width, 'codes': text})}, "
                 f"{json.dumps(search.DIGITS)}))));")
    assert got == values.tolist()
    assert search.digits_width(63) == 1 and search.digits_width(64) == 2
    assert '"' not in search.DIGITS and "\\" not in search.DIGITS


def test_outcome_names_cover_every_code():
    names = search.outcome_names()
    assert set(names["failed"]) == set("FECT")
    assert set(names["skip_backend"]) == set("MLDNK")
    assert names["pass"] == "PH" and names["host_only"] == "H" and names["missing_op"] == "M"
    assert set(names["skipped"]) == set("SMLDNK")
    assert set().union(*map(set, names.values())) == set(CODE_LABELS)
    assert all(names.values())


# -- data/attrs.js on the fixture site -------------------------------------------------------------

def read_attrs(out: Path) -> dict:
    """test id -> {column: value} from a site's data/tests.js and data/attrs.js."""
    ids = site_files.ids_by_position(out)
    attrs = search.read_data_file(out / "data" / "attrs.js")
    assert attrs["n"] == len(ids) and attrs["digits"] == search.DIGITS
    got = {t: {} for t in ids}
    for c, col in attrs["columns"].items():
        values = [None, *col["values"]]
        assert col["values"] == sorted(col["values"])
        for t, k in zip(ids, search.decode_attrs(col["width"], col["codes"]).tolist()):
            got[t][c] = values[k]
    return got


def expected_attrs() -> dict:
    found = {}
    for o in site_data.outcomes_for(3):
        found[o.test_id] = {c: (getattr(o, c) or None) for c in search.ATTR_COLUMNS}
    return found


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory):
    return site_data.build_fixture_site(tmp_path_factory.mktemp("query-site"))


def test_attrs_are_aligned_with_the_test_index(fixture_site):
    got = read_attrs(fixture_site["out"])
    assert got == expected_attrs()
    assert got[site_data.XSS_TEST]["op"] == "xss<b>op</b>" and got[site_data.FORMULA_TEST]["op"] is None
    assert "</" not in (fixture_site["out"] / "data" / "attrs.js").read_text()   # the script stays closed


def add_build(store, name: str, commit: str, outcomes) -> None:
    """A complete ops build of ``outcomes`` on main/refdev, stored after the fixture's."""
    store.ensure_build(name, branch="main", device="refdev", backend="refdev", profile="young-backend",
                       torch_version="2.13.0", commit=commit)
    run = store.start_run(name, suite="ops", selection="fixture", host="test")
    store.add_outcomes(run, outcomes)
    store.finish_run(run, 0)


def test_attrs_survive_reuse_and_a_new_build(fixture_site, tmp_path):
    from torchconform.db.opening import open_store

    out = tmp_path / "out"
    shutil.copytree(fixture_site["out"], out)
    db = tmp_path / "store.db"
    shutil.copy(fixture_site["db"], db)
    before = (out / "data" / "attrs.js").read_bytes()
    with open_store(str(db)) as store:
        build_site(store, out)                       # warm: every build kept, read back from the files
        assert (out / "data" / "attrs.js").read_bytes() == before
        new = site_data._op("tanh", "forward", "bfloat16", "pass")
        add_build(store, "b4", "0000004", [new])
        build_site(store, out)                       # nightly: b1..other-1 kept, b4 new
    got = read_attrs(out)
    assert got == {**expected_attrs(), new.test_id: {"suite": "ops", "file": "suites/ops/test_ops.py", "op": "tanh",
                                                     "variant": "forward", "dtype": "bfloat16"}}


def test_the_test_index_is_rewritten_only_when_its_numbering_changes(fixture_site, tmp_path):
    from torchconform.dashboard import positions
    from torchconform.db.opening import open_store

    out = tmp_path / "out"
    shutil.copytree(fixture_site["out"], out)
    db = tmp_path / "store.db"
    shutil.copy(fixture_site["db"], db)
    index = out / "data" / "tests.js"
    ids = positions.read_ids(out)
    with open_store(str(db)) as store:
        # a nightly build of tests the site numbers already: the file is left as it is
        add_build(store, "b5", "0000005", site_data.outcomes_for(3))
        index.write_text(index.read_text(encoding="utf-8") + "// untouched\n", encoding="utf-8")
        shown_before = positions.shown_of(search.read_data_file(index))
        build_site(store, out)
        assert index.read_text(encoding="utf-8").endswith("// untouched\n")
        assert positions.read_ids(out) == ids and (positions.shown_of(search.read_data_file(index)) == shown_before).all()
        # a build with a test no build had: numbered next, the file written again
        new = site_data._op("sinh", "forward", "float16", "pass")
        add_build(store, "b6", "0000006", [new])
        build_site(store, out)
    assert not index.read_text(encoding="utf-8").endswith("// untouched\n")
    assert positions.read_ids(out) == ids + [new.test_id]


def test_a_site_without_its_test_index_renders_every_build_again(fixture_site, tmp_path):
    from torchconform.dashboard import positions

    out = tmp_path / "out"
    shutil.copytree(fixture_site["out"], out)
    assert positions.read_ids(fixture_site["out"]) == site_files.ids_by_position(fixture_site["out"])
    (out / "data" / "tests.js").unlink()
    assert positions.read_ids(out) is None      # no numbering to keep: build_site keeps no full build
    # one from before positions (no format) neither
    (out / "data" / "tests.js").write_text('TC.loaded("tests",{"n":1,"groups":[["a::",["b"]]]});\n')
    assert positions.read_ids(out) is None


# -- the leaderboard chart ---------------------------------------------------------------------------

def board(n, models=lambda i: 0):
    return [{"op": f"aten::op{i}", "tests": 100 - i, "models": models(i)} for i in range(n)]


def test_leaderboard_chart_shows_the_top_by_tests_or_by_models():
    rows = board(15, models=lambda i: 9 if i == 13 else 0)      # op13: few tests, most models
    svg = str(charts.leaderboard_chart(rows, top=3))
    labels = [r["op"] for r in rows if f">{r['op']}</text>" in svg]
    assert labels == ["aten::op0", "aten::op1", "aten::op2", "aten::op13"]
    assert svg.count('class="bar-tests"') == 4 and svg.count('class="bar-models"') == 1
    assert "aten::op13: 9 models blocked" in svg and "aten::op0: 100 tests blocked" in svg
    # each panel is scaled to its own largest count: op0's bar is the panel's width
    assert 'width="305.0" height="16" fill="url(#p-missing_op)" stroke="#444" stroke-width=".5">' \
           '<title>aten::op0: 100 tests blocked' in svg


def test_leaderboard_chart_escapes_names_and_is_empty_without_rows():
    svg = str(charts.leaderboard_chart([{"op": '<script>alert("x")</script>' + "y" * 40, "tests": 2, "models": 1}]))
    assert "<script>" not in svg and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in svg
    assert "\u2026</text>" in svg        # a long name is shortened on the axis, whole in its <title>
    assert charts.leaderboard_chart([]) == "" and charts.leaderboard_chart([{"op": "a", "tests": 0, "models": 0}]) == ""


def test_missing_pages_carry_the_chart(fixture_site):
    page = (fixture_site["out"] / "missing.html").read_text()
    assert page.count('<svg class="leaders"') == 2       # one per branch and device
    assert "aten::cumsum.out: 3 tests blocked" in page
    assert '<svg class="leaders"' in (fixture_site["out"] / "builds" / "b3" / "missing.html").read_text()
