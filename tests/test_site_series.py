"""Builds that belong together (issue 18): series on the site and in the gate, trend labels,
xfail apart from xpass.  The store holds three series: main (refdev, young-backend, main,
ops), a second device, and a 6-test JUnit ingest on main's device, profile and branch but
another suite set, made after every build but the newest main one (fixtures/site/site_data.py)."""
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "site"))
import site_data  # noqa: E402

from torchconform.ci.pipeline import gate_build, resolve_baseline  # noqa: E402
from torchconform.dashboard import charts  # noqa: E402
from torchconform.dashboard.render import slugify  # noqa: E402
from torchconform.db import read_builds  # noqa: E402
from torchconform.db.series import Series, baselines, suite_set  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402
from torchconform.errors import UserError  # noqa: E402

MAIN, NPU, FOREIGN = site_data.SERIES_MAIN, site_data.SERIES_NPU, site_data.SERIES_FOREIGN


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return site_data.build_series_site(tmp_path_factory.mktemp("series"))


def slugs():
    taken: set[str] = set()
    return {name: slugify(name, taken) for name, _ in site_data.SERIES_CREATED}


def read(built, rel):
    return (built["out"] / rel).read_text(encoding="utf-8")


def cards(html):
    """Home page cards: [(series text, section html)] in page order."""
    return [(m.group(1), m.group(0)) for m in
            re.finditer(r'<section class="group"[^>]*data-series="([^"]*)".*?</section>', html, re.S)]


def columns(section):
    """A trend chart's columns: [(href, tooltip title, tick label or None)]."""
    out = []
    for m in re.finditer(r'<a href="([^"]+)"[^>]*class="col"><title>([^<]*)</title>(.*?)</a>', section, re.S):
        tick = re.search(r'class="axis tick"[^>]*>([^<]*)</text>', m.group(3))
        out.append((m.group(1), m.group(2), tick.group(1) if tick else None))
    return out


def test_series_rows_name_device_profile_branch_and_suite_set(built):
    with open_store(str(built["db"])) as store:
        rows = {r["name"]: r for r in read_builds.list_builds(store, series=True)}
    main = {"device": "refdev", "profile": "young-backend", "branch": "main", "suite_set": "ops"}
    assert [rows[n]["series"] for n in MAIN] == [main] * 3
    # the ingest shares device, profile and branch (its JUnit says so); its suite set differs
    assert rows[FOREIGN]["series"] == {**main, "suite_set": "pytest"}
    assert {rows[n]["series"]["device"] for n in NPU} == {"npu"}


def test_home_has_one_card_per_series_newest_first(built):
    html = read(built, "index.html")
    found = cards(html)
    assert [s for s, _ in found] == [
        "device refdev · profile young-backend · branch main · suites ops",
        "device refdev · profile young-backend · branch main · suites pytest",
        "device npu · profile npu · branch main · suites ops",
    ]
    s = slugs()
    main_card, foreign_card, npu_card = (c for _, c in found)
    # each card leads with its own newest build, not the newest build of the device and branch
    assert re.search(r'<h2[^>]*><a href="builds/([^/"]+)/index.html"', main_card).group(1) == s[MAIN[2]]
    assert re.search(r'<h2[^>]*><a href="builds/([^/"]+)/index.html"', foreign_card).group(1) == s[FOREIGN]
    # the main trend holds the main builds only, oldest first; the 6-test ingest is not in it
    assert [href for href, _, _ in columns(main_card)] == [f"builds/{s[n]}/index.html" for n in MAIN]
    assert s[FOREIGN] not in main_card and "suites ops" in main_card and "profile young-backend" in main_card
    # the ingest's card has one build: no trend, no diff, no baseline
    assert 'class="trend"' not in foreign_card and "diff.html" not in foreign_card
    assert "no baseline" in foreign_card and "6 outcomes" in foreign_card
    assert [href for href, _, _ in columns(npu_card)] == [f"builds/{s[n]}/index.html" for n in NPU]


def test_baselines_and_diffs_stay_within_a_series(built):
    s = slugs()
    diff = read(built, f"builds/{s[MAIN[2]]}/diff.html")
    assert f'builds/{s[MAIN[1]]}/index.html">{MAIN[1]}</a>' in diff
    assert "device refdev · profile young-backend · branch main · suites ops" in diff
    # nothing of the main series is reported absent: its baseline ran the same tests
    assert json.loads(read(built, f"builds/{s[MAIN[2]]}/diff-missing_tests.json")) == []
    # the foreign build has no baseline, hence no diff page; its first main neighbour neither
    assert not (built["out"] / f"builds/{s[FOREIGN]}/diff.html").exists()
    assert not (built["out"] / f"builds/{s[MAIN[0]]}/diff.html").exists()
    assert "no baseline" in read(built, f"builds/{s[FOREIGN]}/index.html")
    npu_diff = read(built, f"builds/{s[NPU[1]]}/diff.html")
    assert f'builds/{s[NPU[0]]}/index.html"' in npu_diff


