"""The generated site driven in Debian's Chromium (headless) through Playwright, from file://.

Open home, follow a build, filter the operator matrix, search a test and read its
history, open a diff, filter the operator census by status and search it; assert content; a test named <script>alert(1)</script>
shows as text and no dialog ever opens.  Screenshots go to
$TORCHCONFORM_ARTIFACTS (or the test's tmp dir).
"""
import csv
import json
import os
import shutil
from urllib.parse import quote
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "site"))
import site_data  # noqa: E402
import site_files  # noqa: E402


pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("TORCHCONFORM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"]


def _skip_or_fail(reason):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI must run the browser tests; see tests/services/chromium.sh)")
    pytest.skip(f"{reason}; run `bash tests/services/chromium.sh` to install it")


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        _skip_or_fail("Debian's chromium is not installed")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_or_fail("Playwright for Python is not installed")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return site_data.build_fixture_site(tmp_path_factory.mktemp("browser-site"), census=True)["out"]


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    target = os.environ.get("TORCHCONFORM_ARTIFACTS")
    path = Path(target) / "site-screenshots" if target else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def page(browser, shots, request):
    """A fresh page that records dialogs and script errors; both must stay empty."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.dialogs, pg.errors = [], []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    pg.screenshot(path=str(shots / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert pg.dialogs == [], f"a dialog fired: {pg.dialogs}"
    assert pg.errors == [], f"script errors: {pg.errors}"


def url(site, rel):
    return (site / rel).as_uri()


def test_home_then_follow_a_build(page, site):
    page.goto(url(site, "index.html"))
    assert page.locator("h1").inner_text() == "Coverage by build"
    # the newest main build leads, with its bar chart and legend
    group = page.locator("section.group").filter(has_text="branch main")
    assert group.locator("svg.bar rect").count() >= 5
    assert "pass (native)" in group.locator("ul.legend").inner_text()
    group.get_by_role("link", name="b3", exact=True).first.click()
    page.wait_for_load_state()
    assert page.url.endswith("builds/b3/index.html")
    assert page.locator("h1").inner_text() == "Build b3"
    body = page.locator("main").inner_text()
    assert "Diff against baseline b2" in body and "aten::cumsum.out" in body


def test_matrix_filter_by_keyboard(page, site):
    page.goto(url(site, "builds/b3/matrix.html"))
    rows = page.locator("#matrix tbody tr")
    total = rows.count()
    assert total >= 8
    page.focus("#mf-op")
    page.keyboard.type("cumsum")
    visible = page.locator("#matrix tbody tr:not([hidden])")
    assert visible.count() == 2
    assert set(visible.locator("th").all_inner_texts()) == {"cumsum"}
    assert page.locator('[data-count-for="matrix"]').inner_text() == f"2 of {total} rows"
    # the state filter: rows that have a failing cell (div crashes; the XSS test fails)
    page.fill("#mf-op", "")
    page.focus("#mf-state")
    page.select_option("#mf-state", "failed")
    assert sorted(visible.locator("th").all_inner_texts()) == ["div", "xss<b>op</b>"]
    # the filter is in the URL: a permalink reopens it filtered
    assert "state=failed" in page.url
    page.goto(page.url)
    page.reload()
    assert page.locator("#matrix tbody tr:not([hidden])").count() == 2


def test_search_a_test_and_read_its_history(page, site):
    page.goto(url(site, "search.html"))
    page.fill("#q", "test_forward_add_refdev_float32")
    results = page.locator("#results button")
    results.first.wait_for()
    assert results.all_inner_texts() == [site_data.REGRESSED]
    results.first.press("Enter")  # keyboard works on result buttons
    history = page.locator("#history-table tbody tr")
    history.nth(3).wait_for()
    cells = [r.locator("td").all_inner_texts() for r in history.all()]
    by_build = {c[0]: c for c in cells}
    assert set(by_build) == {"b1", "b2", "b3", "other-1"}
    assert by_build["b2"][2] == "pass"
    assert by_build["b3"][2] == "skip: missing operator" and by_build["b3"][3] == "aten::add.out"
    assert "test=" in page.url


def test_search_filters_by_outcome_in_a_build(page, site):
    page.goto(url(site, "search.html"))
    page.select_option("#s-build", "b3")
    page.select_option("#s-state", "M")
    page.locator("#results li").first.wait_for()
    ids = page.locator("#results button").all_inner_texts()
    assert site_data.REGRESSED in ids and len(ids) == 5  # add + cumsum x3 + gpt2's model test
    assert page.locator("#search-status").inner_text().startswith("5 matching tests")


def test_script_in_a_test_name_renders_as_text(page, site):
    page.goto(url(site, "search.html"))
    page.fill("#q", "TestXSS")
    page.locator("#results button").first.wait_for()
    assert page.locator("#results button").first.inner_text() == site_data.XSS_TEST
    page.locator("#results button").first.click()
    page.locator("#history-table tbody tr").first.wait_for()
    assert page.locator("#history-test").inner_text() == site_data.XSS_TEST
    page.goto(url(site, "builds/b3/matrix.html"))
    assert page.get_by_text("xss<b>op</b>", exact=True).count() == 1
    assert page.locator("main b").count() == 0  # no element was injected
    # page fixture asserts that no alert() dialog fired


def follow(page, site, link, target, start="builds/b3/index.html"):
    """Open ``start``, follow the link named ``link``; it must lead to ``target``."""
    page.goto(url(site, start))
    page.get_by_role("link", name=link).click()
    page.wait_for_load_state()
    assert page.url.endswith(target)


def test_open_a_diff(page, site):
    follow(page, site, "Diff against baseline b2", "builds/b3/diff.html")
    regressions = page.locator("#d-regressions tbody tr")
    assert regressions.count() == 1
    assert site_data.REGRESSED in regressions.first.inner_text()
    assert "skip_backend/missing_op (aten::add.out)" in regressions.first.inner_text()
    assert site_data.FIXED in page.locator("#d-fixes").inner_text()
    assert site_data.CREEP in page.locator("#d-fallback_creep").inner_text()
    # the tables of changed tests are drawn from the data file; their downloads are made from it
    assert page.locator('[data-count-for="d-regressions"]').inner_text() == "1 rows"
    with page.expect_download() as got:
        page.locator('[data-diff-table="fixes"] a[data-format="json"]').click()
    assert got.value.suggested_filename == "diff-fixes.json"
    with open(got.value.path(), encoding="utf-8") as f:
        assert json.load(f) == site_files.diff_records(site, "b3", "fixes") != []
    # the filter acts on the table's data
    page.fill("#d-fixes-filter", "no such text")
    assert page.locator("#d-fixes tbody tr").count() == 0
    assert page.locator('[data-count-for="d-fixes"]').inner_text() == "0 of 1 rows"
    page.fill("#d-fixes-filter", "mul")
    assert page.locator("#d-fixes tbody tr").count() == 1
    # sort a table from the keyboard
    page.locator("#d-transitions button.sort").nth(2).focus()
    page.keyboard.press("Enter")
    counts = [int(t) for t in page.locator("#d-transitions tbody td.n").all_inner_texts()]
    assert counts == sorted(counts)


def test_census_filter_by_status_and_search(page, site):
    follow(page, site, "Operator census", "builds/b3/census.html")
    rows = page.locator("#census tbody tr")
    visible = page.locator("#census tbody tr:not([hidden])")
    total = rows.count()
    assert total == len(site_data.census_rows(3))
    page.select_option("#cf-status", "missing")
    missing = sorted(r.locator("td").first.inner_text() for r in visible.all())
    assert missing == sorted(["aten::add.out", "aten::cumsum.out", site_data.XSS_OP])  # the op shows as text
    assert page.locator('[data-count-for="census"]').inner_text() == f"3 of {total} rows"
    page.focus("#cf-op")
    page.keyboard.type("cumsum")
    assert [r.locator("td").first.inner_text() for r in visible.all()] == ["aten::cumsum.out"]
    assert "status=missing" in page.url
    # any status again: the blocked composite shows too; the permalink reopens it filtered
    page.select_option("#cf-status", "")
    assert sorted(r.locator("td").nth(1).inner_text() for r in visible.all()) == ["blocked", "missing"]
    page.goto(page.url)
    page.reload()
    assert visible.count() == 2 and page.locator("#cf-op").input_value() == "cumsum"
    # the plan's first step and the coverage chart (one column per census build so far)
    assert page.locator("#plan tbody tr").first.locator("td").nth(1).inner_text() == "aten::cumsum.out"
    assert page.locator("svg.trend a").count() == 2


# -- why it failed: messages, repro commands, clusters (issue 18) --------------------------------
def failure_rows(page):
    rows = page.locator("#failures-table tbody tr")
    rows.first.wait_for()
    return {r.locator("td").first.inner_text(): r.locator("td").all_inner_texts() for r in rows.all()}


def test_build_page_shows_each_failures_message_and_repro(page, site):
    page.goto(url(site, "builds/b3/index.html"))
    rows = failure_rows(page)
    # every failed, crashed and backend-skipped test of b3; passes and eligibility skips are not there
    assert len(rows) == 10 and site_data.FIXED not in rows
    assert page.locator("#failures-status").inner_text() == "10 of 10 tests."
    xss = rows[site_data.XSS_TEST]
    assert xss[1] == "fail" and xss[2] == site_data.XSS_MESSAGE      # the message shows as text
    assert xss[3] == f"python -m pytest '{site_data.XSS_TEST}' --tc-device refdev"
    assert rows[site_data.FLAKY][1:3] == ["crash", "worker crashed"]
    assert rows[site_data.REGRESSED][1] == "skip_backend/missing_op"
    assert page.locator("main img").count() == 0 and page.locator("#failures-table script").count() == 0
    # filter by message text, then by outcome; the filter is in the URL
    page.fill("#ff-q", "cumsum.out")
    assert page.locator("#failures-status").inner_text() == "4 of 10 tests."
    page.fill("#ff-q", "")
    page.select_option("#ff-label", "crash")
    assert list(failure_rows(page)) == [site_data.FLAKY]
    assert "label=crash" in page.url
    # a test's id leads to its history
    page.get_by_role("link", name=site_data.FLAKY).click()
    page.wait_for_load_state()
    assert "search.html#test=" in page.url


def test_clusters_page_links_its_tests_with_their_repro(page, site):
    page.goto(url(site, "builds/b3/index.html"))
    page.get_by_role("link", name="Failure clusters", exact=True).click()
    page.wait_for_load_state()
    assert page.url.endswith("builds/b3/clusters.html")
    rows = page.locator("#clusters tbody tr")
    assert rows.count() == 3      # the XSS failure, the model's compile failure, the crash
    crash = rows.filter(has_text="worker crashed")
    assert "python -m pytest " + site_data.FLAKY + " --tc-device refdev" in crash.locator("pre.repro").inner_text()
    assert page.locator("main img").count() == 0
    assert "<img src=x" in rows.filter(has_text="TestXSS").locator("code.signature").inner_text()
    crash.locator("td.n a").click()          # its tests on the build page, the list filtered to the cluster
    page.wait_for_load_state()
    assert "index.html#cluster=" in page.url
    assert list(failure_rows(page)) == [site_data.FLAKY]
    assert page.locator("#failures-status").inner_text() == "1 of 10 tests."


def test_history_shows_message_and_repro_of_each_failing_build(page, site):
    page.goto(url(site, "search.html") + "#test=" + quote(site_data.FLAKY))
    history = page.locator("#history-table tbody tr")
    history.nth(3).wait_for()
    by_build = {c[0]: c for c in (r.locator("td").all_inner_texts() for r in history.all())}
    repro = f"python -m pytest {site_data.FLAKY} --tc-device refdev"
    assert by_build["b3"][2:] == ["crash", "", "worker crashed", repro]
    page.goto(url(site, "search.html") + "#test=" + quote(site_data.REGRESSED))
    page.reload()     # a new hash alone does not load the page again
    page.locator("#history-test").get_by_text(site_data.REGRESSED).wait_for()
    history.nth(3).wait_for()
    by_build = {c[0]: c for c in (r.locator("td").all_inner_texts() for r in history.all())}
    assert by_build["b2"][2:] == ["pass", "", "", ""]          # a pass has no message or repro
    assert by_build["b3"][4] == "NotImplementedError: Could not run 'aten::add.out'"


@pytest.fixture(scope="module")
def chunked(tmp_path_factory):
    """The fixture site with two failures per chunk file: the history finds a test's chunk."""
    from torchconform.dashboard import failures

    keep = failures.CHUNK
    failures.CHUNK = 2
    try:
        return site_data.build_fixture_site(tmp_path_factory.mktemp("chunked-site"))["out"]
    finally:
        failures.CHUNK = keep


