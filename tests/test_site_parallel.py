"""Rendering changed builds in worker processes gives the same site, byte for byte, as one process."""
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "site"))
import site_data  # noqa: E402

from torchconform.dashboard import build_site, parallel  # noqa: E402
from torchconform.dashboard.tables import _csv_cell, _csv_rows  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402

_STAMP = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC")


def _files(out: Path) -> dict:
    # the 'generated' minute may differ between runs; the manifest holds no page content
    return {str(f.relative_to(out)): _STAMP.sub(b"TS", f.read_bytes())
            for f in sorted(out.rglob("*")) if f.is_file() and f.name != ".torchconform-site"}


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    db = tmp_path_factory.mktemp("par") / "store.db"
    with open_store(str(db)) as store:
        site_data.write_store(store)
    return db


@pytest.mark.parametrize("workers", ["2", "3"])
def test_workers_write_the_same_site(store_path, tmp_path, monkeypatch, workers):
    monkeypatch.setenv("TORCHCONFORM_SITE_WORKERS", "1")
    build_site(str(store_path), tmp_path / "one")
    monkeypatch.setenv("TORCHCONFORM_SITE_WORKERS", workers)
    # split so that b3's baseline b2 is read by another worker: its diff comes from the store
    assert [[b for b in run] for run in parallel.split(["b1", "b2", "b3", "other-1"], 2)] == \
        [["b1", "b2"], ["b3", "other-1"]]
    with open_store(str(store_path)) as store:   # the worker processes really are used for this store
        assert parallel.worker_count(4, store.url, results=0) == int(workers)
    build_site(str(store_path), tmp_path / "many")
    one, many = _files(tmp_path / "one"), _files(tmp_path / "many")
    assert sorted(one) == sorted(many)
    assert [name for name in one if one[name] != many[name]] == []
    assert "builds/b3/diff.html" in many and b"Regressions" in many["builds/b3/diff.html"]


def test_workers_write_the_same_retained_site(store_path, tmp_path, monkeypatch):
    # b1 and b2 past --full-builds 1: small pages, dealt out among the workers beside b3 and other-1
    monkeypatch.setenv("TORCHCONFORM_SITE_WORKERS", "1")
    build_site(str(store_path), tmp_path / "one", full_builds=1)
    monkeypatch.setenv("TORCHCONFORM_SITE_WORKERS", "2")
    build_site(str(store_path), tmp_path / "many", full_builds=1)
    one, many = _files(tmp_path / "one"), _files(tmp_path / "many")
    assert sorted(one) == sorted(many) and [name for name in one if one[name] != many[name]] == []
    assert "builds/b1/matrix.html" not in many and b"--full-builds 1" in many["builds/b1/index.html"]


def test_runs_keep_full_builds_together_and_deal_out_the_retired():
    from types import SimpleNamespace as B

    builds = [B(name=f"r{i}", full=False) for i in range(3)] + [B(name=f"f{i}", full=True) for i in range(3)]
    runs = [[b.name for b in run] for run in parallel.runs_of(builds, 2)]
    assert runs == [["r1", "f0", "f1"], ["r0", "r2", "f2"]]
    assert [[b.name for b in run] for run in parallel.runs_of(builds[:3], 2)] == [["r1"], ["r0", "r2"]]


def test_worker_count_rules(monkeypatch):
    monkeypatch.delenv("TORCHCONFORM_SITE_WORKERS", raising=False)
    assert parallel.worker_count(5, "sqlite:////tmp/x.db", results=10) == 1          # small: not worth a fork
    assert parallel.worker_count(5, "sqlite://", results=10**7) == 1                  # in memory: cannot reopen
    assert parallel.worker_count(1, "sqlite:////tmp/x.db", results=10**7) == 1        # one build
    monkeypatch.setenv("TORCHCONFORM_SITE_WORKERS", "3")
    assert parallel.worker_count(5, "sqlite:////tmp/x.db", results=10) == 3
    assert parallel.worker_count(2, "sqlite:////tmp/x.db", results=10) == 2


def test_csv_rows_column_by_column_matches_cell_by_cell():
    rows = [["=cmd", 1, None, ["a", "b"], "plain", 2.5],
            ["ok", 2, "-x", ("c",), "also plain", None],
            ["fine", 3, "x", [], "+1", 0]]
    assert [list(r) for r in _csv_rows(rows)] == [[_csv_cell(v) for v in r] for r in rows]
    numbers = [[1, 2.0, None], [3, 4.0, True]]
    assert _csv_rows(numbers) is numbers     # nothing to change: passed through
    ragged = [["=a"], ["b", "-c"]]
    assert _csv_rows(ragged) == [["'=a"], ["b", "'-c"]]
