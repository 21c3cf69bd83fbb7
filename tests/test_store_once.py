"""db.once: writers that may run twice store each test of a build once; writes retry."""
import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from torchconform.core.outcome import FAIL, PASS, Outcome
from torchconform.db import once
from torchconform.db.opening import open_store


def _outcome(name, outcome=PASS, message=""):
    return Outcome(test_id=f"models::m::{name}", suite="models", op="m", variant=name, name=name,
                   outcome=outcome, message=message, device="refdev")


def test_second_writer_of_the_same_tests_stores_nothing_and_reads_back_the_first(tmp_path):
    store = open_store(str(tmp_path / "s.db"))
    store.ensure_build("b")
    run = store.start_run("b", suite="models")
    stored, already = once.add_outcomes_once(store, run, [_outcome("eval")])
    assert [o.test_id for o in stored] == ["models::m::eval"] and already == []
    # a rerun (its node died after the write) and the driver's crash record for it
    stored, already = once.add_outcomes_once(store, run, [_outcome("eval", FAIL, "crash"), _outcome("train")])
    assert [o.variant for o in stored] == ["train"]
    assert [(o.variant, o.outcome) for o in already] == [("eval", PASS)]
    with store.read() as conn:
        n = conn.exec_driver_sql("SELECT count(*) FROM results").scalar_one()
    assert n == 2
    # a second run of the same build sees the first run's results too
    run2 = store.start_run("b", suite="models")
    stored, already = once.add_outcomes_once(store, run2, [_outcome("train", FAIL)])
    assert stored == [] and already[0].outcome == PASS
    store.close()


def test_retrying_repeats_transient_failures_only():
    calls, pauses = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise OperationalError("INSERT", {}, Exception("server closed the connection unexpectedly"))
        return "ok"

    assert once.retrying(flaky, pauses=(0.1, 0.2, 0.4), sleep=pauses.append) == "ok"
    assert len(calls) == 3 and pauses == [0.1, 0.2]

    def broken():
        raise IntegrityError("INSERT", {}, Exception("UNIQUE constraint failed"))

    with pytest.raises(IntegrityError):
        once.retrying(broken, pauses=(0.1,), sleep=pauses.append)
    assert pauses == [0.1, 0.2]  # no pause: a broken statement is not retried

    def always_down():
        raise OperationalError("INSERT", {}, Exception("could not connect"))

    with pytest.raises(OperationalError):
        once.retrying(always_down, pauses=(0.1, 0.2), sleep=lambda s: None)