def test_failures_split_in_chunks_load_on_both_pages(page, chunked):
    assert len(list((chunked / "data/failures/b3").glob("*.js"))) == 1 + 5
    page.goto(url(chunked, "builds/b3/index.html"))
    rows = failure_rows(page)
    assert len(rows) == 10 and rows[site_data.XSS_TEST][2] == site_data.XSS_MESSAGE
    for test, message in ((site_data.FLAKY, "worker crashed"), (site_data.XSS_TEST, site_data.XSS_MESSAGE)):
        page.goto(url(chunked, "search.html") + "#test=" + quote(test))
        page.reload()
        page.locator("#history-test").get_by_text(test).wait_for()
        history = page.locator("#history-table tbody tr")
        history.nth(3).wait_for()
        by_build = {c[0]: c for c in (r.locator("td").all_inner_texts() for r in history.all())}
        assert by_build["b3"][4] == message


def test_evaluation_page_from_the_build_page(page, site):
    page.goto(url(site, "builds/b3/index.html"))
    page.get_by_role("link", name="Evaluation: traits, environment, numerical drift, cold and warm cost").click()
    page.wait_for_load_state()
    assert page.url.endswith("builds/b3/evaluation.html")
    assert page.locator("h1").inner_text() == "Evaluation of build b3"
    body = page.locator("main").inner_text()
    for heading in ("Environment", "Numerical error per operator and dtype", "Execution cost per model"):
        assert heading in body
    assert "did not run the traits suite" in body     # the fixture's builds have no traits run
    # the baseline's own evaluation page is one click away
    page.get_by_role("link", name="b2", exact=True).click()
    page.wait_for_load_state()
    assert page.url.endswith("builds/b2/evaluation.html")


