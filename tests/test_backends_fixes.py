"""What the real-backend bench (docs/backends.md, "What the tool got wrong on 2026-12-04")
showed, each fixed in the product and checked here without either backend installed."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

from torchconform.census import records
from torchconform.census.agreement import compare
from torchconform.core.dispatch import Keys, Row, classify
from torchconform.census.take import Census
from torchconform.core.outcome import Outcome
from torchconform.db.opening import open_store

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench" / "backends"))


# item 1: a registered kernel that calls the CPU fallback ---------------------------------------

def test_census_and_run_agree_once_the_census_joins_the_builds_evidence():
    table = {"aten::add.out": {"PrivateUse1"}, "aten::fill_.Scalar": {"PrivateUse1"}}
    has = lambda op, key: key in table.get(op, ())   # noqa: E731
    keys = Keys("PrivateUse1", "AutogradPrivateUse1")
    outcomes = [Outcome("t1", "pass_fallback", fallback_ops=["aten::add.out"]), Outcome("t2", "pass")]
    before = compare(classify(sorted(table), keys, has), outcomes)
    assert [(op, st) for op, st, _ in before.disagree] == [("aten::add.out", "native")]
    assert "its own kernel calls the CPU fallback" in before.disagree[0][2]
    after = compare(classify(sorted(table), keys, has, observed=["aten::add.out"]), outcomes)
    assert after.seen_by_both == 1 and after.disagree == []


# item 6: census and sweep find a profile as run does -------------------------------------------

def test_census_without_a_profile_uses_the_profile_run_would(monkeypatch):
    from torchconform.cli.cmd_census import _backend

    monkeypatch.delenv("TORCH_DEVICE_BACKEND_AUTOLOAD", raising=False)
    args = Namespace(device="vulkan", profile=None, backend_module=None, refdev_profile=None)
    path, module = _backend(args)          # shipped: skiplists/torchvulkan/ names device vulkan
    assert path.endswith("skiplists/torchvulkan/profile.yaml") and module == ""
    args = Namespace(device="vulkan", profile=None, backend_module="torchvulkan", refdev_profile=None)
    assert _backend(args)[1] == "torchvulkan"


def test_sweep_finds_the_shipped_or_generated_profile(tmp_path, monkeypatch):
    from torchconform.errors import UserError
    from torchconform.sweep.driver import resolve_profile

    prof, device = resolve_profile("vulkan", "")
    assert prof.path.endswith("skiplists/torchvulkan/profile.yaml") and device == "vulkan"
    monkeypatch.chdir(tmp_path)
    try:
        resolve_profile("npuish", "")
    except UserError as exc:
        assert "torchconform backend init npuish" in str(exc)
    else:
        raise AssertionError("a device without any profile was accepted")
    generated = tmp_path / ".torchconform" / "profiles"
    generated.mkdir(parents=True)
    (generated / "npuish.yaml").write_text((REPO / "skiplists" / "torchvulkan" / "profile.yaml").read_text()
                                           .replace("device: vulkan", "device: npuish"))
    prof, device = resolve_profile("npuish", "")
    assert device == "npuish" and prof.device == "npuish"


# item 7: a census taken alone is a census build, not an incomplete one -------------------------

def test_builds_lists_a_census_only_build_as_census(tmp_path):
    db = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(db) as store:
        records.save(store, "c-only", Census("refdev", "PrivateUse1", "2.13.0", [Row("aten::a", "native")]))
    proc = subprocess.run([sys.executable, "-m", "torchconform", "builds", "--json", "--db", db],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["c-only"]["state"] == "census" and rows["c-only"]["runs"] == 0


# item 8: modules accept ModuleInfo names and their test-name form --------------------------------

def test_modules_ops_filter_takes_both_spellings(monkeypatch):
    from torch.testing._internal.common_modules import module_db

    from torchconform.suites.modules.selection import select_modules

    monkeypatch.setenv("TORCHCONFORM_SELECTION", "quick")
    monkeypatch.setenv("TORCHCONFORM_OPS", "nn_GRUCell,nn.LSTM")
    assert sorted(m.name for m in select_modules(module_db)) == ["nn.GRUCell", "nn.LSTM"]


# item 5: the traits suite makes its inputs on CPU ----------------------------------------------

RANDOM = {"randn", "rand", "randint", "randperm", "normal", "rand_like", "randn_like"}


def test_traits_inputs_are_never_random_numbers_made_on_the_device():
    """A backend without normal_/uniform_ (torch-opencl) must still be measured: random
    inputs are made on CPU and copied."""
    found = []
    for path in sorted((REPO / "suites" / "traits").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in RANDOM \
                    and any(k.arg == "device" for k in node.keywords):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []


# the bench's with/without-observer comparison --------------------------------------------------

def test_same_without_watch_tells_behaviour_from_evidence(capsys):
    from compare import same_without_watch

    def rec(t, outcome, kind=""):
        return {"test_id": t, "outcome": outcome, "kind": kind, "message": ""}

    with_watch = [rec("a", "pass_fallback"), rec("b", "skip_backend", "missing_op"), rec("c", "pass", "host_only"),
                  rec("d", "pass")]
    without = [rec("a", "pass"), rec("b", "fail"), rec("c", "pass"), rec("d", "fail")]
    said = same_without_watch(with_watch, without)
    assert said.startswith("4 tests in both runs, 1 ended differently") and "(3 differ only in evidence" in said
    assert "DIFFERS d" in capsys.readouterr().out


def test_a_census_row_no_census_can_know_is_blocked_not_wrong():
    from compare import unobservable

    truth = {"facts": {"per_op_fallback_kernels": ["aten::masked_select", "aten::add.out"]}}
    native = {"status": "native"}
    assert unobservable("aten::masked_select", "fallback", native, truth, [])
    # a test of the build ran it through the fallback: the census should have joined it
    ran = [{"fallback_ops": ["aten::add.out"]}]
    assert not unobservable("aten::add.out", "fallback", native, truth, ran)
    assert not unobservable("aten::abs.out", "fallback", native, truth, [])        # not a kernel that falls back
    assert not unobservable("aten::masked_select", "native", native, truth, [])
