"""The traits suite (suites/traits): run through the CLI on refdev young-backend, refdev
full, a profile that copies non-contiguous inputs, and the CPU; every trait key of
``summary --json`` must equal the ground truth (``refdev describe --json``'s
``expected_traits``; plain CPU for cpu).  Plus the trait-note parser and the one
source of truth for refdev's dtype policy."""
import json
import os
import subprocess
import sys

import pytest

from support import child_env
from torchconform.core.outcome import MESSAGE_LIMIT
from torchconform.core.traitnotes import not_measurable, parse_trait_note, trait_note, traits_from_messages
from torchconform.errors import UserError
from torchconform.db.readback import lookup

TC = [sys.executable, "-m", "torchconform"]
PROBE_PROFILE = os.path.join(os.path.dirname(__file__), "fixtures", "refdev", "probe.yaml")
KEYS = ("precision.float64.executes_as", "noncontiguous_copy.copies", "static_shapes.recompiles_per_new_shape",
        "fallback.eager_ops", "fallback.compile_fallback", "placeholder_outputs.ops", "memory_stats.lags_without_sync")
# The CPU as a device: computes float64 in float64, copies nothing, no fallback or
# placeholder, and torch.cpu has no memory counters (not measurable: None, never a guess).
PLAIN_CPU = {"precision.float64.executes_as": "float64", "noncontiguous_copy.copies": False,
             "static_shapes.recompiles_per_new_shape": 0.0, "fallback.eager_ops": [],
             "fallback.compile_fallback": False, "placeholder_outputs.ops": [], "memory_stats.lags_without_sync": None}


def tc(args, cwd, check=0):
    proc = subprocess.run(TC + [str(a) for a in args], cwd=cwd, env=child_env(), capture_output=True, text=True,
                          timeout=900)
    if check is not None:
        assert proc.returncode == check, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def run_traits(tmp_path, device, *extra):
    db = tmp_path / "t.db"
    tc(["run", "--suite", "traits", "--device", device, "--db", db, "--build", "b", "-n", "0", *extra], tmp_path)
    summary = json.loads(tc(["summary", "--build", "b", "--json", "--db", db], tmp_path).stdout)
    text = tc(["summary", "--build", "b", "--db", db], tmp_path).stdout
    return summary, text


def describe(tmp_path, profile):
    return json.loads(tc(["refdev", "describe", "--json", "--profile", profile], tmp_path).stdout)


@pytest.fixture(scope="module", params=["young-backend", "full", PROBE_PROFILE, "boxed-backend"],
                ids=["young-backend", "full", "probe", "boxed-backend"])
