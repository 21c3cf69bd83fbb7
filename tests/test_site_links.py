"""Every link of a generated site leads somewhere, also on a store past ``--full-builds``
(retention.py): the crawl follows every href/src of every page, the data files the pages'
scripts are configured to load, and the anchors; then the retention rule itself: which builds
keep their detail pages, what a retired build keeps, how an incremental run removes what
retired, and ``--full-builds`` checked before anything is written."""
import html
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "site"))
import site_data  # noqa: E402
import site_files  # noqa: E402

from torchconform.dashboard import build_site, retention  # noqa: E402
from torchconform.dashboard.reads import READS  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402
from torchconform.errors import UserError  # noqa: E402

_STAMP = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC")
# attributes that load or lead somewhere; SVG trend columns are <a href> too
_LINK = re.compile(r'<(?:a|link|script|img)\b[^>]*?\b(?:href|src)="([^"]*)"', re.S)
_CONFIG = re.compile(r"TC\.(\w+) = (\{.*?\});", re.S)


def _ids(page_html: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', page_html))


def crawl(out: Path) -> list[str]:
    """Every broken link of the site under ``out``: 'page -> target (why)'."""
    out = Path(out)
    broken, checked = [], 0
    pages = {p: p.read_text(encoding="utf-8") for p in out.rglob("*.html")}
    for page, text in pages.items():
        for raw in _LINK.findall(text):
            href = html.unescape(raw)
            if href.startswith(("http://", "https://", "mailto:")) or href in ("#", ""):
                continue       # a base URL permalink; a download the page makes itself
            path, _, fragment = href.partition("#")
            target = (page.parent / unquote(path)).resolve() if path else page
            checked += 1
            if not target.is_file():
                broken.append(f"{page.relative_to(out)} -> {href} (no such file)")
            elif fragment and "=" not in fragment and target.suffix == ".html":
                # an anchor must name an element (a #key=value hash is the page's own state)
                if unquote(fragment) not in _ids(pages.get(target, target.read_text(encoding="utf-8"))):
                    broken.append(f"{page.relative_to(out)} -> {href} (no such anchor)")
        # what the page's scripts are set up to load: data files, and the builds the search links
        root = page.parent.joinpath(*[".."] * len(page.relative_to(out).parts[:-1]))
        for name, literal in _CONFIG.findall(text):
            config = json.loads(literal)
            wanted = []
            if "src" in config:
                wanted.append(page.parent / config["src"])
            if name == "failuresConfig":
                wanted.append(root / f"data/failures/{config['slug']}/index.js")
                wanted.append(root / f"data/builds/{config['slug']}.js")
            for b in config.get("builds", []):   # the search page: history rows link each build
                wanted += [root / f"builds/{b['slug']}/index.html", root / f"data/builds/{b['slug']}.js"]
            for w in wanted:
                checked += 1
                if not w.resolve().is_file():
                    broken.append(f"{page.relative_to(out)} -> {w} (loaded by TC.{name})")
    assert checked > 20, "the crawl found next to nothing to follow"
    return broken


def _files(out: Path) -> dict:
    return {str(f.relative_to(out)): _STAMP.sub(b"TS", f.read_bytes())
            for f in sorted(Path(out).rglob("*")) if f.is_file() and f.name != ".torchconform-site"}


def _add_build(store, name: str, version: int = 3) -> None:
    """One more build of the fixture's main series."""
    store.ensure_build(name, branch="main", device="refdev", backend="refdev", profile="young-backend",
                       torch_version="2.13.0", commit=f"{version:07x}")
    run = store.start_run(name, suite="ops", selection="fixture", host="test")
    store.add_outcomes(run, site_data.outcomes_for(version))
    store.finish_run(run, 0)


class Counting:
    """The query module, recording which builds were read (latest_rows)."""

    def __init__(self):
        self.read = []

    def __getattr__(self, name):
        fn = getattr(READS, name)
        if name != "latest_rows":
            return fn
        return lambda store, build, *a, **kw: self.read.append(build) or fn(store, build, *a, **kw)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    db = tmp_path_factory.mktemp("links") / "store.db"
    with open_store(str(db)) as store:
        site_data.write_store(store)
        site_data.write_census(store)
    return db


def test_a_site_with_every_page_has_no_broken_link(store_path, tmp_path):
    build_site(str(store_path), tmp_path / "all")
    assert crawl(tmp_path / "all") == []


def test_the_crawl_sees_a_broken_link(store_path, tmp_path):
    build_site(str(store_path), tmp_path / "s")
    (tmp_path / "s/builds/b2/evaluation.html").unlink()        # b3's evaluation page links it
    (tmp_path / "s/data/matrix/b3.js").unlink()                # b3's matrix page loads it
    page = tmp_path / "s/builds/b3/index.html"
    page.write_text(page.read_text().replace('href="#failures"', 'href="#nowhere"'))
    broken = crawl(tmp_path / "s")
    assert any("builds/b3/evaluation.html -> ../../builds/b2/evaluation.html" in b for b in broken)
    assert any("matrix/b3.js (loaded by TC.matrixData)" in b for b in broken)
    assert any("#nowhere (no such anchor)" in b for b in broken)


def test_a_retained_store_has_no_broken_link_and_says_what_it_retired(store_path, tmp_path):
    out = tmp_path / "one"
    build_site(str(store_path), out, full_builds=1)
    assert crawl(out) == []
    # the newest build, other-1, and the latest of main, b3, keep every page; b1 and b2 are past the window
    for slug in ("b3", "other-1"):
        assert (out / f"builds/{slug}/matrix.html").is_file() and (out / f"data/failures/{slug}/index.js").is_file()
    for slug in ("b1", "b2"):
        assert sorted(p.name for p in (out / "builds" / slug).iterdir() if p.suffix == ".html") == \
            sorted(["clusters.html", "evaluation.html", "index.html"] + (["census.html"] if slug == "b2" else []))
        for data in (f"data/builds/{slug}.js", f"data/matrix/{slug}.js", f"data/failures/{slug}", f"data/diff/{slug}.js"):
            assert not (out / data).exists(), data
        page = (out / f"builds/{slug}/index.html").read_text()
        assert "torchconform site --full-builds 1" in page and "larger <code>--full-builds</code>" in page
        assert 'href="matrix.html"' not in page and "failures.js" not in page
        assert "Breakdown" in page and "Per suite" in page      # what a retired build keeps
    # the home page keeps every build's row and trend column, and says how to get the pages back
    home = (out / "index.html").read_text()
    assert 'href="builds/b1/index.html"' in home and "--full-builds 4</code> into the same folder" in home
    rows = json.loads((out / "tables/builds.json").read_text())
    assert {r["build"]: r["pages"] for r in rows}["b1"].startswith("breakdown only")
    # the search has the full builds only; b3's diff against its retired baseline is there
    search = (out / "search.html").read_text()
    assert '"slug":"b3"' in search and '"slug":"b2"' not in search
    assert site_files.diff_records(out, "b3", "regressions")[0]["test id"] == site_data.REGRESSED
    # the leaderboard's history still names the first build an operator went missing in
    board = json.loads((out / "builds/b3/missing.json").read_text())
    assert board[0]["first build seen"] == "b1"


def test_clusters_new_since_a_retired_baseline(store_path, tmp_path):
    build_site(str(store_path), tmp_path / "all")
    build_site(str(store_path), tmp_path / "one", full_builds=1)
    # b3's clusters compared with b2's although b2 has no pages: the same answer as with them
    assert [(r["signature"], r["new since baseline"]) for r in
            json.loads((tmp_path / "one/builds/b3/clusters.json").read_text())] == \
        [(r["signature"], r["new since baseline"]) for r in json.loads((tmp_path / "all/builds/b3/clusters.json").read_text())]


def test_an_incremental_run_removes_what_retired_and_equals_a_fresh_one(store_path, tmp_path):
    db, out = tmp_path / "s.db", tmp_path / "site"
    db.write_bytes(store_path.read_bytes())
    with open_store(str(db)) as store:
        build_site(store, out, full_builds=2)        # b3 and other-1 full
        assert (out / "builds/b3/matrix.html").is_file()
        _add_build(store, "b4")
        q = Counting()
        build_site(store, out, full_builds=2, queries=q)   # the nightly run: b3 drops out of the window
        assert sorted(q.read) == ["b3", "b3", "b4"]        # b3 again for its small page and as b4's baseline
        for gone in ("builds/b3/matrix.html", "builds/b3/diff.html", "data/matrix/b3.js", "data/builds/b3.js",
                     "data/failures/b3", "data/diff/b3.js", "builds/b3/missing.html"):
            assert not (out / gone).exists(), gone
        assert crawl(out) == []
        assert "torchconform site --full-builds 2" in (out / "builds/b3/index.html").read_text()
        build_site(store, tmp_path / "fresh", full_builds=2)
        assert _files(out) == _files(tmp_path / "fresh")   # the same site as from an empty folder
        # a larger window brings b3's pages back, into the same folder
        build_site(store, out, full_builds=5)
        assert (out / "builds/b3/matrix.html").is_file() and (out / "data/failures/b3/index.js").is_file()
        assert crawl(out) == []


def test_the_window_and_the_latest_of_each_series():
    from torchconform.dashboard.model import BuildInfo
    from torchconform.db.series import Series

    main, npu = Series("refdev", "p", "main", "ops"), Series("npu", "p", "main", "ops")
    builds = [BuildInfo(f"b{i}", f"b{i}", "", series=main) for i in range(5)]
    builds.insert(1, BuildInfo("npu-1", "npu-1", "", series=npu))      # a series that stopped early
    retention.choose(builds, 2)
    assert [b.name for b in builds if b.full] == ["npu-1", "b3", "b4"]
    retention.choose(builds, 30)
    assert all(b.full for b in builds)


@pytest.mark.parametrize("value", [0, -3, "0", "abc", "2.5", "", True])
def test_full_builds_must_be_a_positive_integer(value, tmp_path):
    with pytest.raises(UserError, match="--full-builds .* positive whole number.* e.g. --full-builds 30"):
        build_site(str(tmp_path / "none.db"), tmp_path / "s", full_builds=value)
    assert not (tmp_path / "s").exists() and not (tmp_path / "none.db").exists()
    assert retention.checked("7") == 7 and retention.checked(1) == 1


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_cli_full_builds_error_is_one_line_and_writes_nothing(store_path, tmp_path, value):
    r = subprocess.run([sys.executable, "-m", "torchconform", "site", "--db", str(store_path), "--out",
                        str(tmp_path / "s"), f"--full-builds={value}"], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--full-builds" in r.stderr and "e.g. --full-builds 30" in r.stderr
    assert not (tmp_path / "s").exists()


def test_cli_takes_full_builds(store_path, tmp_path):
    r = subprocess.run([sys.executable, "-m", "torchconform", "site", "--db", str(store_path), "--out",
                        str(tmp_path / "s"), "--full-builds", "2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "--full-builds 2" in (tmp_path / "s/builds/b1/index.html").read_text()
    assert (tmp_path / "s/builds/b3/matrix.html").is_file() and not (tmp_path / "s/builds/b1/matrix.html").exists()
