"""The static site generator: pages, content, escaping, downloads, CLI contract (no browser)."""
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "site"))
import site_data  # noqa: E402
import site_files  # noqa: E402

from torchconform.dashboard import build_site, charts  # noqa: E402
from torchconform.dashboard.publish import github_pages, local  # noqa: E402
from torchconform.db import read_builds  # noqa: E402
from torchconform.dashboard.reads import READS  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402
from torchconform.errors import UserError  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return site_data.build_fixture_site(tmp_path_factory.mktemp("site"), base_url="https://example.org/cov/")


def read(built, rel):
    return (built["out"] / rel).read_text(encoding="utf-8")


def test_home_lists_latest_build_per_branch_with_breakdown(built):
    assert built["home"] == built["out"] / "index.html"
    html = read(built, "index.html")
    # the latest of main/refdev and the only build of release/2.13
    assert 'href="builds/b3/index.html"' in html and 'href="builds/other-1/index.html"' in html
    assert "branch release/2.13" in html
    with open_store(str(built["db"])) as store:
        b3 = read_builds.summary(store, "b3")
    # the summary the site shows is the store's summary of the build
    import json as _json
    manifest = _json.loads((built["out"] / ".torchconform-site").read_text())
    assert manifest["builds"]["b3"]["summary"] == b3
    # the legend states the real count of native passes of b3
    assert re.search(r"pass \(native\): <strong>{:,}</strong>".format(b3["outcomes"]["pass"]), html)
    assert "<svg class=\"trend\"" in html and "<svg class=\"bar\"" in html
    # absolute permalink because base_url was given
    assert "https://example.org/cov/index.html" in html


def test_build_page_has_breakdown_tables_and_links(built):
    html = read(built, "builds/b3/index.html")
    assert 'href="matrix.html"' in html and 'href="diff.html"' in html and 'href="missing.html"' in html
    assert "Diff against baseline b2" in html
    suites = json.loads(read(built, "builds/b3/suites.json"))
    assert {r["suite"] for r in suites} == {"ops", "models"}
    ops = next(r for r in suites if r["suite"] == "ops")
    assert ops["missing_op"] == 4  # cumsum x3 + the add regression
    # the first build of a branch has no baseline and no diff page
    assert not (built["out"] / "builds/b1/diff.html").exists()
    assert "no baseline" in read(built, "builds/b1/index.html")


def test_matrix_cells_show_state_and_counts(built):
    html = read(built, "builds/b3/matrix.html")
    # the download's records, made in the browser from the data file (static/matrix.js)
    rows = site_files.matrix_records(built["out"], "b3")
    cell = {(r["op"], r["variant"], r["dtype"]): r for r in rows}
    assert cell[("add", "forward", "float32")]["state"] == "missing_op"
    assert cell[("add", "gradient", "float32")]["state"] == "pass_fallback"
    assert cell[("mul", "forward", "float32")]["state"] == "pass"
    assert cell[("div", "forward", "float32")]["state"] == "failed"
    assert cell[("mul", "out", "float16")]["state"] == "unsupported_dtype"
    # the page is a shell; the cells load lazily from the data file the browser draws
    assert "data/matrix/b3.js" in html and "cumsum" not in html
    data = data_payload(built, "data/matrix/b3.js")[1]
    row = next(r for r in data["rows"] if r[:2] == ["cumsum", "forward"])
    states = [data["states"][c[0]]["key"] for c in row[2] if c]
    assert states == ["missing_op", "missing_op"]  # float32 and float64


