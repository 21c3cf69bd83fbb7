"""The site's census pages (dashboard/pages/census.py) and the census-aware leaderboard and
models page, on the site fixture with censuses for b2 and b3 (site_data.write_census)."""
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "site"))
import site_data  # noqa: E402

from torchconform.census import impact, plan  # noqa: E402
from torchconform.census.take import Census  # noqa: E402
from torchconform.dashboard import build_site  # noqa: E402
from torchconform.db.arrays import BuildData, TestTable  # noqa: E402
from torchconform.dashboard.pages import census as census_page  # noqa: E402
from torchconform.db import read_ops, read_rows  # noqa: E402
from torchconform.dashboard.reads import READS  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return site_data.build_fixture_site(tmp_path_factory.mktemp("census-site"), census=True)


def load(built, rel):
    return json.loads((built["out"] / rel).read_text(encoding="utf-8"))


def test_pages_only_for_builds_with_a_census_and_linked_from_them(built):
    out = built["out"]
    assert (out / "builds/b2/census.html").is_file() and (out / "builds/b3/census.html").is_file()
    assert not (out / "builds/b1/census.html").exists() and not (out / "builds/other-1/census.html").exists()
    assert 'href="census.html"' in (out / "builds/b3/index.html").read_text()
    assert 'href="census.html"' not in (out / "builds/b1/index.html").read_text()


def test_every_operator_with_status_blocking_counts_and_history(built):
    rows = {r["operator"]: r for r in load(built, "builds/b3/census.json")}
    assert set(rows) == {r.op for r in site_data.census_rows(3)}
    assert rows["aten::cumsum"]["status"] == "blocked" and rows["aten::cumsum"]["blocked by"] == "aten::cumsum.out"
    assert rows["aten::linear"]["status"] == "composite" and rows["aten::fused"]["status"] == "autograd"
    # counts are the store's one-off leaderboard, full per-model sets included
    with open_store(str(built["db"])) as store:
        board = {e["op"]: e for e in impact.leaderboard(store, "b3")}
    for op, e in board.items():
        assert (rows[op]["tests blocked"], rows[op]["models blocked"]) == (e["tests"], e["models"])
    assert rows["aten::cumsum.out"]["models blocked"] == 2          # bert only through aten::cumsum
    assert rows[site_data.XSS_OP]["models blocked"] == 1 and rows[site_data.XSS_OP]["tests blocked"] == 0
    # first seen missing / working since, along main/refdev's censuses (b2, b3)
    assert (rows["aten::mul.Tensor"]["first build seen missing"], rows["aten::mul.Tensor"]["works since"]) == ("b2", "b3")
    assert (rows["aten::add.out"]["first build seen missing"], rows["aten::add.out"]["works since"]) == ("b3", "")
    assert rows["aten::mm"]["first build seen missing"] == "" and rows["aten::mm"]["status"] == "native"


def test_plan_table_is_the_plan_of_the_store(built):
    with open_store(str(built["db"])) as store:
        found = impact.load_impact(store, "b3")
    expected = plan.plan(found.sets(), found.tests, census_page.PLAN_STEPS)
    got = load(built, "builds/b3/plan.json")
    assert [r["operator"] for r in got] == [s.op for s in expected.steps]
    assert [r["unblocks models"] for r in got] == [" ".join(s.models) for s in expected.steps]
    assert got[0] == {"step": 1, "operator": "aten::cumsum.out", "unblocks models": "bert", "tests": 3,
                      "models so far": 1, "tests so far": 3, "through": ""}


def test_leaderboard_and_models_page_use_the_full_blocking_sets(built):
    board = {r["operator"]: r for r in load(built, "builds/b3/missing.json")}
    assert board["aten::cumsum.out"]["models blocked"] == 2 and site_data.XSS_OP in board
    assert "only through the decomposition of" in board["aten::cumsum.out"]
    assert "only through the decomposition of" not in load(built, "builds/b1/missing.json")[0]  # no census: as before
    models = {r["model"]: r for r in load(built, "tables/models-b3.json")}
    assert models["gpt2"]["blocking operators"] == f"{site_data.XSS_OP} aten::add.out aten::cumsum.out"
    assert models["bert"]["blocking operators"] == "aten::cumsum.out"


def test_site_leaderboard_with_a_census_equals_the_one_off_one_and_the_raw_rows(built):
    with open_store(str(built["db"])) as store:
        first = read_ops.first_missing_builds(store)
        tests = TestTable.read(store, READS)
        for build in ("b2", "b3"):
            census = impact.census_models(store, build)
            data = BuildData.read(store, READS, build, tests)[0]
            # the site's read of the whole build and a one-off call's missing-operator rows only
            board = data.leaderboard(READS, first, census)
            assert census and board == impact.leaderboard(store, build)
            # against a count here: tests from the raw rows, models hit there plus the census's
            blocked, hit = Counter(), defaultdict(set)
            for o in read_rows.iter_outcomes(store, build):
                if (o.outcome, o.kind) == ("skip_backend", "missing_op") and o.missing_op:
                    if o.suite == "models":
                        hit[o.missing_op].add(o.op)
                    else:
                        blocked[o.missing_op] += 1
            ops = blocked.keys() | hit.keys() | census.keys()
            expected = {op: (blocked[op], sorted(hit[op] | set(census.get(op, {}).get("models", ())))) for op in ops}
            assert {e["op"]: (e["tests"], e["model_names"]) for e in board} == expected
            assert [e["op"] for e in board] == sorted(ops, key=lambda op: (-expected[op][0], -len(expected[op][1]), op))


def test_everything_from_the_store_is_escaped(built):
    html = (built["out"] / "builds/b3/census.html").read_text()
    assert "<b>x</b>" not in html and "aten::&lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>x</b>" not in (built["out"] / "models.html").read_text()


def test_chart_has_one_column_per_census_build_so_far(built):
    b2 = (built["out"] / "builds/b2/census.html").read_text()
    b3 = (built["out"] / "builds/b3/census.html").read_text()
    assert b2.count('<a href="../b2/census.html"') == 1 and '../b3/census.html' not in b2
    assert b3.count('census.html" aria-label=') == 2


def test_a_census_taken_later_renders_the_page_on_the_next_run(tmp_path):
    out = tmp_path / "site"
    with open_store(str(tmp_path / "s.db")) as store:
        site_data.write_store(store)
        build_site(store, out)
        assert not (out / "builds/b1/census.html").exists()
        from torchconform.census import records
        records.save(store, "b1", Census("refdev", "PrivateUse1", "2.13.0", site_data.census_rows(2)))
        build_site(store, out)
    assert (out / "builds/b1/census.html").is_file()