# -- search query language, matrix heatmap, leaderboard chart (issue 18, "Builds that belong together") --
def run_query(page, site, query):
    """Type ``query`` in the search box; returns (the status line, the result ids)."""
    page.goto(url(site, "search.html"))
    page.fill("#q", query)
    status = page.locator("#search-status")
    page.wait_for_function("() => !/Loading|Type to search/.test(document.getElementById('search-status').textContent)")
    return status.inner_text(), page.locator("#results button").all_inner_texts()


def ops_test(variant, op, dtype):
    return f"suites/ops/test_ops.py::TestCommonREFDEV::test_{variant}_{op}_refdev_{dtype}"


MODEL = "suites/models/test_hf.py::TestHF::test_{}[{}]".format


@pytest.mark.parametrize("query, expected", [
    # fields, AND by default; "failed" is fail, error, crash or timeout
    ("build:b3 outcome:failed", {site_data.XSS_TEST, site_data.FLAKY, MODEL("compiled", "bert")}),
    # negation with "-": add's tests that did not pass natively in b3
    ("build:b3 op:add -outcome:pass", {site_data.REGRESSED, site_data.CREEP, ops_test("compiled", "add", "float32")}),
    # negation with NOT, the model-zoo suite
    ("build:b3 suite:models not outcome:pass", {MODEL("backward", "bert"), MODEL("compiled", "bert"), MODEL("forward", "gpt2")}),
    # OR binds looser than AND: sort OR (div AND crash)
    ("build:b3 op:sort OR op:div outcome:crash", {ops_test("forward", "sort", "int64"), site_data.FLAKY}),
    ("build:b3 op:div outcome:pass OR op:sort", {ops_test("forward", "sort", "int64")}),
    # parentheses group an OR inside the AND
    ("build:b3 (op:add OR op:mul) dtype:float32 outcome:pass", {site_data.FIXED}),
    # a kind of backend skip, and the whole outcome
    ("build:b3 outcome:missing_op op:cumsum*", {ops_test("forward", "cumsum", "float32"), ops_test("forward", "cumsum", "float64"),
                                               ops_test("gradient", "cumsum", "float32")}),
    ("build:b3 outcome:skip_backend suite:ops", {site_data.REGRESSED, ops_test("forward", "cumsum", "float32"),
                                                 ops_test("forward", "cumsum", "float64"), ops_test("gradient", "cumsum", "float32"),
                                                 ops_test("out", "mul", "float16"), ops_test("forward", "sort", "int64")}),
    # a quoted phrase in the failure messages: mul failed "not close" in b2, passes in b3
    ('build:b2 msg:"not close"', {site_data.FIXED}),
    ('build:b3 msg:"not close"', set()),
    # the message that tries to inject markup is searched as text
    ('build:b3 msg:"<img src=x"', {site_data.XSS_TEST}),
    # free words match the test id; no build: every test in the index
    ("TestCommonREFDEV float64", {ops_test("forward", "add", "float64"), ops_test("forward", "cumsum", "float64")}),
    ("op:add dtype:float32 variant:compiled", {ops_test("compiled", "add", "float32")}),
    ("file:test_misc", {site_data.FORMULA_TEST}),
    # a field value that no test has matches nothing, without an error
    ("build:b3 dtype:complex128", set()),
])
def test_search_query_language(page, site, query, expected):
    status, ids = run_query(page, site, query)
    assert set(ids) == expected, (query, status)
    assert status.startswith(f"{len(expected)} matching tests"), status
    if "build:" in query:
        assert f"in build {query.split('build:')[1].split()[0]}" in status
    assert "query-error" not in page.locator("#search-status").get_attribute("class")


