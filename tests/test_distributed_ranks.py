"""The distributed suite when a rank fails or the device has no usable c10d backend
(issue 29): the rank that failed first is the test's outcome (its peers' "connection
closed" errors are consequences), c10d's "unsupported device type" is a missing c10d
backend, and a device without any c10d backend is skipped without starting ranks."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from torchconform.core.classify import classify_text
from torchconform.core.profile import load_profile

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "distributed"
REPO = HERE.parent
REFDEV_PROFILE = REPO / "skiplists" / "refdev" / "profile.yaml"
DIST_SUITE = REPO / "suites" / "distributed" / "test_distributed.py"

sys.path.insert(0, str(HERE / "fixtures" / "runner"))
from runner_support import by_name, child_env, run_pytest  # noqa: E402


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _backend_profile(tmp_path, c10d_backend: str) -> Path:
    """refdev's backend profile naming another c10d backend for the device."""
    text = REFDEV_PROFILE.read_text()
    assert "c10d_backend: refccl" in text
    path = tmp_path / f"refdev-{c10d_backend}.yaml"
    path.write_text(text.replace("c10d_backend: refccl", f"c10d_backend: {c10d_backend}"))
    return path


# -- the first failure in time ---------------------------------------------------------------
def test_a_missing_operator_on_rank_1_is_the_outcome(tmp_path):
    """Rank 1 lacks cos; rank 0, waiting for it in a collective, then fails with gloo's
    "Connection closed by peer": the test is rank 1's missing operator, at once."""
    from torchconform.suites.distributed import launch

    refdev_profile = tmp_path / "nocos.yaml"
    refdev_profile.write_text("name: nocos\ndescription: test profile\nmissing:\n  ops: [aten::cos]\n")
    pids = tmp_path / "pids"
    pids.mkdir()
    env = {"TORCHCONFORM_DEVICE": "refdev", "TORCHCONFORM_PROFILE": "refdev",
           "TORCHCONFORM_REFDEV_PROFILE": str(refdev_profile),
           "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])}
    # a timeout no start-up on a loaded machine reaches: had the launch waited for it, the
    # failure would be a timeout, not rank 1's error (the verdict, whatever the machine's speed)
    with pytest.raises(launch.RankFailure) as info:
        launch.run_ranks("fx_rank_programs:missing_op_on_rank_1", {"pids": str(pids)}, size=2, timeout=600,
                         extra_env=env)
    text = str(info.value)
    assert text.startswith("rank 1 of 2: NotImplementedError: Could not run 'aten::cos"), text[:300]
    verdict = classify_text(f"AssertionError: {text}", load_profile("refdev"))
    assert (verdict.outcome, verdict.kind, verdict.missing_op) == ("skip_backend", "missing_op", "aten::cos.out")
    started = [int(p.read_text()) for p in pids.iterdir()]
    assert len(started) == 2 and not [p for p in started if _alive(p)]


def test_first_failure_in_time_wins():
    """Reports and deaths are ordered by when they happened, not by rank."""
    from torchconform.suites.distributed.launch import Rank, first_failure

    def rank(n, report=None, died_at=None):
        r = Rank(n, proc=None, result_path="", stderr_path="", report=report)
        r.died_at = died_at
        return r

    consequence = rank(0, {"status": "error", "error": "Connection closed by peer", "failed_at": 10.2})
    cause = rank(1, {"status": "error", "error": "Could not run 'aten::cos'", "failed_at": 10.1})
    ok = rank(2, {"status": "ok", "values": {}})
    dead = rank(3, died_at=10.0)
    assert ok.failed_at() is None and rank(4).failed_at() is None
    assert first_failure([consequence, cause]) is cause
    assert first_failure([consequence, cause, dead]) is dead
    # a death seen alive last at the moment of a peer's error: the death explains the error
    assert first_failure([consequence, rank(5, died_at=10.2)]).rank == 5


def test_a_peer_gone_error_never_outranks_a_death_whatever_the_clocks_say():
    """Under load the launcher may still see a dying rank alive after its peer reported the
    closed socket (seen in a loaded make test): the death is still the cause."""
    from torchconform.suites.distributed.launch import Rank, first_failure

    def rank(n, report=None, died_at=None):
        r = Rank(n, proc=None, result_path="", stderr_path="", report=report)
        r.died_at = died_at
        return r

    gloo = rank(0, {"status": "error", "failed_at": 10.0, "error": "RuntimeError: [/w/third_party/gloo/gloo/transport/"
                    "tcp/pair.cc:537] Read error [127.0.0.1]:45321: Connection reset by peer"})
    late_death = rank(1, died_at=10.5)
    assert first_failure([gloo, late_death]) is late_death
    # a rank's own error before a death is still the cause: only the peer-gone words yield
    cause = rank(2, {"status": "error", "error": "Could not run 'aten::cos'", "failed_at": 10.1})
    assert first_failure([cause, late_death]) is cause
    # without a death, a peer-gone error is reported as it is
    assert first_failure([gloo, cause]) is gloo


# -- c10d's words for a backend that cannot take the device's tensors ---------------------------
@pytest.mark.parametrize("said", [
    "RuntimeError: ProcessGroupGloo::allreduce: unsupported device type refdev",
    "RuntimeError: ProcessGroupGloo::allgather_coalesced: unsupported device type refdev",
    "RuntimeError: No backend type associated with device type refdev",
])
def test_unsupported_device_is_a_missing_c10d_backend(said):
    from torchconform.suites.distributed.rank import c10d_backend_words

    words = c10d_backend_words(f"{said}\nbuiltins.{said}", "refdev")
    assert words.startswith("torchconform missing c10d backend: refdev (") and said.split(": ", 1)[1] in words
    verdict = classify_text(f"AssertionError: rank 0 of 2: {words}\n{said}", load_profile("refdev"))
    assert (verdict.outcome, verdict.kind, verdict.missing_op) == ("skip_backend", "missing_c10d_backend", "refdev")
    # another device's complaint is not this device's gap
    assert c10d_backend_words(said, "neuron") == ""


def test_gloo_named_for_the_device_is_a_missing_c10d_backend(tmp_path):
    profile = _backend_profile(tmp_path, "gloo")
    args = [DIST_SUITE, "--tc-device", "refdev", "--tc-profile", profile, "-k", "all_reduce and c10d-float32"]
    _, _, outcomes = run_pytest(args, tmp_path, env=child_env(TORCHCONFORM_REFDEV_PROFILE="full"))
    got = by_name(outcomes)["test_collective_all_reduce[c10d-float32]"]
    assert (got.outcome, got.kind, got.missing_op) == ("skip_backend", "missing_c10d_backend", "refdev"), got.message
    assert "ProcessGroupGloo::allreduce: unsupported device type refdev" in got.message


# -- no c10d backend at all: decided once, no rank started -------------------------------------
def test_no_c10d_backend_skips_without_starting_ranks(tmp_path):
    profile = _backend_profile(tmp_path, "nonesuch")
    # a world size of 0 makes any rank start a user error: every test would be an error
    env = child_env(TORCHCONFORM_REFDEV_PROFILE="full", TORCHCONFORM_WORLD_SIZE="0")
    args = [DIST_SUITE, "--tc-device", "refdev", "--tc-profile", profile, "-k", "all_reduce or broadcast or ddp"]
    # (no wall-clock bound: that no rank started is what the world size of 0 shows, at any load)
    _, _, outcomes = run_pytest(args, tmp_path, env=env)
    assert len(outcomes) == 8, [o.test_id for o in outcomes]
    for o in outcomes:
        assert (o.outcome, o.kind, o.missing_op) == ("skip_backend", "missing_c10d_backend", "refdev"), o.message
        assert "the profile names 'nonesuch', which is not registered" in o.message