def test_gate_latest_picks_the_previous_build_of_the_series(built):
    with open_store(str(built["db"])) as store:
        assert resolve_baseline(store, MAIN[2], "latest") == MAIN[1]
        assert resolve_baseline(store, MAIN[2], "latest:main") == MAIN[1]
        assert resolve_baseline(store, FOREIGN, "latest") is None
        assert resolve_baseline(store, NPU[1], "latest") == NPU[0]
        # the site's baselines are the gate's, build by build
        site = baselines(read_builds.list_builds(store, series=True))
        assert {n: resolve_baseline(store, n, "latest") for n, _ in site_data.SERIES_CREATED} == site
        run = gate_build(store, MAIN[2], baseline="latest", reruns=0)
        assert run.baseline == MAIN[1]
        assert "0 of 13 baseline tests absent" in run.markdown and run.result.rule("missing_tests").findings == []
        with pytest.raises(UserError, match="no baseline for build 'junit-upload-6'.*suites pytest"):
            gate_build(store, FOREIGN, baseline="latest", reruns=0)
        assert gate_build(store, FOREIGN, baseline="latest", reruns=0, allow_no_baseline=True).baseline is None


def test_trend_labels_tell_builds_apart_and_link_them(built):
    main_card = cards(read(built, "index.html"))[0][1]
    cols = columns(main_card)
    # the names share everything up to the time: the labels are the creation days
    assert [tick for _, _, tick in cols] == ["12-01", "12-02", "12-04"]
    for (href, title, _), name in zip(cols, MAIN):
        assert title.startswith(f"{name}, created 2026-12-") and href.endswith("/index.html")
        assert (built["out"] / href).is_file()
    # short distinct names are their own labels; long ones without times are cut in the middle
    assert charts.tick_labels(["b1", "b2", "b3"]) == ["b1", "b2", "b3"]
    assert charts.tick_labels(["nightly-41", "nightly-42"]) == ["41", "42"]
    long = ["refdev-young-backend-20261201T205501123456Z-1234", "refdev-young-backend-20261201T205501923456Z-5678"]
    cut = charts.tick_labels(long)
    assert len(set(cut)) == 2 and all(len(c) <= charts.TICK_LIMIT for c in cut)
    # builds made in the same second: the names' cut parts when they differ, else numbered times
    assert charts.tick_labels(long, ["2026-12-01 20:55:01"] * 2) == cut
    alike = ["a" * 8 + "X1" + "b" * 9, "a" * 8 + "X2" + "b" * 9]   # no separator: cut alike
    assert charts.tick_labels(alike, ["2026-12-01 20:55:01"] * 2) == ["20:55:01", "20:55:01 #2"]
    # the axis is in round steps: a 6-test chart is not labelled 0, 2, 3, 4, 6
    chart = str(charts.trend_chart([{"label": "x", "href": None, "breakdown": _breakdown(6)}]))
    assert re.findall(r'class="axis">([^<]*)<', chart) == ["0", "2", "4", "6"]


def _breakdown(passed):
    return {"build": "x", "total": passed,
            "outcomes": {o: 0 for o in ("pass", "pass_fallback", "fail", "error", "crash", "timeout",
                                        "skip_eligibility", "skip_backend", "xfail", "xpass")} | {"pass": passed},
            "backend_skip_kinds": {"missing_op": 0, "skiplist": 0, "unsupported_dtype": 0, "not_executed": 0},
            "missing_ops": []}


def test_xfail_and_xpass_apart_in_legend_and_bar(built):
    s = slugs()
    for html in (cards(read(built, "index.html"))[0][1], read(built, f"builds/{s[MAIN[2]]}/index.html")):
        assert "expected failure (xfail): <strong>2</strong>" in html
        assert "unexpected pass (xpass): <strong>1</strong>" in html
        assert re.search(r'fill="url\(#p-xpass\)"[^>]*><title>unexpected pass \(xpass\): 1 ', html)
        assert re.search(r'fill="url\(#p-xfail\)"[^>]*><title>expected failure \(xfail\): 2 ', html)
    assert ".c-xpass {" in read(built, "static/categories.css")


def test_names_from_the_store_are_escaped(built):
    for page in built["out"].rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "<img src=x" not in text, page
    home = read(built, "index.html")
    assert "npu-&lt;img src=x onerror=alert(9)&gt;-78" in home


def test_suite_set_rule():
    assert suite_set(["ops", "modules", "ops", "gate-rerun", ""]) == "modules+ops"
    assert suite_set(["ops"], [{"suite": "models", "shards": 2}, {"suite": "ops"}, "junk"]) == "models+ops"
    assert suite_set([]) == ""
    assert Series("d", "p", "b", "modules+ops").suites == ["modules", "ops"]
    rows = [{"name": "a", "device": "d", "branch": "main", "suite_set": "ops", "complete": True},
            {"name": "killed", "device": "d", "branch": "main", "suite_set": "ops", "complete": False},
            {"name": "f", "device": "d", "branch": "feature", "suite_set": "ops", "complete": True},
            {"name": "b", "device": "d", "branch": "main", "suite_set": "ops", "complete": True}]
    assert baselines(rows) == {"a": None, "killed": "a", "f": None, "b": "a"}
    assert baselines(rows, branch="main") == {"a": None, "killed": "a", "f": "a", "b": "a"}
