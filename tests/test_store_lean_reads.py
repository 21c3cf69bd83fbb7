"""The fast read and write paths agree with the plain ones: latest_rows, the
site's one-pass derivations, the gate's record loading, the store's id shortcut
for new tests and the streaming JUnit reader's bookkeeping."""
import pytest

from array_reads import store_matrix
from pg import db_url, pg_server, store  # noqa: F401  (fixtures)
from test_store_queries import O, every_kind, store_build
from torchconform.ci.gate import index
from torchconform.ci.records import value_of
from torchconform.ci.pipeline import load_records
from torchconform.db import read_rows
from torchconform.db.ingest import JunitReader, ingest
from torchconform.errors import UserError


def two_builds(store):
    """b1 and b2 with changes, a rerun that supersedes, a model-zoo row and a missing test."""
    old = every_kind() + [O("models::hf/bert::eval", "skip_backend", suite="models", kind="missing_op",
                            missing_op="aten::cat.out", op="hf/bert", variant="eval"),
                          O("t::gone", "pass", op="gone")]
    store_build(store, "b1", old)
    new = [o for o in every_kind() if o.test_id != "t::gone"]
    new[0] = O("t::add_f32", "fail", op="add", variant="forward", dtype="float32", message="AssertionError: drift")
    new[4] = O("t::div", "pass", op="div")
    new.append(O("models::hf/bert::eval", "skip_backend", suite="models", kind="missing_op",
                 missing_op="aten::sort.values", op="hf/bert", variant="eval"))
    new.append(O("t::brand_new", "skip_backend", kind="missing_op", missing_op="aten::new_op", op="new"))
    run = store_build(store, "b2", new)
    # a gate rerun: attempt 2 of t::mul_f32 passes and must win everywhere
    store.add_outcomes(run, [O("t::mul_f32", "pass", op="mul", variant="gradient", dtype="float32", attempt=2)])


def test_latest_rows_columns_latest_order_and_errors(store):
    two_builds(store)
    rows = list(read_rows.latest_rows(store, "b2", ("test_id", "outcome", "attempt"), order=True))
    ids = [r.test_id for r in rows]
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    by_id = {r.test_id: r for r in rows}
    assert (by_id["t::mul_f32"].outcome, by_id["t::mul_f32"].attempt) == ("pass", 2)
    assert "t::gone" not in by_id
    # only result columns: no tests join, same rows
    assert len(list(read_rows.latest_rows(store, "b2", ("test_pk", "outcome")))) == len(rows)
    with pytest.raises(UserError, match="unknown build"):
        read_rows.latest_rows(store, "nope")          # raises on the call, not on first next()
    with pytest.raises(ValueError, match="unknown columns"):
        read_rows.latest_rows(store, "b2", ("bogus",))


def test_gate_records_equal_the_outcome_path(store):
    two_builds(store)
    for build in ("b1", "b2"):
        fast = load_records(store, build)
        slow = index(read_rows.iter_outcomes(store, build))
        assert dict(fast) == slow and sorted(fast) == sorted(slow)
        # grouped by what they say: one value per distinct (outcome, kind, ..., message)
        assert {fast.value(t) for t in fast} == {value_of(r) for r in slow.values()}
        assert fast.errors == {t: (r["max_abs_err"], r["max_rel_err"]) for t, r in slow.items()
                               if r["max_abs_err"] is not None}
    assert load_records(store, "b2")["t::add_f16"]["fallback_ops"] == ["aten::add.out", "aten::mul.Tensor"]


def test_op_matrix_can_leave_the_model_zoo_out(store):
    two_builds(store)
    # every operator the build's tests name; the matrix (its one road, the site's arrays) leaves the zoo out
    every = {o.op for o in read_rows.iter_outcomes(store, "b2") if o.op}
    ops_only = {r["op"] for r in store_matrix(store, "b2")}
    assert "hf/bert" in every and "hf/bert" not in ops_only and ops_only == every - {"hf/bert"}


def _stored_ids(store, build):
    return {r.test_pk: r.test_id for r in read_rows.latest_rows(store, build, ("test_pk", "test_id"))}


