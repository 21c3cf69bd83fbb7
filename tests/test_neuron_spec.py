"""torch-neuronx test plans (specs): reading all three expectation forms, one-line errors,
import/export round trip, and `run --suite upstream --spec` on the fake PyTorch checkout."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from torchconform.errors import UserError
from torchconform.skiplists import neuron_spec as ns
from torchconform.skiplists import neuron_spec_io as io
from torchconform.suites.upstream.spec_select import selects
from support import child_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "neuron_spec")
SPEC = os.path.join(FIX, "specs", "fake_spec.json")
FAKE_SRC = os.path.join(ROOT, "tests", "fixtures", "upstream")


def write_spec(tmp_path, configs, lists=None, name="s.json"):
    (tmp_path / "specs").mkdir(exist_ok=True)
    for rel, names in (lists or {}).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps({"failed_tests": names}))
    path = tmp_path / "specs" / name
    path.write_text(json.dumps({"test_configurations": configs}))
    return str(path)


def test_all_three_forms_and_the_list_file_resolved_beside_specs():
    spec = ns.parse_spec(SPEC)
    assert spec.root == FIX
    c0, c1 = spec.configs
    forms = [(i.mode, i.form, i.list_file) for i in c0.items + c1.items]
    assert forms == [("xfail", "list", "failing_test_methods/TestFakeTensorOps.json"),
                     ("skip", "individual", ""), ("xfail", "grouped", "")]
    assert c0.items[0].tests == [("test_fake_view_neuron", "views come back wrong on this device"),
                                 ("test_fake_trunc_neuron_float64", "views come back wrong on this device")]
    assert c0.items[1].tests == [("test_fake_cpu_only_neuron", "meaningful on CPU hosts only")]
    assert spec.counts() == {"entries": 2, "xfail": 3, "skip": 1, "folder_defaults": 0,
                             "forms": ["grouped", "individual", "list"]}
    entries = ns.spec_entries(spec, "refdev")
    # skip_tests win over xfail: their entries come first; ids name the spec item
    assert [e.ref for e in entries] == ["fake_spec.json::c0.skip0.test_fake_cpu_only_neuron",
                                        "fake_spec.json::c0.xfail0.test_fake_view_neuron",
                                        "fake_spec.json::c0.xfail0.test_fake_trunc_neuron_float64",
                                        "fake_spec.json::c1.xfail0.test_fake_add_scalar"]
    view = entries[1]
    assert view.mode == "xfail" and view.reason == "views come back wrong on this device"
    from torchconform.skiplists.entries import TestInfo

    def hit(entry, tid):
        return entry.matches(TestInfo(test_id=tid))

    # class_name_suffix_options -> the instantiated class; the spec's "neuron" -> the device's name
    assert hit(view, "test/test_fake_tensor_ops.py::TestFakeTensorOpsREFDEV::test_fake_view_refdev")
    assert not hit(view, "test/test_fake_tensor_ops.py::TestFakeTensorOpsCPU::test_fake_view_cpu")
    assert not hit(view, "test/test_fake_ops.py::TestFakeTensorOpsREFDEV::test_fake_view_refdev")
    # torch-neuronx matches names by substring (aten runner)
    add = entries[3]
    assert hit(add, "test/test_fake_ops.py::TestFakeCommonREFDEV::test_fake_add_scalar_refdev")


def test_distributed_files_match_exact_names(tmp_path):
    path = write_spec(tmp_path, [{"file": "distributed/test_x.py", "class": "TestX",
                                  "xfail": [{"tests": ["test_a"], "reason": "fails under two ranks"}]}])
    (entry,) = ns.spec_entries(ns.parse_spec(path))
    from torchconform.skiplists.entries import TestInfo

    assert entry.matches(TestInfo(test_id="test/distributed/test_x.py::TestX::test_a"))
    assert not entry.matches(TestInfo(test_id="test/distributed/test_x.py::TestX::test_a_b"))


def test_folder_default_xfail_as_their_runner_applies_it(tmp_path):
    spec = ns.parse_spec(write_spec(tmp_path, [
        {"folder": "distributed/checkpoint"},
        {"folder": "distributed/checkpoint", "xfail": []},           # an empty list does not stop it
        {"folder": "distributed/checkpoint", "xfail_reason": "checkpointing is not ready yet"},
        {"folder": "distributed/checkpoint", "class": "TestC"},
        {"folder": "distributed/checkpoint", "xfail": [{"tests": ["test_a"], "reason": "a fails on two ranks"}]},
    ]))
    defaults = [c.folder_default for c in spec.configs]
    assert defaults[0] == ns.FOLDER_DEFAULT and defaults[1] == ns.FOLDER_DEFAULT
    assert defaults[2] == "checkpointing is not ready yet" and defaults[3:] == ["", ""]
    entry = [e for e in ns.spec_entries(spec) if e.id == "c0.xfail-all"][0]
    from torchconform.skiplists.entries import TestInfo

    assert entry.matches(TestInfo(test_id="test/distributed/checkpoint/sub/test_y.py::TestY::test_b"))
    assert not entry.matches(TestInfo(test_id="test/distributed/test_y.py::TestY::test_b"))


@pytest.mark.parametrize("configs,lists,words", [
    ([{"file": "test_a.py", "clas": "TestA"}], None, "test_configurations[0]: unknown key 'clas'"),
    ([{"file": "test_a.py", "folder": "x"}], None, "test_configurations[0]: needs exactly one of 'file' and 'folder'"),
    ([{"file": "test_a.py", "xfail": [{"test_a": "broken"}]}], None, "test_configurations[0].xfail[0]: test 'test_a' needs"),
    ([{"file": "test_a.py", "xfail": [{"tests": ["test_a"]}]}], None, "test_configurations[0].xfail[0]: a grouped item needs a 'reason'"),
    ([{"file": "t.py"}, {"file": "test_a.py", "skip_tests": [{"tests": ["a"], "reason": "slow compile", "why": 1}]}],
     None, "test_configurations[1].skip_tests[0]: unknown key 'why'"),
    ([{"file": "test_a.py", "xfail": [{"test_list_filename": "failing_test_methods/N.json", "reason": "listed"}]}],
     None, "list file failing_test_methods/N.json not found"),
    ([{"file": "test_a.py", "methods": "test_a"}], None, "test_configurations[0].methods: must be a list of names"),
])
def test_malformed_specs_are_one_line_errors_naming_file_and_entry(tmp_path, configs, lists, words):
    path = write_spec(tmp_path, configs, lists)
    with pytest.raises(UserError) as err:
        ns.parse_spec(path)
    text = str(err.value)
    assert words in text and "\n" not in text and path in text


def test_not_a_spec(tmp_path):
    bad = tmp_path / "specs"
    bad.mkdir()
    (bad / "x.json").write_text("{\"test_configurations\": [\n  {,}]}")
    with pytest.raises(UserError, match=r"x.json:2: not JSON"):
        ns.parse_spec(str(bad / "x.json"))
    (bad / "y.json").write_text(json.dumps({"test_configurations": [], "extra": 1}))
    with pytest.raises(UserError, match="unknown top-level key 'extra'"):
        ns.parse_spec(str(bad / "y.json"))


def test_selection_maps_suffixes_methods_and_folders(tmp_path):
    spec = ns.parse_spec(write_spec(tmp_path, [
        {"file": "test_nn.py", "class": "TestNNDeviceType", "class_name_suffix_options": ["PRIVATEUSE1", "NEURON"],
         "methods": ["test_pad_neuron_float32"]},
        {"folder": "distributed/tensor", "exclude_subfolders": ["debug"], "skip_classes": ["WithLocalTensor"],
         "xfail": [{"tests": ["test_x"], "reason": "does not shard yet"}]},
    ]))
    nn, folder = spec.configs
    assert selects(nn, "test_nn.py", "TestNNDeviceTypeNEURON", "test_pad_neuron_float32", True, "neuron")
    assert selects(nn, "test_nn.py", "TestNNDeviceTypeREFDEV", "test_pad_refdev_float32", True, "refdev")
    assert not selects(nn, "test_nn.py", "TestNNDeviceTypeREFDEV", "test_pad_refdev_float64", True, "refdev")
    assert not selects(nn, "test_nn.py", "TestNNDeviceTypeCPU", "test_pad_cpu_float32", True, "refdev")
    assert selects(folder, "distributed/tensor/parallel/test_tp.py", "TestTP", "test_any", True, "neuron")
    assert not selects(folder, "distributed/tensor/debug/test_d.py", "TestD", "test_any", True, "neuron")
    assert not selects(folder, "distributed/tensor/test_t.py", "TestOpsWithLocalTensor", "test_any", True, "neuron")
    assert not selects(folder, "distributed/tensor/test_t.py", "ImportedBase", "test_any", False, "neuron")


def test_import_lint_export_round_trip(tmp_path, capsys):
    from torchconform.cli.main import main
    from torchconform.skiplists.lint import lint

    out = tmp_path / "fake.yaml"
    assert main(["skiplist", "import", SPEC, "-o", str(out)]) == 0
    assert "2 configurations, 3 xfail, 1 skip" in capsys.readouterr().err
    assert [p for p in lint([str(out)]) if p.severity == "error"] == []
    exported = tmp_path / "back"
    assert main(["skiplist", "export", "--format", "torch-neuronx-spec", str(out), "-o", str(exported)]) == 0
    again = ns.parse_spec(str(exported / "specs" / "fake_spec.json"))
    assert io.same_spec(ns.parse_spec(SPEC), again) == []
    assert [(i.mode, i.form) for c in again.configs for i in c.items] == [
        ("xfail", "list"), ("skip", "individual"), ("xfail", "grouped")]
    with open(os.path.join(FIX, "failing_test_methods", "TestFakeTensorOps.json")) as a, \
            open(exported / "failing_test_methods" / "TestFakeTensorOps.json") as b:
        assert json.load(a) == json.load(b)
    # an entry added by hand goes back as a new item of its configuration
    out.write_text(out.read_text() + """\
