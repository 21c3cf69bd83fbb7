"""Results that store what they say once (db/values.py): every query answers as before.

The oracle is tests/fixtures/store/answers_0007.json.gz: the answers of every query
(summary, summary_by, op_matrix, leaderboard, diff, test_history, flaky_tests,
iter_outcomes, export, drift, ...) that torchconform at schema 0007 gave on the
fixture store, and store_0007.db the store that version wrote (fixtures/store/encoding.py).
"""
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from pg import db_url, pg_server  # noqa: F401  (fixtures)
from torchconform.core.outcome import Outcome
from torchconform.db import migrate, read_builds, read_changes, read_rows, values
from torchconform.db.models import HEAD_REVISION
from torchconform.db.opening import make_engine, open_store
from torchconform.errors import UserError

FIXTURES = Path(__file__).parent / "fixtures" / "store"
sys.path.insert(0, str(FIXTURES))
import encoding  # noqa: E402


def _differences(got: dict, want: dict) -> list[str]:
    """The answer keys that differ (a readable failure instead of a 600 kB diff).  Mean
    durations agree to the microsecond: each stored one is rounded to it (db/values.duration_us)."""
    got, want = dict(got), dict(want)
    means = got.pop("earlier_durations"), want.pop("earlier_durations")
    if means[0] != pytest.approx(means[1], abs=2e-6):
        return ["earlier_durations"]
    keys = sorted(set(got) | set(want))
    return [k for k in keys if got.get(k) != want.get(k)]


def test_a_store_written_at_0007_upgrades_in_place_and_answers_as_0007_did(tmp_path, cli):
    db = tmp_path / "old.db"
    shutil.copy(FIXTURES / "store_0007.db", db)
    with pytest.raises(UserError, match=r"older schema \(0007_numeric_errors.*torchconform db upgrade"):
        open_store(str(db))
    code, out, err = cli("db", "upgrade", "--db", db)
    assert code == 0, err
    assert f"upgraded from 0007_numeric_errors to {HEAD_REVISION}" in out
    with open_store(str(db)) as store:
        got = encoding.answers(store)
        # and it goes on taking results: ids continue, values are found again
        run = store.start_run("nightly-3", suite="ops")
        store.add_outcomes(run, [Outcome("t::new", "pass", suite="ops", device="refdev:0", duration=0.5)])
        assert read_changes.test_history(store, "t::new")[0]["duration"] == 0.5
    want = encoding.golden()
    assert _differences(got, want) == []
    with sqlite3.connect(db) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(results)")}
        n_values, n_results = conn.execute(
            "SELECT (SELECT count(*) FROM result_values), count(*) FROM results").fetchone()
    assert "message" not in columns and "value_id" in columns and "duration_us" in columns
    # four builds of mostly unchanged results: far fewer values than results
    assert n_values < n_results / 2


def test_a_new_store_answers_as_0007_did(db_url):
    with open_store(db_url) as store:
        encoding.write_fixture(store)
        got = encoding.answers(store)
    assert _differences(got, encoding.golden()) == []


def test_downgrade_and_upgrade_again_keep_every_answer(db_url):
    from alembic import command

    with open_store(db_url) as store:
        encoding.write_fixture(store)
        before = encoding.answers(store)
    engine = make_engine(open_store(db_url, check_schema=False).url)
    with engine.begin() as conn:
        command.downgrade(migrate._config(conn), "0007_numeric_errors")
        # the wide table is back, with the values in place
        row = conn.exec_driver_sql("SELECT outcome, message FROM results WHERE kind = 'missing_op' "
                                   "ORDER BY id LIMIT 1").one()
        assert row[0] == "skip_backend" and "Could not run" in row[1]
        command.upgrade(migrate._config(conn), "head")
    engine.dispose()
    with open_store(db_url) as store:
        assert encoding.answers(store) == before
        run = store.start_run("nightly-0", suite="ops")   # the id sequences continue past the copies
        store.add_outcomes(run, [Outcome("t::later", "fail", message="boom")])
        assert read_changes.test_history(store, "t::later")[0]["message"] == "boom"


def test_builds_that_say_the_same_share_values(db_url):
    with open_store(db_url) as store:
        for b in ("a", "b"):
            store.ensure_build(b)
            run = store.start_run(b)
            store.add_outcomes(run, [Outcome(f"t::{i}", "fail" if i % 2 else "pass", message="not close" if i % 2 else "",
                                             duration=0.001 * i) for i in range(50)])
        with store.read() as conn:
            n_values = conn.exec_driver_sql("SELECT count(*) FROM result_values").scalar_one()
            pairs = conn.exec_driver_sql("SELECT count(*) FROM build_values").scalar_one()
        assert n_values == 2 and pairs == 4
        assert read_builds.summary(store, "b")["outcomes"]["fail"] == 25


def test_values_whose_digests_collide_stay_apart(tmp_path, monkeypatch):
    # every value gets the same first digest: each must still come back as itself
    real = values.digest
    monkeypatch.setattr(values, "digest", lambda value, salt=0: real(("same",), 0) if salt == 0 else real(value, salt))
    with open_store(str(tmp_path / "c.db")) as store:
        store.ensure_build("b")
        run = store.start_run("b")
        store.add_outcomes(run, [Outcome("t::1", "pass"), Outcome("t::2", "fail", message="x"),
                                 Outcome("t::3", "fail", message="y")])
        # a second store object (no cache) finds them again by probing
        store2 = open_store(str(tmp_path / "c.db"))
        run2 = store2.start_run("b")
        store2.add_outcomes(run2, [Outcome("t::4", "fail", message="y")])
        got = {o.test_id: (o.outcome, o.message) for o in read_rows.iter_outcomes(store2, "b")}
        store2.close()
    assert got == {"t::1": ("pass", ""), "t::2": ("fail", "x"), "t::3": ("fail", "y"), "t::4": ("fail", "y")}
    with sqlite3.connect(tmp_path / "c.db") as conn:
        assert conn.execute("SELECT count(*) FROM result_values").fetchone()[0] == 3


def test_durations_are_kept_to_the_microsecond(tmp_path):
    with open_store(str(tmp_path / "d.db")) as store:
        store.ensure_build("b")
        run = store.start_run("b")
        store.add_outcomes(run, [Outcome("t::a", "pass", duration=1.2345678), Outcome("t::b", "pass", duration=0.0)])
        got = {o.test_id: o.duration for o in read_rows.iter_outcomes(store, "b")}
    assert got == {"t::a": 1.234568, "t::b": 0.0}