def test_new_test_ids_are_right_whether_all_new_some_known_or_all_known(store):
    from torchconform.db.opening import open_store

    store_build(store, "a", [O(f"t::{i}", "pass") for i in range(50)])
    # half known, half new: the shortcut must not apply
    store_build(store, "b", [O(f"t::{i}", "fail") for i in range(25, 75)])
    # a second Store object (empty id cache) on the same database: all new again, after known ids
    other = open_store(store.url)
    try:
        store_build(other, "c", [O(f"u::{i}", "pass") for i in range(30)] + [O("t::3", "xfail")])
    finally:
        other.close()
    for build, expected in (("a", 50), ("b", 50), ("c", 31)):
        rows = list(read_rows.latest_rows(store, build, ("test_pk", "test_id", "outcome")))
        assert len(rows) == expected
    # test_pk -> test_id agrees with the tests table for every stored result
    from sqlalchemy import select
    from torchconform.db.models import results, tests
    with store.read() as conn:
        pairs = conn.execute(select(results.c.test_pk, tests.c.test_id)
                             .select_from(results.join(tests, tests.c.id == results.c.test_pk))).all()
        n_tests = conn.execute(select(tests.c.id)).all()
    assert len({tid for _, tid in pairs}) == len(n_tests) == 105
    b = {tid: r.outcome for r in read_rows.latest_rows(store, "b", ("test_id", "outcome")) for tid in [r.test_id]}
    assert b["t::30"] == "fail" and b["t::74"] == "fail" and "t::0" not in b
    assert _stored_ids(store, "a").keys() & _stored_ids(store, "b").keys()   # shared tests share ids


def test_reader_keeps_suite_properties_apart_from_test_properties(tmp_path, store):
    xml = tmp_path / "nested.xml"
    xml.write_text(
        '<?xml version="1.0"?><testsuites>'
        '<testsuite name="outer"><properties><property name="tc.run.selection" value="quick"/></properties>'
        '<testsuite name="inner">'
        '<testcase classname="m.C" name="t1"><properties><property name="tc.run.device" value="WRONG"/>'
        '<property name="note">x</property></properties></testcase>'
        '</testsuite>'
        '<testcase classname="m.C" name="t2"><skipped message="nope"/></testcase>'
        '</testsuite></testsuites>')
    reader = JunitReader(str(xml))
    outcomes = list(reader.outcomes())
    assert [o.test_id for o in outcomes] == ["m.C::t1", "m.C::t2"]
    assert [o.suite for o in outcomes] == ["outer", "outer"]
    assert reader.run_properties == {"selection": "quick"}
    assert ingest(store, [str(xml)], "n1")["outcomes"] == 2
    bad = tmp_path / "bad.xml"
    bad.write_text('<?xml version="1.0"?><property name="x" value="y"/>')
    with pytest.raises(UserError, match="not a JUnit XML report"):
        list(JunitReader(str(bad)).outcomes())


def test_latest_rows_by_id_range_reads_only_the_builds_rows(store, monkeypatch):
    """A build stored in one piece is read by its id range (SQLite); one whose results
    interleave with another build's, sparsely, by its index: both give the same rows."""
    def stored(name, outcomes):
        store.ensure_build(name)
        return store.start_run(name, suite="ops")

    a, b, c = stored("a", None), stored("b", None), stored("c", None)
    for i in range(40):  # a and b written in turns: each one's ids are every other id
        store.add_outcomes(a, [O(f"t::x{i}", "pass", op="x")])
        store.add_outcomes(b, [O(f"t::x{i}", "fail" if i % 3 else "pass", op="x", message=f"m{i}")])
    store.add_outcomes(c, [O(f"t::x{i}", "skip_backend", kind="missing_op", missing_op="aten::x", op="x")
                           for i in range(40)])
    cols = ("test_id", "outcome", "message", "missing_op")

    def read(build):
        return sorted(tuple(r) for r in read_rows.latest_rows(store, build, cols))

    expect = {"a": [(f"t::x{i}", "pass", "", "") for i in range(40)],
              "b": [(f"t::x{i}", "fail" if i % 3 else "pass", f"m{i}", "") for i in range(40)],
              "c": [(f"t::x{i}", "skip_backend", "", "aten::x") for i in range(40)]}
    for name in "abc":
        assert read(name) == sorted(expect[name])
    # the same with the range path off (a span factor no build meets): nothing changes
    monkeypatch.setattr(read_rows, "DENSE_SPAN", 0)
    for name in "abc":
        assert read(name) == sorted(expect[name])


def test_plain_rows_join_what_results_say_in_python_and_equal_the_sql_join(store):
    two_builds(store)
    cols = ("test_id", "outcome", "kind", "missing_op", "fallback_ops", "message", "stored_repro", "duration")
    for build in ("b1", "b2"):
        joined = [tuple(r) for r in read_rows.latest_rows(store, build, cols, order=True)]
        assert list(read_rows.latest_rows(store, build, cols, order=True, plain=True)) == joined
        assert [r[0] for r in read_rows.latest_rows(store, build, ("outcome",), plain=True)] == \
            [r.outcome for r in read_rows.latest_rows(store, build, ("outcome",))]
    # build_values read before a writer stored a new value: the value is still found
    with store.write() as conn:
        conn.exec_driver_sql("DELETE FROM build_values")
    assert list(read_rows.latest_rows(store, "b2", cols, order=True, plain=True)) == \
        [tuple(r) for r in read_rows.latest_rows(store, "b2", cols, order=True)]