def test_diff_page_categories(built):
    html = read(built, "builds/b3/diff.html")
    assert "b2" in html
    # the tables of changed tests come lazily from the data file, with their downloads (static/diff.js)
    regressions = site_files.diff_records(built["out"], "b3", "regressions")
    assert [r["test id"] for r in regressions] == [site_data.REGRESSED]
    assert regressions[0]["before"] == "pass" and regressions[0]["after"].startswith("skip_backend/missing_op")
    fixes = site_files.diff_records(built["out"], "b3", "fixes")
    assert [r["test id"] for r in fixes] == [site_data.FIXED]
    creep = site_files.diff_records(built["out"], "b3", "fallback_creep")
    assert [r["test id"] for r in creep] == [site_data.CREEP]
    assert site_data.REGRESSED not in html and "data/diff/b3.js" in html
    new_ops = json.loads(read(built, "builds/b3/diff-new_missing_ops.json"))
    assert [r["op"] for r in new_ops] == ["aten::add.out"]
    flaky = json.loads(read(built, "builds/b3/diff-flaky.json"))
    assert flaky == [{"test_id": site_data.FLAKY, "attempts": "crash \u2192 pass \u2192 crash"}]


def test_missing_leaderboard_ranks_and_counts_models(built):
    board = json.loads(read(built, "builds/b3/missing.json"))
    assert board[0]["operator"] == "aten::cumsum.out" and board[0]["tests blocked"] == 3
    assert board[0]["models blocked"] == 1 and board[0]["first build seen"] == "b1"
    assert board[1]["operator"] == "aten::add.out" and board[1]["first build seen"] == "b3"
    top = read(built, "missing.html")
    assert "Implement these 2 operators to unblock 4 tests and 1 models" in top


def test_models_page_pivots_model_by_variant(built):
    models = json.loads(read(built, "tables/models-b3.json"))
    bert = next(r for r in models if r["model"] == "bert")
    assert (bert["forward"], bert["backward"], bert["compiled"]) == ("pass", "pass_fallback", "fail")
    gpt2 = next(r for r in models if r["model"] == "gpt2")
    assert "aten::cumsum.out" in gpt2["detail"]


def data_payload(built, rel):
    text = read(built, rel)
    m = re.fullmatch(r'TC\.loaded\("([^"]+)",(.*)\);\n', text, re.S)
    return m.group(1), json.loads(m.group(2))


def test_search_data_aligns_codes_with_index_across_builds(built):
    def payload(rel):
        return data_payload(built, rel)

    key, tests = payload("data/tests.js")
    assert key == "tests"
    ids = site_files.ids_by_position(built["out"])
    assert len(ids) == tests["n"] == len(set(ids)) and None not in ids
    assert ids == sorted(ids)          # a fresh numbering is in id order
    codes = {b: site_files.codes(built["out"], b) for b in ("b1", "b2", "b3")}
    assert [codes[b][site_data.REGRESSED] for b in ("b1", "b2", "b3")] == ["P", "P", "M"]
    assert site_files.missing_ops(built["out"], "b3")[site_data.REGRESSED] == "aten::add.out"
    # a model test exists in every build; no build lacks a test it ran
    assert all(len(c) == len(ids) and "." not in c.values() for c in codes.values())


def test_everything_from_a_test_is_escaped(built):
    for page in built["out"].rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert "<script>alert(" not in html, page
        assert "<img src=x" not in html, page
        assert "<b>op</b>" not in html, page
    fails = read(built, "builds/b3/diff-missing_tests.json")  # exists even when empty
    assert json.loads(fails) == []
    assert any(r[0] == "xss<b>op</b>" for r in data_payload(built, "data/matrix/b3.js")[1]["rows"])
    # script data cannot close its <script> element early
    for data in (built["out"] / "data").rglob("*.js"):
        assert "</script" not in data.read_text(encoding="utf-8").lower()


