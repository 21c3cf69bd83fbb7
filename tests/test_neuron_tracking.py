"""Fallback and host_only evidence from the backend's own tracking API (issue 30, item 2 and 4):
the neuron profile's ``tracking:`` section (torch_neuronx.get_fallback_ops /
get_executed_ops / clear_op_tracking) served by refdev standing in for torch_neuronx
(refdev/standin.py, backed by refdev's own counters).  Ground truth: ``refdev describe``."""
import sys
import types
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "runner"))
from runner_support import FIXTURES, by_name, child_env, run_pytest  # noqa: E402

from torchconform.collectors import tracking  # noqa: E402
from torchconform.errors import UserError  # noqa: E402
from torchconform.core.profile import BackendProfile, load_profile  # noqa: E402
from torchconform.core.profile_schema import check_profile  # noqa: E402
from torchconform.core.yamlpos import load_yaml  # noqa: E402

FIXTURE = FIXTURES / "fx_tracking.py"
STANDIN = "torchconform.refdev.standin"
FALLBACK_SOURCE = f"tracking {STANDIN}.get_fallback_ops()"


# -- resolving and reading -------------------------------------------------------------------
@pytest.fixture
def fake_backend(monkeypatch):
    state = {"fallback": ["cumsum.out", "aten::sort.values_stable"], "executed": {"aten::abs": 3, "aten::add": 0},
             "cleared": 0}
    mod = types.ModuleType("fake_tracking_backend")
    mod.get_fallback_ops = lambda: list(state["fallback"])
    mod.get_executed_ops = lambda: dict(state["executed"])
    mod.clear_op_tracking = lambda: state.__setitem__("cleared", state["cleared"] + 1)
    monkeypatch.setitem(sys.modules, "fake_tracking_backend", mod)
    return state


def _profile(**tracking_spec):
    return BackendProfile(name="fake", device="fake", backend_module="fake_tracking_backend", tracking=tracking_spec)


def test_resolve_reads_names_qualified_sorted_and_zero_counts_dropped(fake_backend):
    api = tracking.resolve(_profile(fallback_ops="get_fallback_ops", executed_ops="get_executed_ops",
                                    clear="clear_op_tracking"))
    api.reset()
    assert fake_backend["cleared"] == 1
    assert api.read() == (["aten::cumsum.out", "aten::sort.values_stable"], ["aten::abs"])
    assert api.label("fallback_ops").startswith("fake_tracking_backend.")


def test_a_stand_in_module_replaces_the_backend_module(fake_backend):
    profile = BackendProfile(name="n", device="n", backend_module="torch_neuronx",
                             tracking={"module": "torch_neuronx", "fallback_ops": "get_fallback_ops"})
    api = tracking.resolve(profile, backend_module="fake_tracking_backend")
    assert api.module == "fake_tracking_backend" and api.read()[0] == ["aten::cumsum.out", "aten::sort.values_stable"]
    assert api.executed_ops is None and api.read()[1] is None


def test_no_tracking_section_means_the_generic_path():
    assert tracking.resolve(BackendProfile(name="r", device="r")) is None


def test_a_function_the_module_lacks_is_a_one_line_error(fake_backend):
    with pytest.raises(UserError, match=r"tracking.fallback_ops 'get_fallbacks' is not a function of "
                                        r"fake_tracking_backend; fix the name"):
        tracking.resolve(_profile(fallback_ops="get_fallbacks"))


def test_an_unimportable_module_is_a_one_line_error():
    profile = BackendProfile(name="n", device="n", backend_module="no_such_backend_xyz",
                             tracking={"fallback_ops": "get_fallback_ops"})
    with pytest.raises(UserError, match="cannot be imported"):
        tracking.resolve(profile)


def test_schema_checks_the_tracking_section(tmp_path):
    path = tmp_path / "profile.yaml"
    path.write_text("device: x\ntracking:\n  modul: m\n  fallback_ops: 'get fallback'\nno_fallback_env:\n"
                    "  1BAD: '1'\n")
    messages = [p.message for p in check_profile(load_yaml(str(path)), str(path))]
    assert any("unknown key 'modul' under 'tracking'" in m for m in messages), messages
    assert any("tracking.fallback_ops must be a function name" in m for m in messages), messages
    assert any("no_fallback_env: '1BAD' is not an environment variable name" in m for m in messages), messages
    path.write_text("device: x\ntracking:\n  clear: clear_op_tracking\n")
    messages = [p.message for p in check_profile(load_yaml(str(path)), str(path))]
    assert any("tracking names no function" in m for m in messages), messages


def test_the_neuron_profile_names_torch_neuronx_tracking_and_strict_switches():
    profile = load_profile("neuron")
    assert profile.tracking == {"module": "torch_neuronx", "fallback_ops": "get_fallback_ops",
                                "executed_ops": "get_executed_ops", "clear": "clear_op_tracking"}
    assert profile.no_fallback_env == {"TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": "1",
                                       "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": "1"}


