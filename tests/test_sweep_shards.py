"""Shards: deterministic, disjoint, complete, balanced by earlier durations."""
import io

import pytest

from torchconform.core.outcome import Outcome
from torchconform.db.opening import open_store
from torchconform.errors import UserError
from torchconform.sweep import history, shards
from torchconform.sweep.progress import Progress

ITEMS = [f"hf/m{i:02d}" for i in range(10)]


def test_shards_partition_the_selection_deterministically():
    split = shards.split(list(reversed(ITEMS)), 3)
    assert sorted(sum(split, [])) == ITEMS
    assert split == shards.split(ITEMS, 3)
    assert sorted(len(s) for s in split) == [3, 3, 4]  # no history: balanced by count


def test_shards_balance_by_durations():
    durations = {i: 2.0 for i in ITEMS} | {"hf/m00": 20.0}
    split = shards.split(ITEMS, 2, durations)
    assert split == [["hf/m00"], ITEMS[1:]]  # one long model weighs as much as nine short ones
    # a model no earlier build timed weighs the median of the known ones
    del durations["hf/m05"]
    assert shards.split(ITEMS, 2, durations) == [["hf/m00"], ITEMS[1:]]


def test_bad_shard_arguments_are_user_errors():
    with pytest.raises(UserError, match="--shard 2 is out of range"):
        shards.select(ITEMS, 2, 2)
    with pytest.raises(UserError, match="at least 1"):
        shards.select(ITEMS, 0, 0)


def _outcome(model, variant, seconds):
    return Outcome(test_id=f"models::{model}::{variant}", outcome="pass", suite="models", op=model,
                   variant=variant, duration=seconds)


def test_durations_come_from_earlier_builds_not_the_current_one(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        for build, seconds in (("old", 2.0), ("current", 100.0)):
            store.ensure_build(build)
            run = store.start_run(build, suite="models")
            store.add_outcomes(run, [_outcome("hf/a", "eval", seconds), _outcome("hf/a", "train", seconds),
                                     _outcome("hf/b", "eval", 1.0)])
        per_model = history.per_model(history.earlier_durations(store, "models", exclude_build="current"))
        assert per_model == {"hf/a": 4.0, "hf/b": 1.0}
        assert history.stored_test_ids(store, "current", "models") == {
            "models::hf/a::eval", "models::hf/a::train", "models::hf/b::eval"}
    finally:
        store.close()


def test_progress_line_counts_outcomes_and_estimates_time():
    out = io.StringIO()
    p = Progress(4, stream=out, interval=0)
    p.update([_outcome("hf/a", "eval", 1), Outcome(test_id="x", outcome="crash")])
    line = out.getvalue()
    assert "1/4 models" in line and "pass 1" in line and "crash 1" in line and "ETA" in line
    assert p.eta() is not None and p.eta() >= 0


def test_a_resumed_shard_plans_the_same_models_after_newer_builds(tmp_path):
    """A shard's models are balanced by the history its build's first run saw: a build
    stored later (with other timings) does not move models between shards on --resume."""
    store = open_store(f"sqlite:///{tmp_path / 'r.db'}")
    ids = [f"hf/m{i}" for i in range(8)]
    try:
        def build(name, seconds_of):
            store.ensure_build(name)
            run = store.start_run(name, suite="models")
            store.add_outcomes(run, [_outcome(m, "eval", seconds_of(i)) for i, m in enumerate(ids)])

        def shard0():
            per_model = history.per_model(history.earlier_durations(store, "models", exclude_build="current"))
            return shards.select(ids, 2, 0, per_model)

        build("old", lambda i: float(i + 1))
        build("current", lambda i: 1.0)         # the sweep being resumed
        first = shard0()
        build("newer", lambda i: float(100 - 10 * i) if i % 2 else 0.5)   # other timings, stored later
        assert shard0() == first
        # a build not stored yet (a first run) balances by the newest history
        per_model = history.per_model(history.earlier_durations(store, "models", exclude_build="fresh"))
        assert per_model["hf/m1"] == (2.0 + 1.0 + 90.0) / 3
    finally:
        store.close()
