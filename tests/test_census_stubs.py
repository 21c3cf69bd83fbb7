"""Operators the dispatcher offers a device that still cannot run there (torchconform/core/dispatch.py):
ATen's raising composite stubs (convolution_overrideable...) and CPU kernels whose sparse
result a boxed CPU fallback cannot move to a device without sparse keys (_spdiags).  Both
are ``missing``; the lists are checked against the installed torch and against refdev
itself, where the census, refdev's ground truth and a real call agree."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchconform.core.dispatch import (
    MISSING, NATIVE, OBSERVED, RAISING_STUBS, SPARSE_RESULT, SPARSE_RESULT_COMPRESSED, SPARSE_RESULT_COO, STUB,
    FALLBACK, Keys, classify,
)

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import REPO, child_env  # noqa: E402

PU1 = Keys("PrivateUse1", "AutogradPrivateUse1", backend_fallback=True)


def _table(entries: dict):
    return lambda op, key: key in entries.get(op, ())


def test_a_raising_stub_is_missing_unless_the_backend_overrides_it():
    table = {"aten::convolution_overrideable": {"CompositeExplicitAutograd"},
             "aten::convolution_backward_overrideable": {"CompositeExplicitAutograd", "PrivateUse1"},
             "aten::narrow": {"CompositeImplicitAutograd"}}
    rows = {r.op: r for r in classify(sorted(table), PU1, _table(table))}
    stub = rows["aten::convolution_overrideable"]
    assert (stub.status, stub.via) == (MISSING, STUB) and not stub.works
    assert rows["aten::convolution_backward_overrideable"].status == NATIVE       # the backend's own kernel
    assert rows["aten::narrow"].status == "composite"


def test_a_sparse_result_the_device_cannot_hold_is_missing():
    table = {"aten::_spdiags": {"CPU"}, "aten::_to_sparse_csr": {"CPU"}, "aten::sin": {"CPU"}}
    rows = {r.op: r for r in classify(sorted(table), PU1, _table(table))}
    assert (rows["aten::_spdiags"].status, rows["aten::_spdiags"].via) == (MISSING, SPARSE_RESULT)
    assert rows["aten::_to_sparse_csr"].status == MISSING
    assert rows["aten::sin"].status == FALLBACK
    # a backend that registers the sparse constructors holds the result: the fallback serves it
    table.update({"aten::_sparse_coo_tensor_with_dims_and_tensors": {"SparsePrivateUse1"}})
    rows = {r.op: r for r in classify(["aten::_spdiags", "aten::_to_sparse_csr"], PU1, _table(table))}
    assert rows["aten::_spdiags"].status == FALLBACK and rows["aten::_to_sparse_csr"].status == MISSING


def test_observed_fallback_turns_a_registered_kernel_into_fallback():
    table = {"aten::add.out": {"PrivateUse1"}, "aten::fill_.Scalar": {"PrivateUse1"}}
    rows = {r.op: r for r in classify(sorted(table), Keys("PrivateUse1", "AutogradPrivateUse1"), _table(table),
                                      observed=["aten::add.out"])}
    assert (rows["aten::add.out"].status, rows["aten::add.out"].via) == (FALLBACK, OBSERVED)
    assert (rows["aten::fill_.Scalar"].status, rows["aten::fill_.Scalar"].via) == (NATIVE, "")


def _made_up(op):
    """Arguments for ``op`` on meta tensors, fixed-size bool lists as long as the schema says."""
    import torch

    from torchconform.census import trace

    args, kwargs = [], {}
    for arg in op._schema.arguments:
        if arg.has_default_value():
            continue
        text = str(arg.real_type)
        if text == "List[bool]":
            value = [True] * (arg.N or 1)
        elif text in ("Tensor", "Optional[Tensor]"):
            value = torch.empty(1, 1, 2, 2, device="meta")
        else:
            value = trace._value(arg, (1, 1, 2, 2))
        (kwargs.__setitem__(arg.name, value) if arg.kwarg_only else args.append(value))
    return args, kwargs


@pytest.mark.parametrize("name", sorted(RAISING_STUBS))
def test_each_listed_stub_still_only_raises_on_this_torch(name):
    import torch

    from torchconform.census import trace

    has = torch._C._dispatch_has_kernel_for_dispatch_key
    assert has(name, "CompositeExplicitAutograd") and not has(name, "CPU")
    op = trace._overload(name)
    args, kwargs = _made_up(op)
    keyset = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)
    with pytest.raises(NotImplementedError, match="not implemented|override this function"):
        op.redispatch(keyset, *args, **kwargs)


def test_each_listed_sparse_result_op_has_a_cpu_kernel_with_a_sparse_result():
    import torch

    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in SPARSE_RESULT_COO | SPARSE_RESULT_COMPRESSED:
        assert has(name, "CPU"), name
    coo = torch.ops.aten._spdiags(torch.ones(2, 5), torch.tensor([0, 1]), [5, 5])
    assert coo.layout == torch.sparse_coo
    assert torch.ones(2, 2).to_sparse_csr().layout == torch.sparse_csr


def test_on_refdev_boxed_the_census_the_ground_truth_and_a_real_call_agree():
    code = (
        "import json, torch\n"
        "from torchconform import refdev\n"
        "name = refdev.load()\n"
        "from torchconform.core.dispatch import classify, device_keys\n"
        "ops = ['aten::_to_sparse', 'aten::_scaled_dot_product_fused_attention_overrideable',\n"
        "       'aten::sort.values_stable']\n"
        "rows = {r.op: r.status for r in classify(ops, device_keys(name))}\n"
        "d = refdev.describe()\n"
        "said = {}\n"
        "try:\n"
        "    torch.ops.aten._to_sparse(torch.ones(2, 3, device=name))\n"
        "    said['spdiags'] = 'ran'\n"
        "except Exception as e:\n"
        "    said['spdiags'] = f'{type(e).__name__}: {e}'[:300]\n"
        "print(json.dumps({'rows': rows, 'missing': [o for o in ops if o in d['missing']],\n"
        "                  'fallback': [o for o in ops if o in d['fallback']], 'said': said}))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env=child_env(TORCHCONFORM_REFDEV_PROFILE="boxed-backend"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # (refdev computes _spdiags itself; _to_sparse has no refdev kernel: the boxed fallback takes it)
    assert got["rows"] == {"aten::_to_sparse": "missing", "aten::sort.values_stable": "fallback",
                           "aten::_scaled_dot_product_fused_attention_overrideable": "missing"}
    assert got["missing"] == ["aten::_to_sparse", "aten::_scaled_dot_product_fused_attention_overrideable"]
    assert got["fallback"] == ["aten::sort.values_stable"]
    assert "_sparse_coo_tensor_with_dims_and_tensors" in got["said"]["spdiags"], got["said"]
    # and a run classifies that error as the device's missing operator, the one the census lists
    from torchconform.core.classify import classify_text

    verdict = classify_text(got["said"]["spdiags"], "refdev")
    assert (verdict.outcome, verdict.kind, verdict.missing_op) == (
        "skip_backend", "missing_op", "aten::_sparse_coo_tensor_with_dims_and_tensors")