# -- the plugin on refdev standing in for torch_neuronx -----------------------------------------
def _run(tmp_path, *extra):
    args = [FIXTURE, "--tc-device", "neuron", "--tc-profile", "neuron", "--tc-backend-module", STANDIN, *extra]
    _, _, outcomes = run_pytest(args, tmp_path, env=child_env(TORCHCONFORM_REFDEV_PROFILE="young-backend"))
    return by_name(outcomes)


@pytest.fixture(scope="module")
def truth():
    from torchconform import refdev

    return refdev.describe("young-backend")


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("tracked"))


def test_fallback_ops_come_from_the_tracking_api(tracked, truth):
    o = tracked["test_through_fallback"]
    assert o.outcome == "pass_fallback" and "aten::cumsum.out" in o.fallback_ops
    assert set(o.fallback_ops) <= set(truth["fallback"])
    # the record says where its evidence came from, in its JSON line and in its stored message
    assert o.evidence == FALLBACK_SOURCE
    assert o.message == f"fallback evidence: {FALLBACK_SOURCE}"
    native = tracked["test_native"]
    assert native.outcome == "pass" and native.kind == "" and native.fallback_ops == []
    assert native.evidence == FALLBACK_SOURCE


def test_host_only_comes_from_the_executed_ops(tracked):
    o = tracked["test_host_only"]
    assert (o.outcome, o.kind) == ("pass", "host_only")
    assert o.evidence == f"tracking {STANDIN}.get_executed_ops()"
    assert "get_executed_ops() reported no operator" in o.message


def test_every_reported_fallback_is_refdev_ground_truth(tracked, truth):
    reported = {op for o in tracked.values() for op in o.fallback_ops}
    assert reported and reported <= set(truth["fallback"])
    assert set(tracked["test_fallback_then_fails"].fallback_ops) == {"aten::cumsum.out"}


def test_without_a_tracking_section_the_generic_path_is_used(tmp_path):
    # the same run under refdev's own profile: its counter, not a tracking API
    args = [FIXTURE, "--tc-device", "refdev"]
    _, _, outcomes = run_pytest(args, tmp_path, env=child_env(TORCHCONFORM_REFDEV_PROFILE="young-backend"))
    o = by_name(outcomes)["test_through_fallback"]
    assert o.outcome == "pass_fallback" and "aten::cumsum.out" in o.fallback_ops
    assert not o.evidence.startswith("tracking") and "counter torchconform.refdev:fallback_counts" in o.evidence


def test_strict_mode_turns_fallback_passes_into_fallback_forbidden(tmp_path, tracked):
    strict = _run(tmp_path, "--tc-no-fallback", "1")
    o = strict["test_through_fallback"]
    assert (o.outcome, o.kind) == ("fail", "fallback_forbidden")
    assert "aten::cumsum.out" in o.message and o.fallback_ops == tracked["test_through_fallback"].fallback_ops
    assert "--tc-no-fallback 1" in o.repro
    # what did not pass through the fallback is what it was
    for name in ("test_native", "test_host_only"):
        assert (strict[name].outcome, strict[name].kind) == (tracked[name].outcome, tracked[name].kind)
    failing = strict["test_fallback_then_fails"]
    assert (failing.outcome, failing.kind) == ("fail", "") and "own reason" in failing.message


# -- rehearse neuron --spec: a spec-driven plan through the same tracking path -------------------
def test_rehearse_with_a_spec_runs_its_upstream_tests_through_the_tracking_path(tmp_path):
    import json
    import shutil
    import subprocess

    root = Path(__file__).resolve().parent / "fixtures"
    src = tmp_path / "pytorch"
    shutil.copytree(root / "upstream" / "test", src / "test")
    shutil.copy(root / "upstream" / "version.txt", src / "version.txt")
    spec = root / "neuron_spec" / "specs" / "fake_spec.json"
    proc = subprocess.run([sys.executable, "-m", "torchconform", "rehearse", "neuron", "--spec", str(spec),
                           "--pytorch-src", str(src), "-n", "0", "--db", str(tmp_path / "r.db"),
                           "--out", str(tmp_path / "site"), "--build", "reh-spec"],
                          cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "missing operators reported, 0 contradicted; 0 fallback operators reported, 0 contradicted" in proc.stderr
    rows = [json.loads(line) for line in (tmp_path / ".torchconform" / "runs" / "reh-spec.jsonl").read_text()
            .splitlines()]
    outcomes = [r for r in rows if r.get("type") == "outcome"]
    # the spec's classes, instantiated for the device the profile names, and the neuron profile's tracking path
    assert outcomes and all("NEURON::" in r["test_id"] for r in outcomes)
    assert any(r.get("evidence") == FALLBACK_SOURCE for r in outcomes)
    assert any(r["kind"] == "missing_op" for r in outcomes)


def test_rehearse_spec_without_a_checkout_is_a_one_line_error(tmp_path):
    import subprocess

    spec = Path(__file__).resolve().parent / "fixtures" / "neuron_spec" / "specs" / "fake_spec.json"
    proc = subprocess.run([sys.executable, "-m", "torchconform", "rehearse", "neuron", "--spec", str(spec),
                           "--db", str(tmp_path / "r.db")], cwd=tmp_path, env=child_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2 and "--pytorch-src" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "r.db").exists()