def test_search_outcome_without_a_build_looks_at_the_newest(page, site):
    status, ids = run_query(page, site, "outcome:fail")
    # other-1 is the newest build (its tests are b2's: mul still fails there)
    assert status.startswith("3 matching tests in build other-1")
    assert set(ids) == {site_data.FIXED, site_data.XSS_TEST, MODEL("compiled", "bert")}
    # the build list chooses the build when the query names none
    page.select_option("#s-build", "b3")
    page.wait_for_function("() => /in build b3/.test(document.getElementById('search-status').textContent)")
    assert set(page.locator("#results button").all_inner_texts()) == {site_data.XSS_TEST, MODEL("compiled", "bert")}


@pytest.mark.parametrize("query, message", [
    ("op:add OR", "OR needs a term on each side."),
    ("outcome:passed", "Unknown outcome 'passed'."),
    ("colour:red", "Unknown field 'colour:'."),
    ('msg:"not close', "A quote is not closed"),
    ("(op:add OR op:mul", "A '(' is not closed."),
    ("build:nope op:add", "No build named 'nope'."),
    ("-build:b3 op:add", "it cannot follow NOT or -"),
    ("build:b2 op:add build:b3", "Use one build: per query."),
])
def test_a_malformed_query_shows_one_message(page, site, query, message):
    status, ids = run_query(page, site, query)
    assert status.startswith("Query not understood: ") and message in status, status
    assert ids == []
    assert "query-error" in page.locator("#search-status").get_attribute("class")
    # fixing the query brings results back (page fixture: no script error on the way)
    page.fill("#q", "op:add dtype:float64")
    page.wait_for_function("() => /^1 matching tests/.test(document.getElementById('search-status').textContent)")