def test_csv_downloads_match_json_and_guard_formulas(built):
    records = json.loads(read(built, "builds/b3/diff-transitions.json"))
    with open(built["out"] / "builds/b3/diff-transitions.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(records) and rows[0].keys() == records[0].keys()
    html = read(built, "search.html")
    assert "static/search.js" in html
    # a test id that looks like a spreadsheet formula is neutralised in CSV exports
    from torchconform.dashboard.tables import Table, write_downloads
    t = Table("x/t", ["test"], [[site_data.FORMULA_TEST]])
    write_downloads(built["out"], t)
    assert (built["out"] / "x/t.csv").read_text().splitlines()[1].startswith("\"'=HYPERLINK")


def test_charts_are_proportional_and_patterned():
    b = {"build": "x", "total": 4, "outcomes": {o: 0 for o in
         ("pass", "pass_fallback", "fail", "error", "crash", "timeout", "skip_eligibility", "skip_backend", "xfail", "xpass")},
         "backend_skip_kinds": {"missing_op": 1, "skiplist": 0, "unsupported_dtype": 0, "not_executed": 0}, "missing_ops": []}
    b["outcomes"].update({"pass": 3, "skip_backend": 1})
    svg = str(charts.breakdown_bar(b, width=400))
    widths = [float(w) for w in re.findall(r'width="([\d.]+)" height', svg)]
    assert widths == [300.0, 100.0]
    assert 'fill="url(#p-pass)"' in svg and 'fill="url(#p-missing_op)"' in svg
    # a pass that never touched the device is drawn apart, not as a pass
    b["pass_kinds"] = {"native": 2, "fallback": 0, "host_only": 1}
    svg = str(charts.breakdown_bar(b, width=400))
    assert [float(w) for w in re.findall(r'width="([\d.]+)" height', svg)] == [200.0, 100.0, 100.0]
    assert 'fill="url(#p-host_only)"' in svg
    defs = str(charts.pattern_defs())
    assert defs.count("<pattern") == 12  # one per category (CATEGORIES)
    trend = str(charts.trend_chart([{"label": f"b{i}", "href": None, "breakdown": b} for i in range(5)]))
    # three segments in each of five columns, and each column's own (its build's name and total)
    assert trend.count("<title>") == 20


def test_rebuild_replaces_stale_pages_and_refuses_foreign_folders(built, tmp_path):
    foreign = tmp_path / "notasite"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    with open_store(str(built["db"])) as store:
        with pytest.raises(UserError, match="not empty"):
            build_site(store, foreign)
        assert (foreign / "precious.txt").read_text() == "keep me"
        out = tmp_path / "site"
        build_site(store, out)
        (out / "builds" / "gone").mkdir()
        (out / "data" / "builds" / "gone.js").write_text("stale")
        build_site(store, out)
        assert not (out / "builds" / "gone").exists() and not (out / "data" / "builds" / "gone.js").exists()
        assert github_pages.publish(out) == out and (out / ".nojekyll").exists()
        dest = local.publish(out, tmp_path / "www")
        assert (dest / "index.html").read_text() == (out / "index.html").read_text()


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "torchconform.cli.main", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_prints_home_page_path(built, tmp_path):
    r = _cli("site", "--db", str(built["db"]), "--out", str(tmp_path / "s"), "--github-pages")
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()) == (tmp_path / "s" / "index.html").resolve()
    assert (tmp_path / "s" / ".nojekyll").exists()


