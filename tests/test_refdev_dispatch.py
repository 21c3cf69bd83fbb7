"""describe() against the dispatcher itself: for every PrivateUse1 dispatch key
(PrivateUse1, Autograd, Autocast, Sparse, SparseCsr, Quantized, NestedTensor...),
what refdev claims is what is registered, and a missing operator has nothing that
would make it run.  One fresh process per profile (PrivateUse1 is registered once
per process); the child (fixtures/refdev/dispatch.py) reads the dispatcher's
computed tables, the test compares them with the child's describe()."""
import json
import os
import re
import subprocess
import sys

import pytest

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "refdev")
# Keys whose kernels compute for the device's tensors; Autograd* and Autocast*
# kernels redispatch to them (an autograd formula or an autocast cast on top).
REDISPATCHING = ("Autograd", "Autocast")
DISPATCHER_ERROR = re.compile(r"^NotImplementedError: Could not run '(aten::[\w.]+)' with arguments from the '(\w+)' backend")


@pytest.fixture(scope="module", params=["full", "young-backend"])
def dispatch(request):
    env = dict(os.environ, TORCHCONFORM_REFDEV_PROFILE=request.param, TORCHCONFORM_REFDEV_NAME="refdev")
    proc = subprocess.run([sys.executable, os.path.join(FIXTURES, "dispatch.py")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("DISPATCH "))
    out = json.loads(line[len("DISPATCH "):])
    assert out["describe"]["profile"] == request.param
    return out


def _listed(info):
    return info["implemented"] + info["fallback"] + info["missing"]


def test_every_privateuse1_key_is_described(dispatch):
    keys = dispatch["describe"]["dispatch_keys"]
    assert list(keys) == dispatch["keys"]
    assert {"PrivateUse1", "AutogradPrivateUse1", "QuantizedPrivateUse1", "SparsePrivateUse1",
            "NestedTensorPrivateUse1"} <= set(keys)
    assert set(dispatch["tensor_keys"]) <= set(keys)
    seen = {k for entries in dispatch["table"].values() for k in entries}
    assert seen <= set(keys)


def test_claimed_kernels_are_the_registered_ones(dispatch):
    """Per key, the operators describe() says refdev registers are exactly those
    with a kernel there (_dispatch_has_kernel_for_dispatch_key), and refdev's."""
    info = dispatch["describe"]
    for key, claim in info["dispatch_keys"].items():
        kernels = set(claim["kernels"])
        assert kernels == set(dispatch["direct"][key]), key
        for op in kernels:
            assert dispatch["table"][op][key] == "refdev kernel", (key, op)
    assert info["dispatch_keys"]["PrivateUse1"]["kernels"] == sorted(info["implemented"] + info["fallback"])
    for key in ("QuantizedPrivateUse1", "SparsePrivateUse1", "SparseCsrPrivateUse1", "NestedTensorPrivateUse1"):
        assert info["dispatch_keys"][key]["kernels"] == [], key


def test_backend_fallbacks_are_described(dispatch):
    for key, claim in dispatch["describe"]["dispatch_keys"].items():
        has = dispatch["backend_fallback"][key]
        entries = {e[key] for e in dispatch["table"].values() if key in e and e[key].endswith("backend fallback")}
        expected = {"fallthrough": {"refdev fallthrough backend fallback"}, "pytorch": {"pytorch backend fallback"},
                    None: set()}[claim["backend_fallback"]]
        assert has == (claim["backend_fallback"] is not None), key
        assert entries <= expected, (key, entries)


def test_implemented_ops_have_their_kernels(dispatch):
    info = dispatch["describe"]
    for op in info["implemented"] + info["fallback"]:
        entries = dispatch["table"][op]
        assert entries.get("PrivateUse1") == "refdev kernel", (op, entries)
        assert "AutogradPrivateUse1" in entries, (op, entries)


def test_missing_ops_have_no_kernel_under_any_key(dispatch):
    """No kernel, no composite, no fallthrough or fallback under a key that would
    compute: the dispatcher raises instead of the operator silently working."""
    from torchconform.core.dispatch import RAISING_STUBS

    info = dispatch["describe"]
    assert info["missing"]
    for op in info["missing"]:
        if op in RAISING_STUBS:    # ATen's composite stub fills the slot and only raises (test_census_stubs.py)
            continue
        for key, entry in dispatch["table"].get(op, {}).items():
            if key.startswith("Autograd"):
                assert entry in ("pytorch autograd kernel", "pytorch backend fallback"), (op, key, entry)
            elif key.startswith("Autocast"):
                assert entry == "refdev fallthrough backend fallback", (op, key, entry)
            else:
                pytest.fail(f"{op} is missing but has {entry} under {key}")
        assert not any(op in dispatch["direct"][key] for key in dispatch["keys"]), op


def test_non_strided_creation_agrees_with_describe(dispatch):
    """Creating a quantized or sparse tensor works exactly when describe() claims the
    kernel; otherwise the dispatcher names an operator describe() lists as missing."""
    info = dispatch["describe"]
    name = dispatch["name"]
    backend_keys = {name: "PrivateUse1", f"Quantized{name}": "QuantizedPrivateUse1",
                    f"Sparse{name}": "SparsePrivateUse1", f"SparseCsr{name}": "SparseCsrPrivateUse1"}
    for what, error in dispatch["creations"].items():
        if error is None:
            continue
        m = DISPATCHER_ERROR.match(error)
        assert m, (what, error)
        op, key = m.group(1), backend_keys[m.group(2)]
        assert op in info["missing"] and op not in info["implemented"], (what, op)
        assert op not in info["dispatch_keys"][key]["kernels"], (what, op, key)
    quantized = dispatch["creations"]["_empty_affine_quantized"]
    claimed = "aten::_empty_affine_quantized" in info["dispatch_keys"]["QuantizedPrivateUse1"]["kernels"]
    assert (quantized is None) == claimed, quantized
    if not claimed:
        assert f"from the 'Quantized{name}' backend" in quantized
    assert set(_listed(info)) >= {"aten::_empty_affine_quantized", "aten::quantize_per_tensor", "aten::_to_sparse"}
