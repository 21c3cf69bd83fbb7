"""Decomposition-aware attribution on refdev young-backend (docs/classification.md).

``aten::rms_norm`` has no refdev kernel: it is a CompositeImplicitAutograd decomposition
that reaches ``aten::_fused_rms_norm`` (composite), then ``aten::rsqrt`` (composite), then
``aten::rsqrt.out``, which young-backend lacks.  A test of the OpInfo
``nn.functional.rms_norm`` must record the operator under test as ``op`` and the
operator that is actually missing, ``aten::rsqrt.out``, as ``missing_op``, never the
composite it called.
"""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import OPS_SUITE, by_name, child_env, run_pytest  # noqa: E402

COMPOSITE, ROOT = "aten::rms_norm", "aten::rsqrt.out"
TEST = "test_compare_cpu_nn_functional_rms_norm_refdev_float32"


@pytest.fixture(scope="module")
def chain():
    """The census's reading of the chain, so the test fails loudly if refdev's profile moves."""
    import torch

    from torchconform import refdev
    from torchconform.core import dispatch

    name = refdev.load()
    info = refdev.describe("young-backend")
    if refdev.active_profile().profile.name != "young-backend":
        pytest.skip("needs refdev's young-backend profile in this process")
    keys = dispatch.device_keys(name)
    rows = {r.op: r for r in dispatch.classify([COMPOSITE, "aten::_fused_rms_norm", "aten::rsqrt", ROOT], keys,
                                               fallback_ops=info["fallback"])}
    assert rows[COMPOSITE].status == "composite" and rows[ROOT].status == "missing"
    assert ROOT in info["missing"] and COMPOSITE not in info["missing"]
    return name, torch


def test_live_exception_names_the_root_operator(chain):
    from torchconform.core.classify import classify_exception

    name, torch = chain
    x = torch.ones(2, 4, device=name)
    with pytest.raises(Exception) as caught:
        torch.nn.functional.rms_norm(x, (4,))
    verdict = classify_exception(caught.value, "refdev")
    assert (verdict.outcome, verdict.kind, verdict.missing_op) == ("skip_backend", "missing_op", ROOT)


def test_record_names_the_tested_operator_and_the_missing_one(chain, tmp_path):
    _, _, outcomes = run_pytest([OPS_SUITE, "--tc-device", "refdev", "--tc-ops", "nn.functional.rms_norm",
                                 "-k", TEST, "--tc-timeout", "300"], tmp_path,
                                env=child_env(TORCHCONFORM_REFDEV_PROFILE="young-backend"))
    record = by_name(outcomes)[TEST]
    assert (record.outcome, record.kind) == ("skip_backend", "missing_op")
    assert record.op == "nn.functional.rms_norm"     # the operator under test
    assert record.missing_op == ROOT                  # what the decomposition reached and the device lacks