- id: c1.xfail.test_fake_compare_cpu_cos
  match: {regex: 'test_fake_compare_cpu_cos'}
  mode: xfail
  category: known_bug
  reason: cos loses precision on the device
  issue: https://github.com/example/neuron/issues/7
  added: 2026-01-05
""")
    assert main(["skiplist", "export", "--format", "torch-neuronx-spec", str(out), "-o", str(tmp_path / "b2")]) == 0
    data = json.loads((tmp_path / "b2" / "specs" / "fake_spec.json").read_text())
    assert data["test_configurations"][1]["xfail"][-1] == {"tests": ["test_fake_compare_cpu_cos"],
                                                          "reason": "cos loses precision on the device"}


def test_export_refuses_a_plain_skiplist(tmp_path, capsys):
    from torchconform.cli.main import main

    plain = os.path.join(ROOT, "skiplists", "refdev", "young-backend.yaml")
    assert main(["skiplist", "export", "--format", "torch-neuronx-spec", plain, "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no `spec:` section" in err and err.count("\n") == 1


def test_run_with_a_spec_on_the_fake_checkout(tmp_path):
    src = tmp_path / "pytorch"
    shutil.copytree(os.path.join(FAKE_SRC, "test"), src / "test")
    shutil.copy(os.path.join(FAKE_SRC, "version.txt"), src / "version.txt")
    out, db = tmp_path / "out.jsonl", tmp_path / "r.db"
    proc = subprocess.run([sys.executable, "-m", "torchconform", "run", "--suite", "upstream", "--spec", SPEC,
                           "--pytorch-src", str(src), "--device", "refdev", "-n", "0", "--db", str(db),
                           "--build", "spec1", "--jsonl", str(out)],
                          cwd=str(tmp_path), env=child_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    got = {r["test_id"].split("::", 1)[1]: r for r in rows if r.get("type") == "outcome"}
    # only what the spec selects: the class (suffix mapped to REFDEV) and the listed methods
    assert set(got) == {
        "TestFakeTensorOpsREFDEV::test_fake_view_refdev", "TestFakeTensorOpsREFDEV::test_fake_cpu_only_refdev",
        "TestFakeTensorOpsREFDEV::test_fake_trunc_refdev_float32", "TestFakeTensorOpsREFDEV::test_fake_trunc_refdev_float64",
        "TestFakeCommonREFDEV::test_fake_add_scalar_refdev", "TestFakeCommonREFDEV::test_fake_compare_cpu_add_refdev_float32",
        "TestFakeCommonREFDEV::test_fake_compare_cpu_cos_refdev_float32"}

    def row(name):
        r = got[name]
        return r["outcome"], r["kind"], r["skiplist_entry"]

    assert row("TestFakeTensorOpsREFDEV::test_fake_view_refdev") == ("xpass", "", "fake_spec.json::c0.xfail0.test_fake_view_neuron")
    assert row("TestFakeCommonREFDEV::test_fake_add_scalar_refdev") == ("xpass", "", "fake_spec.json::c1.xfail0.test_fake_add_scalar")
    assert row("TestFakeTensorOpsREFDEV::test_fake_cpu_only_refdev") == (
        "skip_backend", "skiplist", "fake_spec.json::c0.skip0.test_fake_cpu_only_neuron")
    assert "meaningful on CPU hosts only" in got["TestFakeTensorOpsREFDEV::test_fake_cpu_only_refdev"]["message"]
    # an xfail entry on a test blocked by a missing operator: still a missing_op, the entry kept on the record
    trunc = got["TestFakeTensorOpsREFDEV::test_fake_trunc_refdev_float64"]
    assert (trunc["kind"], trunc["skiplist_entry"]) == ("missing_op", "fake_spec.json::c0.xfail0.test_fake_trunc_neuron_float64")
    assert got["TestFakeTensorOpsREFDEV::test_fake_trunc_refdev_float32"]["skiplist_entry"] == ""
    # the stale expectations, from the stored build
    prune = subprocess.run([sys.executable, "-m", "torchconform", "skiplist", "propose", "--build", "spec1", "--db",
                            str(db), "--skiplist", SPEC, "--prune"], cwd=str(tmp_path), env=child_env(),
                           capture_output=True, text=True, timeout=300)
    assert prune.returncode == 0, prune.stderr
    assert "2 entries proposed for removal" in prune.stdout
    assert "c0.xfail0.test_fake_view_neuron" in prune.stdout and "c1.xfail0.test_fake_add_scalar" in prune.stdout
    assert "test_fake_trunc_neuron_float64" not in prune.stdout.split("remove:", 1)[1]
