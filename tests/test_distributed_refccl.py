"""refdev's c10d backend, refccl, hands back Work objects c10d can wait on: on the
young-backend profile (synchronous collectives) send/recv used to hang until the rank
timeout, because refccl waited on gloo's send/recv Work itself and c10d's wrappers then
waited on that same Work again; and a coalesced form of more than one tensor used a
function torch does not have."""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "distributed"
REPO = HERE.parent
DIST_SUITE = REPO / "suites" / "distributed" / "test_distributed.py"

sys.path.insert(0, str(HERE / "fixtures" / "runner"))
from runner_support import by_name, child_env, run_pytest  # noqa: E402

# a hang ends the test as a timeout; the bound counts the ranks' start-up (import torch, the
# rendezvous) too, so it leaves room for a loaded machine: a verdict must not depend on its speed
RANK_TIMEOUT = 120


def _ranks(program: str, profile: str) -> list[dict]:
    from torchconform.suites.distributed import launch

    env = {"TORCHCONFORM_DEVICE": "refdev", "TORCHCONFORM_PROFILE": "refdev", "TORCHCONFORM_REFDEV_PROFILE": profile,
           "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])}
    reports = launch.run_ranks(f"fx_refccl_programs:{program}", {}, size=2, timeout=RANK_TIMEOUT, extra_env=env)
    return [r["values"] for r in reports]


def test_suite_send_recv_passes_on_young_backend(tmp_path):
    """The suite's own send/recv ring on two ranks, young-backend: a pass, not a timeout."""
    env = child_env(TORCHCONFORM_REFDEV_PROFILE="young-backend", TORCHCONFORM_WORLD_SIZE="2",
                    TORCHCONFORM_DIST_TIMEOUT=str(RANK_TIMEOUT))
    _, _, outcomes = run_pytest([DIST_SUITE, "--tc-device", "refdev", "-k", "send_recv"], tmp_path, env=env)
    got = by_name(outcomes)["test_collective_send_recv[send_recv]"]
    assert (got.outcome, got.kind) == ("pass", ""), got.message   # a hang would be a timeout


def test_blocking_and_waited_send_recv_carry_the_data():
    """dist.send/recv and isend/irecv + wait() on young-backend: rank 1 gets rank 0's tensors."""
    sender, receiver = _ranks("blocking_send_recv", "young-backend")   # a hang raises a timeout
    assert sender["got"] == [] and receiver["got"] == [[1.0] * 3, [11.0] * 3]


def test_coalesced_all_gather_joins_two_works():
    """Two coalesced all_gathers become one Work over gloo's two, on a synchronous and
    an overlapping profile alike; every rank ends with both gathered tensors."""
    for profile in ("young-backend", "full"):
        for values in _ranks("coalesced_all_gather", profile):
            assert values["outs"] == [[0.0, 0.0, 1.0, 1.0], [10.0, 10.0, 11.0, 11.0]], (profile, values)