def test_search_query_result_opens_the_history_with_messages(page, site):
    status, ids = run_query(page, site, 'build:b3 msg:"worker crashed"')
    assert ids == [site_data.FLAKY]
    assert page.locator("#results .swatch").inner_text() == "C"
    page.locator("#results button").first.click()
    history = page.locator("#history-table tbody tr")
    history.nth(3).wait_for()
    by_build = {c[0]: c for c in (r.locator("td").all_inner_texts() for r in history.all())}
    assert by_build["b3"][2] == "crash" and by_build["b3"][4] == "worker crashed"
    # the query is in the permalink
    assert "q=build%3Ab3" in page.url and "test=" in page.url
    assert page.locator("#query-help summary").inner_text() == "Query syntax"


def heat_cell(page, op, dtype):
    return page.locator(f'#heatmap tbody tr[data-op="{op}"] td[data-dtype="{dtype}"]')


def test_matrix_heatmap_folds_variants_and_toggles_to_rows(page, site):
    page.goto(url(site, "builds/b3/matrix.html"))
    page.locator("#matrix tbody tr").first.wait_for()
    # the rows open first (as before); the heatmap is one click away and drawn then
    assert page.locator("#heatmap tbody tr").count() == 0 and not page.locator("#heatmap").is_visible()
    page.get_by_role("button", name="Heatmap: operator \u00d7 dtype").click()
    heat = page.locator("#heatmap tbody tr")
    assert page.locator("#heatmap").is_visible() and not page.locator("#matrix").is_visible()
    assert "view=heatmap" in page.url
    assert heat.locator("th").all_inner_texts() == ["add", "cumsum", "div", "mul", "sort", "xss<b>op</b>"]
    assert page.locator("#heat-count").inner_text() == "6 of 6 operators"
    # add x float32 folds forward (missing op), gradient (CPU fallback) and compiled (eligibility skip):
    # the missing operator is the most important; 1 of the 2 that ran passed
    cell = heat_cell(page, "add", "float32")
    assert cell.get_attribute("class") == "cell c-missing_op" and cell.inner_text() == "M 1/2"
    title = cell.get_attribute("title")
    assert title.startswith("add \u00b7 float32: skip: missing operator (most important of 3 variants)")
    assert "gradient: \u21bb pass through CPU fallback 1/1" in title and "compiled:" in title
    assert heat_cell(page, "add", "float64").get_attribute("class") == "cell c-pass"
    assert heat_cell(page, "xss<b>op</b>", "float32").get_attribute("class") == "cell c-failed"
    assert heat_cell(page, "sort", "float32").count() == 0     # sort has int64 only: an empty cell
    assert page.locator("main b").count() == 0
    # a cell shows its variants; from there, the operator's rows
    heat_cell(page, "add", "float32").focus()
    page.keyboard.press("Enter")
    variants = page.locator("#heat-detail li").all_inner_texts()
    assert [v.split(":")[0].strip() for v in variants] == ["M forward", "\u21bb gradient", "\u00b7 compiled"]
    page.get_by_role("button", name="Show the rows of add").click()
    assert page.locator("#matrix").is_visible() and not page.locator("#heatmap").is_visible()
    assert set(page.locator("#matrix tbody tr:not([hidden]) th").all_inner_texts()) == {"add"}
    assert "view=" not in page.url and "op=add" in page.url
    # back to the heatmap: the filters fold into it, only forward variants now
    page.get_by_role("button", name="Heatmap: operator \u00d7 dtype").click()
    assert "view=heatmap" in page.url and page.locator("#heatmap").is_visible()
    page.fill("#mf-op", "")
    page.select_option("#mf-variant", "forward")
    cell = heat_cell(page, "add", "float32")
    assert cell.inner_text() == "M 0/1" and "(1 variant)" in cell.get_attribute("title")
    assert "view=heatmap" in page.url and "variant=forward" in page.url
    # the downloads are as before, one row per operator, variant and dtype, made in the page from its data
    link = page.get_by_role("link", name="CSV").first
    assert link.get_attribute("download") == "matrix.csv"
    with page.expect_download() as got:
        link.click()
    with open(got.value.path(), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows == [{k: str(v) for k, v in r.items()} for r in site_files.matrix_records(site, "b3")]
    assert {(r["op"], r["variant"], r["dtype"]) for r in rows} >= {("add", "gradient", "float32"), ("xss<b>op</b>", "forward", "float32")}


def test_matrix_heatmap_permalink(page, site):
    page.goto(url(site, "builds/b3/matrix.html") + "#state=failed&view=heatmap")
    page.locator("#heatmap tbody tr").first.wait_for()
    assert page.locator("#heatmap").is_visible() and not page.locator("#matrix").is_visible()
    assert page.locator("#heatmap tbody th").all_inner_texts() == ["div", "xss<b>op</b>"]
    assert page.get_by_role("button", name="Heatmap: operator \u00d7 dtype").get_attribute("aria-pressed") == "true"
    assert page.locator("#heat-count").inner_text() == "2 of 6 operators"
    assert "view=heatmap" in page.url and "state=failed" in page.url


def test_missing_operator_leaderboard_chart(page, site):
    page.goto(url(site, "missing.html"))
    main = page.locator("section").filter(has_text="branch main")
    chart = main.locator("svg.leaders")
    assert chart.count() == 1
    # the operators in the top by tests or by models blocked, in the leaderboard's order, names as text
    assert chart.locator("text.op").all_text_contents() == [
        "aten::cumsum.out" * 2, "aten::add.out" * 2, site_data.XSS_OP * 2]   # <title> + label
    assert chart.locator("rect.bar-tests title").all_text_contents() == [
        "aten::cumsum.out: 3 tests blocked", "aten::add.out: 1 tests blocked"]
    assert chart.locator("rect.bar-models title").all_text_contents() == [
        "aten::cumsum.out: 2 models blocked", "aten::add.out: 1 models blocked", f"{site_data.XSS_OP}: 1 models blocked"]
    widths = [float(w) for w in chart.locator("rect.bar-tests").evaluate_all("rs => rs.map(r => r.getAttribute('width'))")]
    assert widths[0] == pytest.approx(3 * widths[1], abs=0.2)   # drawn to 0.1 px
    assert page.locator("main b").count() == 0
    # the build's own missing page has it too
    page.goto(url(site, "builds/b3/missing.html"))
    assert page.locator("svg.leaders rect.bar-tests").count() == 2


# -- builds that belong together (issue 18): series cards, trend labels and links, xfail apart from xpass --
@pytest.fixture(scope="module")
def series_site(tmp_path_factory):
    return site_data.build_series_site(tmp_path_factory.mktemp("browser-series"))["out"]


def test_home_shows_one_card_per_series_and_the_trend_links_each_build(page, series_site):
    page.goto(url(series_site, "index.html"))
    cards = page.locator("section.group")
    assert cards.count() == 3
    # newest series first, each named by device, profile, branch and suite set
    assert [c.locator("p.series").inner_text().split(" · ")[:4] for c in cards.all()] == [
        ["Series: device refdev", "profile young-backend", "branch main", "suites ops"],
        ["Series: device refdev", "profile young-backend", "branch main", "suites pytest"],
        ["Series: device npu", "profile npu", "branch main", "suites ops"]]
    main, foreign = cards.nth(0), cards.nth(1)
    assert main.locator("h2 a").inner_text() == site_data.SERIES_MAIN[2]
    # the 6-test ingest has its own card: no trend, and it is not a column of the main trend
    assert foreign.locator("svg.trend").count() == 0 and "6 outcomes" in foreign.inner_text()
    columns = main.locator("svg.trend a.col")
    assert columns.count() == 3
    ticks = main.locator("svg.trend text.tick").all_text_contents()
    assert ticks == ["12-01", "12-02", "12-04"]
    titles = [c.locator("> title").text_content() for c in columns.all()]
    assert [t.split(",")[0] for t in titles] == site_data.SERIES_MAIN
    # the labels are drawn inside the chart, none clipped at its left edge
    chart = main.locator("svg.trend").bounding_box()
    first = main.locator("svg.trend text.tick").first.bounding_box()
    assert first["x"] >= chart["x"] - 0.5
    # a column is a link to its build, also where no segment is under the pointer
    columns.nth(1).locator("rect.hit").click(position={"x": 5, "y": 5})
    page.wait_for_load_state()
    assert page.locator("h1").inner_text() == f"Build {site_data.SERIES_MAIN[1]}"


def test_xfail_and_xpass_apart_on_home_and_build_page(page, series_site):
    page.goto(url(series_site, "index.html"))
    for where in ("home", "build"):
        legend = page.locator("ul.legend").first.inner_text()
        assert "expected failure (xfail): 2" in legend and "unexpected pass (xpass): 1" in legend
        assert page.locator("svg.bar").first.locator('rect[fill="url(#p-xpass)"]').count() == 1
        if where == "home":
            page.locator("section.group").first.locator("h2 a").click()
            page.wait_for_load_state()
    # the swatches differ (colour and pattern), so the two read apart without the words
    styles = page.evaluate("""() => ['xfail', 'xpass'].map(k => {
        const s = getComputedStyle(document.querySelector('.swatch.c-' + k));
        return s.backgroundColor + ' ' + s.backgroundImage; })""")
    assert styles[0] != styles[1]


def test_a_name_with_html_in_a_trend_stays_text(page, series_site):
    page.goto(url(series_site, "index.html"))
    npu = page.locator("section.group").nth(2)
    titles = [c.locator("> title").text_content() for c in npu.locator("svg.trend a.col").all()]
    assert titles[1].startswith(site_data.SERIES_NPU[1] + ", created")
    assert page.locator("main img").count() == 0


# -- a year of nightly builds (issue 20): builds past --full-builds, a numbering extended by a later run --
NEW_TEST = "suites/ops/test_ops.py::TestCommonREFDEV::test_aaa_new_refdev_float32"


@pytest.fixture(scope="module")
def nightly_site(tmp_path_factory):
    """The fixture store's site with one full main build (b1, b2 past --full-builds 1), then a
    nightly b4 with a test new to the numbering whose id sorts first (positions are kept, so it
    comes after every other: the pages must still read in id order)."""
    from torchconform.core.outcome import Outcome
    from torchconform.dashboard import build_site
    from torchconform.db.opening import open_store

    root = tmp_path_factory.mktemp("nightly-site")
    with open_store(str(root / "store.db")) as store:
        site_data.write_store(store)
        build_site(store, root / "out", full_builds=1)
        store.ensure_build("b4", branch="main", device="refdev", backend="refdev", profile="young-backend",
                           torch_version="2.13.0", commit="0000004")
        run = store.start_run("b4", suite="ops", selection="fixture", host="test")
        store.add_outcomes(run, site_data.outcomes_for(3) + [
            Outcome(NEW_TEST, "fail", suite="ops", file="suites/ops/test_ops.py", cls="TestCommonREFDEV",
                    name="test_aaa_new_refdev_float32", op="aaa", variant="forward", dtype="float32",
                    message="AssertionError: new and failing")])
        store.finish_run(run, 0)
        build_site(store, root / "out", full_builds=1)
    return root / "out"


def test_a_retired_build_page_says_so_and_the_rest_still_reads(page, nightly_site):
    ids = site_files.ids_by_position(nightly_site)
    assert ids[-1] == NEW_TEST and ids != sorted(ids)           # appended, not sorted in
    page.goto(url(nightly_site, "builds/b2/index.html"))
    assert "older than the 1 most recent builds" in page.locator("p.retired").inner_text()
    assert page.get_by_role("link", name="Operator matrix").count() == 0
    # b4's failure list: the new test first (id order), its message from the positional data
    page.goto(url(nightly_site, "builds/b4/index.html"))
    rows = failure_rows(page)
    assert list(rows) == sorted(rows) and rows[NEW_TEST][1:3] == ["fail", "AssertionError: new and failing"]
    assert len(rows) == 11
    # the kept other-1 page (written before the numbering grew) still finds its failures
    page.goto(url(nightly_site, "builds/other-1/index.html"))
    assert set(failure_rows(page)) == set(site_files.failure_rows(nightly_site, "other-1")) != set()


def test_search_over_the_full_builds_in_id_order(page, nightly_site):
    page.goto(url(nightly_site, "search.html"))
    assert [o.inner_text() for o in page.locator("#s-build option").all()] == ["any build", "b4", "other-1"]
    page.fill("#q", "outcome:failed")
    page.locator("#results li").first.wait_for()
    got = page.locator("#results button").all_inner_texts()
    assert got == sorted(got) and NEW_TEST in got      # the newest build's failures, in id order
    page.get_by_role("button", name=NEW_TEST, exact=True).click()
    history = page.locator("#history-table tbody tr")
    history.nth(1).wait_for()
    cells = {c[0]: c for c in (r.locator("td").all_inner_texts() for r in history.all())}
    assert set(cells) == {"b4", "other-1"}                 # only builds with search data
    assert cells["b4"][2] == "fail" and cells["b4"][4] == "AssertionError: new and failing"
    assert cells["other-1"][2] == "not in this build"
    # the history of a test in the kept other-1: its message from other-1's positional chunk
    page.goto(url(nightly_site, "search.html") + "#test=" + quote(site_data.REGRESSED))
    page.reload()
    page.locator("#history-test").get_by_text(site_data.REGRESSED).wait_for()
    history.nth(1).wait_for()
    cells = {c[0]: c for c in (r.locator("td").all_inner_texts() for r in history.all())}
    assert cells["b4"][2:4] == ["skip: missing operator", "aten::add.out"] and cells["other-1"][2] == "pass"


def test_a_stub_says_the_page_was_retired(page, nightly_site):
    page.goto(url(nightly_site, "builds/b4/evaluation.html"))
    page.get_by_role("link", name="b3", exact=True).click()       # b4's baseline, past the window
    page.wait_for_load_state()
    assert page.url.endswith("builds/b3/evaluation.html")
    assert "its evaluation page was not generated" in page.locator("main").inner_text()
