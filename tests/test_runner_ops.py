"""The ops suite on refdev (young-backend) and on cpu, with a tiny selection.

The OpInfos are chosen to reach every outcome class refdev can show: ``add``
(implemented), ``cdist`` (missing on young-backend), ``cumsum`` (CPU fallback),
``special.zeta`` (OpInfo expects test_compare_cpu to fail: xpass on refdev),
``as_strided`` (expected failure of noncontiguous_samples: xfail), ``unique``
(OpInfo skips compare_cpu: eligibility).
"""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import OPS_SUITE, by_name, child_env, run_pytest  # noqa: E402

OPS = "add,cdist,cumsum,special.zeta,as_strided,unique"
KEYWORD = "compare_cpu_ or noncontiguous"  # forward compare and non-contiguous; compile is covered by the CLI test
CLASSES = {"pass", "pass_fallback", "skip_backend", "skip_eligibility", "xfail", "xpass"}


def _ops_run(tmp_path, device, *extra, env=None, name="out.jsonl"):
    args = [OPS_SUITE, "--tc-device", device, "--tc-ops", OPS, "-k", KEYWORD, "--tc-timeout", "300", *extra]
    return run_pytest(args, tmp_path, jsonl=name, env=env)


@pytest.fixture(scope="module")
def refdev_parallel(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ops_n2")
    return _ops_run(tmp, "refdev", "-n", "2", env=child_env(TORCHCONFORM_REFDEV_PROFILE="young-backend"))


@pytest.fixture(scope="module")
def young_backend_truth():
    from torchconform import refdev
    return refdev.describe("young-backend")


def test_refdev_shows_every_outcome_class(refdev_parallel, young_backend_truth):
    proc, run, outcomes = refdev_parallel
    classes = {o.outcome for o in outcomes}
    assert CLASSES <= classes, (classes, proc.stdout[-2000:])
    got = by_name(outcomes)
    zeta = got["test_compare_cpu_special_zeta_refdev_float32"]
    assert zeta.outcome == "xpass" and zeta.op == "special.zeta" and zeta.variant == "compare_cpu"
    assert got["test_noncontiguous_samples_as_strided_refdev_float32"].outcome == "xfail"
    cdist = got["test_compare_cpu_cdist_refdev_float32"]
    assert cdist.dtype == "float32" and cdist.device.startswith("refdev") and cdist.op == "cdist"
    if "aten::_cdist_forward" in young_backend_truth["missing"]:  # the profile's hash rule decides
        assert (cdist.outcome, cdist.kind, cdist.missing_op) == ("skip_backend", "missing_op", "aten::_cdist_forward")
    assert run["device"] == "refdev" and run["profile"] == "young-backend"
    # classes carry the backend's name, as upstream names them (never ...PRIVATEUSE1)
    assert {o.cls for o in outcomes} == {"TestCommonREFDEV"}
    assert all("::TestCommonREFDEV::" in o.test_id for o in outcomes)


def test_missing_ops_are_the_ones_refdev_lacks(refdev_parallel, young_backend_truth):
    _, _, outcomes = refdev_parallel
    missing = {o.missing_op for o in outcomes if o.kind == "missing_op"}
    assert missing, "selection should hit a missing operator"
    assert missing <= set(young_backend_truth["missing"]), missing - set(young_backend_truth["missing"])


def test_implemented_only_tests_are_never_missing_op(refdev_parallel, young_backend_truth):
    # add (and its comparison) touches only implemented operators on young-backend.
    assert "aten::add.out" in young_backend_truth["implemented"]
    _, _, outcomes = refdev_parallel
    add = [o for o in outcomes if o.op == "add"]
    # young-backend refuses complex tensors: complex64 is the device's dtype limit, not a missing operator
    complex_add = [o for o in add if o.dtype == "complex64"]
    assert all((o.outcome, o.kind) == ("skip_backend", "unsupported_dtype") for o in complex_add), complex_add
    add = [o for o in add if o.dtype != "complex64"]
    assert add and all(o.outcome in ("pass", "pass_fallback") for o in add), [(o.name, o.outcome) for o in add]


def test_fallback_ops_are_recorded_and_a_pass_through_them_is_pass_fallback(refdev_parallel, young_backend_truth):
    _, _, outcomes = refdev_parallel
    fb = [o for o in outcomes if o.fallback_ops]
    # Recorded whatever the outcome (a fallback can be why a test failed); a pass that used one
    # is never a native pass.
    assert fb and not any(o.outcome == "pass" for o in fb)
    assert any(o.outcome == "pass_fallback" for o in fb)
    assert {op for o in fb for op in o.fallback_ops} <= set(young_backend_truth["fallback"])
    if "aten::cumsum.out" in young_backend_truth["fallback"]:
        assert any(o.op == "cumsum" for o in fb)


def test_parallel_equals_serial(refdev_parallel, tmp_path):
    _, _, parallel = refdev_parallel
    _, _, serial = _ops_run(tmp_path, "refdev", env=child_env(TORCHCONFORM_REFDEV_PROFILE="young-backend"))
    assert {o.test_id: (o.outcome, o.kind, o.missing_op) for o in serial} == \
        {o.test_id: (o.outcome, o.kind, o.missing_op) for o in parallel}


def test_cpu_shows_no_backend_skips(tmp_path):
    _, run, outcomes = _ops_run(tmp_path, "cpu", "-n", "2")
    assert outcomes and run["device"] == "cpu"
    assert {o.cls for o in outcomes} == {"TestCommonCPU"}
    assert not [o.test_id for o in outcomes if o.outcome == "skip_backend"]
    assert {o.op for o in outcomes} >= {"add", "cdist", "cumsum"}
    assert not any(o.fallback_ops for o in outcomes)


def test_quick_complex64_rule_deselects_only_this_suites_tests(monkeypatch, tmp_path):
    # pytest hands a conftest's collection hook every item of the session: tests of
    # other suites run alongside keep their complex64 variants.
    import importlib.util
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("ops_conftest", OPS_SUITE.parent / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    monkeypatch.setenv("TORCHCONFORM_SELECTION", "quick")
    monkeypatch.setenv("TORCHCONFORM_DEVICE", "refdev")
    ours = SimpleNamespace(name="test_neg_refdev_complex64", path=OPS_SUITE)
    ours_kept = SimpleNamespace(name="test_neg_refdev_float32", path=OPS_SUITE)
    other = SimpleNamespace(name="test_neg_refdev_complex64", path=tmp_path / "test_unary_ufuncs.py")
    deselected = []
    config = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
    items = [ours, ours_kept, other]
    conftest.pytest_collection_modifyitems(config, items)
    assert items == [ours_kept, other] and deselected == [ours]