def test_cli_user_errors_are_one_line_and_store_nothing(tmp_path):
    missing = tmp_path / "nope.db"
    r = _cli("site", "--db", str(missing), "--out", str(tmp_path / "s"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "no database" in r.stderr and not missing.exists() and not (tmp_path / "s").exists()
    empty = tmp_path / "empty.db"
    open_store(str(empty)).close()
    r = _cli("site", "--db", str(empty), "--out", str(tmp_path / "s"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "no builds" in r.stderr and "torchconform run" in r.stderr
    assert not (tmp_path / "s").exists()


class CountingQueries:
    """The query module, counting calls (to see which builds were read again)."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        fn = getattr(READS, name)

        def call(*args, **kwargs):
            self.calls.append((name, args[1] if len(args) > 1 else None))
            return fn(*args, **kwargs)
        return call


def test_second_run_reuses_unchanged_builds(tmp_path):
    db, out = tmp_path / "s.db", tmp_path / "site"
    with open_store(str(db)) as store:
        site_data.write_store(store)
        build_site(store, out)
        b1_page = (out / "builds/b1/index.html").read_text()
        q = CountingQueries()
        build_site(store, out, queries=q)
        assert [c for c in q.calls if c[0] == "latest_rows"] == []
        assert (out / "builds/b1/index.html").read_text() == b1_page
        # a new build and an appended shard: exactly those two are read again
        store.ensure_build("b4", branch="main", device="refdev")
        run = store.start_run("b4", suite="ops")
        store.add_outcomes(run, site_data.outcomes_for(3))
        store.finish_run(run, 0)
        run = store.start_run("b2", suite="ops", shard="2")
        store.add_outcomes(run, [site_data._op("extra", "forward", "float32", "pass")])
        store.finish_run(run, 0)
        b1_written = (out / "builds/b1/index.html").stat().st_mtime_ns
        q = CountingQueries()
        build_site(store, out, queries=q)
    read_again = sorted(b for name, b in q.calls if name == "latest_rows")
    # b2 changed, so b3 (whose baseline is b2) is redone too; b1 is read only as the
    # baseline of b2's diff: its own pages are kept, not written again
    assert read_again == ["b1", "b2", "b3", "b4"]
    assert (out / "builds/b1/index.html").stat().st_mtime_ns == b1_written
    # the search data of a kept build still lines up with the grown index
    b1 = site_files.codes(out, "b1")
    assert b1[site_data.REGRESSED] == "P" and b1[
        "suites/ops/test_ops.py::TestCommonREFDEV::test_forward_extra_refdev_float32"] == "."
    home = (out / "index.html").read_text()
    assert 'href="builds/b4/index.html"' in home


def test_odd_builds_empty_unfinished_and_clashing_names(tmp_path):
    """A build with no outcomes, one whose run never ended, and names that slug alike."""
    from torchconform.dashboard.render import slugify

    taken = set()
    assert [slugify(n, taken) for n in ("a/b", "a-b", "../x", "", "A-B")] == [
        "a-b-3ec69c85", "a-b", "x-72e4d01d", "da39a3ee", "A-B-2"]
    with open_store(str(tmp_path / "s.db")) as store:
        store.ensure_build("a/b", branch="main", device="refdev")
        store.finish_run(store.start_run("a/b", suite="ops"), 0)         # complete, no outcomes
        store.ensure_build("a-b", branch="main", device="refdev")
        run = store.start_run("a-b", suite="ops")                          # never finished
        store.add_outcomes(run, site_data.outcomes_for(1))
        home = build_site(store, tmp_path / "site")
        html = home.read_text()
        assert 'href="builds/a-b-3ec69c85/index.html"' in html and 'href="builds/a-b/index.html"' in html
        empty = (tmp_path / "site/builds/a-b-3ec69c85/index.html").read_text()
        assert "0 outcomes" in empty and "This build has no OpInfo results" in (
            tmp_path / "site/builds/a-b-3ec69c85/matrix.html").read_text()
        q = CountingQueries()
        build_site(store, tmp_path / "site", queries=q)
    # the unfinished build may still grow, so it is read again; the finished one is kept
    # (read only as the baseline of a-b's diff)
    assert sorted(b for name, b in q.calls if name == "latest_rows") == ["a-b", "a/b"]
    assert "a/b" not in [b for name, b in q.calls if name != "latest_rows"]


def test_every_control_has_a_label_and_no_asset_is_remote(built):
    """Keyboard and screen-reader use needs labelled controls; file:// use needs local assets."""
    for page in built["out"].rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        labels = set(re.findall(r'<label for="([^"]+)"', html))
        controls = re.findall(r'<(?:input|select)\b[^>]*\bid="([^"]+)"', html)
        assert set(controls) <= labels, (page, set(controls) - labels)
        # no CDN: every script and stylesheet is a relative path inside the site
        for src in re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="([^"]+)"', html):
            assert "://" not in src and not src.startswith("//"), (page, src)
            assert (page.parent / src).resolve().is_file(), (page, src)
