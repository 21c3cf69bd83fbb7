"""A narrowed or strict run is a series of its own (issue 33, 4d): ``gate --baseline latest``
of a whole run never takes a run of ``--ops``/``-k``/``--no-fallback`` as its baseline."""
from torchconform.ci.pipeline import resolve_baseline
from torchconform.db import read_builds
from torchconform.db.series import baselines, series_of
from torchconform.db.opening import open_store


def _row(name, scope="", complete=True):
    meta = {"backend_profile": "refdev"}
    if scope:
        meta["scope"] = scope
    return {"name": name, "device": "refdev", "branch": "main", "suite_set": "ops",
            "metadata": meta, "complete": complete}


def test_scope_is_part_of_the_series_and_only_shown_when_set():
    whole, narrow = series_of(_row("a")), series_of(_row("b", "ops=add,abs"))
    assert whole != narrow
    assert "scope" not in whole.as_dict() and "scope" not in whole.describe()
    assert narrow.as_dict()["scope"] == "ops=add,abs" and "scope ops=add,abs" in narrow.describe()


def test_a_whole_run_skips_narrowed_and_strict_builds_for_its_baseline():
    rows = [_row("full1"), _row("narrow", "ops=abs"), _row("strict", "strict"), _row("full2"),
            _row("narrow2", "ops=abs")]
    base = baselines(rows)
    assert base["full2"] == "full1"          # not 'strict' or 'narrow', made in between
    assert base["narrow2"] == "narrow"       # the same narrowing is the same series
    assert base["strict"] is None and base["full1"] is None


def test_latest_in_the_store_follows_the_recorded_scope(tmp_path):
    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        for name, scope in (("full1", ""), ("ops", "ops=abs"), ("full2", "")):
            meta = {"device": "refdev", "branch": "main", "backend_profile": "refdev"}
            if scope:
                meta["scope"] = scope
            store.ensure_build(name, **meta)
            run = store.start_run(name, suite="ops", selection="quick")
            store.finish_run(run, 0)
        rows = {b["name"]: b for b in read_builds.list_builds(store, series=True)}
        assert rows["ops"]["series"]["scope"] == "ops=abs"
        assert "scope" not in rows["full2"]["series"]
        assert resolve_baseline(store, "full2", "latest") == "full1"