def refdev_run(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("traits")
    summary, text = run_traits(tmp, "refdev", "--refdev-profile", request.param)
    return summary, text, describe(tmp, request.param)


def test_refdev_traits_equal_describe(refdev_run):
    summary, _, info = refdev_run
    assert summary["outcomes"]["fail"] == 0 and summary["outcomes"]["error"] == 0, summary
    got = {key: lookup(summary["traits"], key) for key in KEYS}
    assert got == {key: info["expected_traits"][key] for key in KEYS}
    copies = info["traits"]["copies_noncontiguous"]
    per_call = lookup(summary["traits"], "noncontiguous_copy.bytes_per_call")
    # the probe's input is 64 x 32 float32 (8192 bytes); each copy of it is whole
    assert (per_call > 0 and per_call % 8192 == 0) if copies else per_call == 0


def test_young_backend_shows_its_traps(refdev_run):
    summary, _, info = refdev_run
    if info["profile"] != "young-backend":
        pytest.skip("young-backend only")
    traits = summary["traits"]
    assert traits["precision"]["float64"]["executes_as"] == "float32"
    assert traits["placeholder_outputs"]["ops"] == ["aten::atan2", "aten::erfinv"]
    assert traits["fallback"]["eager_ops"] == ["aten::cumsum", "aten::kthvalue", "aten::median", "aten::nonzero",
                                               "aten::sort"]
    assert traits["fallback"]["eager_source"] == "counter"
    assert summary["outcomes"]["pass_fallback"] == 1      # the fallback probe, stored like any other outcome


def test_boxed_fallback_is_seen_through_the_dispatcher(refdev_run):
    """PyTorch's boxed CPU fallback neither counts nor warns: the probe sees it through the
    dispatcher, and measures what refdev's ground truth says its workload reaches (the
    fallback's operators among those the probe calls, not the ~100 the fallback serves)."""
    summary, text, info = refdev_run
    if info["fallback_mode"] != "boxed":
        pytest.skip("boxed profiles only")
    fallback = summary["traits"]["fallback"]
    assert fallback["eager_source"] == "dispatcher"
    assert fallback["eager_ops"] == info["expected_traits"]["fallback.eager_ops"] == \
        ["aten::cumsum", "aten::kthvalue", "aten::median", "aten::nonzero", "aten::sort"]
    assert len({op.split(".")[0] for op in info["fallback"]}) > 3 * len(fallback["eager_ops"])
    assert fallback["eager_calls"] == len(fallback["eager_ops"])     # each called once by the workload
    assert "eager CPU fallback ops" in text and "none" not in text.split("eager CPU fallback ops", 1)[1].splitlines()[0]
    assert summary["outcomes"]["pass_fallback"] == 1      # the plugin's own watch saw it too


def test_compile_times_and_environment(refdev_run):
    summary, text, _ = refdev_run
    shapes = summary["traits"]["static_shapes"]
    assert 0 < shapes["warm_call_s"] < shapes["cold_compile_s"]
    env = summary["environment"]
    assert env["cpu_count"] == os.cpu_count() and env["device"] == "refdev"
    assert env["cpu_affinity"] and env["torch"].split("+")[0] in text
    assert "--suite traits" in env["evidence"]["launch"]
    assert "float64 executes as" in text and "environment:" in text


def test_cpu_reads_as_plain_cpu(tmp_path):
    summary, text = run_traits(tmp_path, "cpu")
    assert summary["outcomes"]["fail"] == 0 and summary["outcomes"]["error"] == 0, summary
    assert {key: lookup(summary["traits"], key) for key in KEYS} == PLAIN_CPU
    assert summary["traits"]["noncontiguous_copy"]["bytes_per_call"] == 0
    assert summary["traits"]["memory_stats"]["measurable"] is False
    assert "not measured (torch.cpu exposes no memory_allocated())" in text
    assert summary["environment"]["device"] == "cpu"


def test_a_profile_that_misdeclares_precision_fails(tmp_path):
    """young-backend computes float64 as float32: a backend profile declaring no downcast fails the check."""
    src = open(os.path.join(os.path.dirname(__file__), "..", "skiplists", "refdev", "profile.yaml")).read()
    profile = tmp_path / "profile.yaml"
    profile.write_text(src.replace('downcast: {from: "torchconform.refdev:declared_downcast"}', "downcast: {}"))
    db = tmp_path / "t.db"
    tc(["run", "--suite", "traits", "--device", "refdev", "--profile", profile, "--db", db, "--build", "b", "-n", "0",
        "-k", "precision_matches_profile"], tmp_path, check=None)
    summary = json.loads(tc(["summary", "--build", "b", "--json", "--db", db], tmp_path).stdout)
    assert summary["outcomes"]["fail"] == 1 and summary["outcomes"]["pass"] == 3, summary


def test_refdev_dtype_policy_is_derived_from_describe(monkeypatch):
    from torchconform import refdev
    from torchconform.core.profile import load_profile
    from torchconform.refdev import state

    # A refdev loaded in this process (another test's) is the truth for it: read the files instead.
    monkeypatch.setattr(state, "current", None)
    for name, expected in (("young-backend", {"float64": "float32", "complex128": "complex64"}), ("full", {})):
        monkeypatch.setenv("TORCHCONFORM_REFDEV_PROFILE", name)
        policy = load_profile("refdev").dtype_policy
        assert policy["downcast"] == expected
        assert bool(policy["downcast"]) is refdev.describe(name)["traits"]["float64_as_float32"]
        assert refdev.describe(name)["expected_traits"]["precision.float64.executes_as"] == \
            policy["downcast"].get("float64", "float64")
        # declared, but the suites keep float64 tolerances on refdev (failures stay honest)
        assert policy["downcast_tolerances"] is False


def test_bad_derived_downcast_is_one_line_user_error(tmp_path):
    from torchconform.core.profile import load_profile

    path = tmp_path / "profile.yaml"
    path.write_text("device: refdev\ndtype_policy:\n  downcast: {from: 'no_such_module_x:f'}\n")
    with pytest.raises(UserError, match=r"downcast.from 'no_such_module_x:f' cannot be called") as err:
        load_profile(str(path))
    assert "\n" not in str(err.value)


def test_trait_note_round_trips_and_nests():
    text = trait_note("precision.float64", {"executes_as": "float32"}, {"max_rel_err": 5.9e-08})
    assert text == 'trait: precision.float64 {"evidence":{"max_rel_err":5.9e-08},"executes_as":"float32"}'
    assert parse_trait_note(text) == ("precision.float64", {"evidence": {"max_rel_err": 5.9e-08},
                                                            "executes_as": "float32"})
    other = trait_note("memory_stats", not_measurable("no counters", lags_without_sync=None))
    traits = traits_from_messages([text, other, "compiled: backend=x graphs=1 graph_breaks=0 recompiles=0", "",
                                   "trait: broken {not json}"])
    assert traits == {"precision": {"float64": {"evidence": {"max_rel_err": 5.9e-08}, "executes_as": "float32"}},
                      "memory_stats": {"lags_without_sync": None, "measurable": False, "reason": "no counters",
                                       "evidence": {}}}
    for bad in ("trait: x [1]", "trait:x {}", "AssertionError: trait: x {}", "trait: Bad {}"):
        assert parse_trait_note(bad) is None


def test_trait_note_cuts_evidence_never_values():
    text = trait_note("environment", {"os": "Linux"}, {"launch": "x" * 2000, "big": list(range(300))})
    assert len(text) <= MESSAGE_LIMIT
    name, body = parse_trait_note(text)
    assert name == "environment" and body["os"] == "Linux" and body["evidence_cut"] is True
    with pytest.raises(ValueError):
        trait_note("environment", {"os": "x" * 1000})


def test_the_launch_line_names_the_interpreter_and_script_by_name():
    from torchconform.collectors.environment import _short_program

    venv = "/a/very/long/checkout/path/of/a/ci/runner/.venv/bin"
    assert _short_program([f"{venv}/python3.11", "-m", "torchconform", "run", "--suite", "traits"]) == \
        ["python3.11", "-m", "torchconform", "run", "--suite", "traits"]
    assert _short_program([f"{venv}/python", f"{venv}/torchconform", "run", "--db", "/x/t.db"]) == \
        ["python", "torchconform", "run", "--db", "/x/t.db"]
    assert _short_program(["/usr/bin/env", "torchconform"]) == ["/usr/bin/env", "torchconform"]
