"""The support manifest: claims in the profiles, the pure judge, the store read, the CLI and the
gate's broken_claim rule (small fixtures; no device, no timing)."""
import json
import subprocess
import sys

import pytest
from sqlalchemy import insert

from torchconform.ci.config import parse_config
from torchconform.ci.gate import evaluate
from torchconform.ci.pipeline import gate_build
from torchconform.core.claims import Cell, Claims, feature_of, format_report, judge, matches, opinfo_aten_base
from torchconform.core.dispatch import Row
from torchconform.core.outcome import Outcome
from torchconform.core.profile import load_profile
from torchconform.db.claims import claims_of
from torchconform.db.models import census_ops
from torchconform.db.opening import open_store
from torchconform.errors import UserError
from torchconform.gated import gate_context

CENSUS = [Row("aten::add.Tensor", "native"), Row("aten::add.out", "native"), Row("aten::sin", "native"),
          Row("aten::sin.out", "missing"), Row("aten::cos", "native"), Row("aten::linear", "composite", covered=True),
          Row("aten::_cudnn_rnn", "unavailable"), Row("aten::erf", "composite", covered=False,
                                                      blocked_by=["aten::sin.out"])]


def cell(op, outcome, variant="compare_cpu", dtype="float32", kind="", missing_op="", suite="ops", count=1,
         culprits=()):
    return Cell(suite, op, variant, dtype, outcome, kind, missing_op, count, culprits)


CELLS = [
    cell("add", "pass"), cell("add", "pass", variant="compile_compare_cpu"),
    cell("add", "pass", dtype="float64"),
    cell("sin", "skip_backend", kind="missing_op", missing_op="aten::sin.out"),
    cell("cos", "pass"), cell("cos", "fail", dtype="float64"),       # float64 fails where float32 passes
    cell("cos", "skip_backend", variant="compile_compare_cpu", kind="not_executed"),
    cell("abs", "skip_backend", dtype="complex64", kind="unsupported_dtype"),
    cell("allreduce", "pass", variant="collective_all_reduce", suite="distributed"),
]


def test_patterns_features_and_opinfo_names():
    assert matches("aten::add", "aten::add") and not matches("aten::add", "aten::add.Tensor")
    assert matches("aten::add.*", "aten::add.out") and matches("aten::linalg_*", "aten::linalg_norm.out")
    assert matches("nn.functional.*", "nn.functional.relu") and not matches("add", "addmm")
    assert opinfo_aten_base("nn.functional.relu") == "aten::relu"
    assert opinfo_aten_base("linalg.norm.subgradients_at_zero") == "aten::linalg_norm"
    assert opinfo_aten_base("max.reduction_with_dim") == "aten::max"
    assert [feature_of("ops", v) for v in ("compare_cpu", "out", "compare_cpu_grad", "compile_compare_cpu")] == \
        ["eager", "eager", "autograd", "compile"]
    assert feature_of("distributed", "collective_all_reduce") == "distributed"
    assert feature_of("models", "train") == "autograd" and feature_of("traits", "precision") == ""


def test_verified_broken_unverified_and_undeclared_each_shown():
    claims = Claims(operators=("aten::add.*", "aten::sin*", "aten::cos", "aten::_cudnn_rnn", "aten::nosuch.out",
                               "aten::erf", "nonzero*"),
                    dtypes=("float32", "float64", "complex64", "bfloat16"),
                    features=("eager", "compile", "autocast"))
    report = judge(claims, CELLS, CENSUS)
    ops = {v.claim: v for v in report.operators}
    assert ops["aten::add.Tensor"].state == ops["aten::add.out"].state == "verified"
    assert ops["aten::sin.out"].state == "broken" and "missing in 1 tests" in ops["aten::sin.out"].why
    assert ops["aten::sin"].state == "verified"
    # cos: the float64 fail and the compile placeholders are in the claimed dtypes and features
    assert ops["aten::cos"].state == "broken" and "not_executed" in ops["aten::cos"].why
    assert ops["aten::erf"].state == "broken" and "blocked by aten::sin.out" in ops["aten::erf"].why
    assert ops["aten::_cudnn_rnn"].state == "unverified"            # no backend of this torch has it
    assert ops["aten::nosuch.out"].state == "unverified"
    assert report.unmatched == ["nonzero*"]
    dtypes = {v.claim: v for v in report.dtypes}
    assert dtypes["float32"].state == "verified"
    assert dtypes["float64"].state == "broken" and "cos" in dtypes["float64"].why
    assert dtypes["complex64"].state == "broken" and "refuses" in dtypes["complex64"].why
    assert dtypes["bfloat16"].state == "unverified"
    features = {v.claim: v for v in report.features}
    assert features["eager"].state == "verified"       # cos float64 fails in eager, but nowhere else passes
    assert features["compile"].state == "broken" and "not_executed" in features["compile"].why
    assert features["autocast"].state == "unverified"
    # undeclared: runs or passes without a claim
    assert report.undeclared["operators"] == ["aten::linear"]
    assert report.undeclared["features"] == ["distributed"]
    assert report.undeclared["dtypes"] == []
    assert {v.claim for v in report.broken} == {"aten::sin.out", "aten::cos", "aten::erf", "float64", "complex64",
                                                "compile"}


def test_a_failure_is_blamed_on_the_feature_or_dtype_only_with_a_passing_counterpart():
    cells = [cell("tan", "pass", variant="compile_compare_cpu"), cell("tan", "error"),        # eager's fault
             cell("flip", "error"), cell("flip", "error", variant="compile_compare_cpu"),      # flip's fault
             cell("flip", "error", dtype="int64"),
             cell("all_reduce", "fail", variant="collective_all_reduce", suite="distributed")]
    report = judge(Claims(operators=("aten::tan", "aten::flip"), dtypes=("float32", "int64"),
                          features=("eager", "compile", "distributed")), cells, None)
    verdicts = {v.claim: v for v in report.operators + report.dtypes + report.features}
    assert verdicts["eager"].state == "broken" and "(tan)" in verdicts["eager"].why
    assert verdicts["compile"].state == "verified"
    assert verdicts["distributed"].state == "broken"       # nothing else repeats its tests
    assert verdicts["int64"].state == "unverified" and verdicts["float32"].state == "verified"
    assert verdicts["aten::flip"].state == verdicts["aten::tan"].state == "broken"


def test_coverage_denominator_is_the_census_not_the_claims():
    report = judge(Claims(operators=("aten::add.*",)), CELLS, CENSUS)
    cov = report.coverage()
    assert cov == {"verified": 2, "denominator": len(CENSUS), "census_works": 5, "percent": 25.0}
    text = format_report(report, "b1")
    assert f"2 verified of {len(CENSUS)} ATen overloads the census sees" in text
    none = judge(Claims(operators=("aten::add.*",)), CELLS, None).coverage()
    assert none["denominator"] is None and none["verified"] == 0
    assert "no census for this build, so no denominator" in format_report(judge(Claims(("add",)), CELLS, None))


def test_opinfo_name_claims_are_judged_by_their_tests():
    report = judge(Claims(operators=("add", "sin", "cos", "exp")), CELLS, CENSUS)
    ops = {v.claim: v for v in report.operators}
    assert ops["add"].state == "verified" and ops["sin"].state == "broken" and "aten::sin.out" in ops["sin"].why
    assert ops["cos"].state == "broken"
    assert "exp" not in ops and report.unmatched == ["exp"]


def _write(tmp_path, text, name="p.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_schema_error_in_claims_is_one_line_with_file_and_line(tmp_path):
    path = _write(tmp_path, "device: refdev\nclaims:\n  operators: [aten::add]\n  feature: [eager]\n")
    with pytest.raises(UserError) as err:
        load_profile(path)
    text = str(err.value)
    assert "\n" not in text and f"{path}:4:" in text and "did you mean 'features'" in text
    path = _write(tmp_path, "device: refdev\nclaims:\n  features: [eager, jit]\n  dtypes: [float33]\n")
    with pytest.raises(UserError) as err:
        load_profile(path)
    assert f"{path}:3:" in str(err.value) and "unknown feature 'jit'" in str(err.value) and "1 more" in str(err.value)
    path = _write(tmp_path, 'device: refdev\nclaims:\n  from: "a.b:c"\n  dtypes: [float32]\n')
    with pytest.raises(UserError, match=r"claims: `from` asks the backend"):
        load_profile(path)
    ok = load_profile(_write(tmp_path, "device: x\nclaims:\n  operators: ['aten::add.*']\n  features: [eager]\n"))
    assert ok.declared_claims() == {"operators": ["aten::add.*"], "features": ["eager"]}


def test_refdev_profiles_declare_claims(tmp_path):
    from torchconform.refdev import declared_claims, profile_claims, profiles

    for name in profiles.available():
        assert profiles.load_profile(name).claims["operators"] == "kernels", name
    young = profile_claims(profiles.load_profile("young-backend"))
    resolved = profiles.resolve(profiles.load_profile("young-backend"))
    assert young["operators"] == sorted(resolved.implemented + resolved.fallback)
    assert "float64" not in young["dtypes"] and "distributed" in young["features"]
    assert set(declared_claims()) == {"operators", "dtypes", "features"}   # the active refdev profile's
    bad = _write(tmp_path, "name: b\nclaims:\n  operators: {kernels_of: nosuch}\n")
    with pytest.raises(UserError, match="unknown refdev profile 'nosuch'"):
        profiles.load_profile(bad)
    bad = _write(tmp_path, "name: b\nclaims:\n  feature: [eager]\n")
    with pytest.raises(UserError, match="'claims' must be a mapping with the keys dtypes, features, operators"):
        profiles.load_profile(bad)
    # the test profile: full's kernels claimed, two operators removed
    lacks_profile = profiles.load_profile("tests/fixtures/claims/refdev-lacks-two.yaml")
    lacks = profile_claims(lacks_profile)
    full = profiles.resolve(profiles.load_profile("full"))
    assert lacks["operators"] == sorted(full.implemented + full.fallback)
    gone = set(lacks["operators"]) - set(profiles.resolve(lacks_profile).implemented)
    assert gone and {o.split(".")[0] for o in gone} == {"aten::atan2", "aten::erfinv"}


@pytest.fixture
def store(tmp_path):
    with open_store(str(tmp_path / "c.db")) as s:
        yield s


def _store_build(store, name, outcomes, claims=None, census=()):
    store.ensure_build(name, device="refdev", **({"claims": claims} if claims else {}))
    run = store.start_run(name, suite="ops")
    store.add_outcomes(run, outcomes)
    store.finish_run(run, 0)
    if census:
        build_id = store.build_id(name)
        with store.write() as conn:
            conn.execute(insert(census_ops), [{"build_id": build_id, "op": r.op, "status": r.status, "via": "",
                                               "covered": None if r.covered is None else int(r.covered),
                                               "blocked_by": " ".join(r.blocked_by)} for r in census])


OUTCOMES = [Outcome("t::add", "pass", suite="ops", op="add", variant="compare_cpu", dtype="float32"),
            Outcome("t::sin", "skip_backend", kind="missing_op", missing_op="aten::sin.out", suite="ops", op="sin",
                    variant="compare_cpu", dtype="float32")]
CLAIMS = {"operators": ["aten::add.*", "aten::sin.out"], "dtypes": ["float32"]}


def test_store_read_uses_the_recorded_claims(store):
    _store_build(store, "b1", OUTCOMES, CLAIMS, CENSUS)
    report, source = claims_of(store, "b1", given={"operators": ["aten::cos"]})
    assert source == "recorded with the build"
    assert [v.claim for v in report.broken] == ["aten::sin.out"]
    assert report.coverage()["denominator"] == len(CENSUS)
    _store_build(store, "plain", OUTCOMES)
    assert claims_of(store, "plain")[0] is None
    report, source = claims_of(store, "plain", given={"operators": ["aten::sin.out"]})
    assert "read from the profile now" in source and [v.claim for v in report.broken] == ["aten::sin.out"]


def _rule(store, build, mode):
    config = parse_config({"rules": {"broken_claim": mode}})
    with gate_context(store, None, build):
        return evaluate({}, {}, config).rule("broken_claim")


def test_gate_rule_fails_on_a_broken_claim_when_configured_to(store):
    _store_build(store, "b1", OUTCOMES, CLAIMS, CENSUS)
    _store_build(store, "kept", OUTCOMES, {"operators": ["aten::add.*"], "dtypes": ["float32"]}, CENSUS)
    _store_build(store, "plain", OUTCOMES)
    failed = _rule(store, "b1", "fail")
    assert failed.status == "fail" and failed.count == 1 and "aten::sin" in failed.detail
    assert failed.findings[0]["claim"] == "aten::sin.out" and "missing" in failed.findings[0]["message"]
    assert _rule(store, "b1", "warn").status == "warn"
    assert parse_config({}).rule("broken_claim").mode == "warn"        # the shipped default
    assert _rule(store, "kept", "fail").status == "pass"
    quiet = _rule(store, "plain", "fail")
    assert quiet.status == "pass" and quiet.detail == "no claims recorded with the build"
    # through the whole gate: a first build (no baseline) is judged too, and the report names the claim
    run = gate_build(store, "b1", baseline="latest", config=parse_config({"rules": {"broken_claim": "fail"}}),
                     reruns=0, allow_no_baseline=True)
    assert run.baseline is None and run.exit_code == 1 and "Broken promises (1 claims)" in run.markdown
    assert "aten::sin.out: broken promise" in run.junit


def test_cli_prints_the_report_and_refuses_what_it_cannot_judge(store):
    _store_build(store, "b1", OUTCOMES, CLAIMS, CENSUS)
    _store_build(store, "plain", OUTCOMES)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "torchconform", "claims", *args, "--db", store.url],
                              capture_output=True, text=True, timeout=120)
    out = cli("--build", "b1", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["coverage"]["denominator"] == len(CENSUS) and data["counts"]["operators"]["broken"] == 1
    text = cli("--build", "b1")
    assert text.returncode == 0 and "broken promises: 1" in text.stdout and "aten::sin.out" in text.stdout
    for args, words in ((("--build", "plain"), "recorded no claims"), (("--build", "nosuch"), "unknown build")):
        bad = cli(*args)
        assert bad.returncode == 2 and words in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_build_page_shows_the_claims_escaped(store, tmp_path):
    from torchconform.dashboard.site import build_site

    evil = "<script>alert(1)</script>"
    outcomes = OUTCOMES + [Outcome("t::evil", "fail", suite="ops", op=evil, variant="compare_cpu", dtype="float32")]
    _store_build(store, "b1", outcomes, {"operators": ["aten::add.*", "aten::sin.out", evil], "features": ["eager"]},
                 CENSUS)
    _store_build(store, "plain", OUTCOMES)
    build_site(store, tmp_path / "site")
    pages = {p.parent.name: p.read_text() for p in (tmp_path / "site" / "builds").glob("*/index.html")}
    page = next(t for name, t in pages.items() if "b1" in name)
    assert "Support manifest" in page and f"of {len(CENSUS)} ATen overloads the census sees" in page
    assert evil not in page and "&lt;script&gt;" in page
    assert "broken promise" in page and "aten::sin.out" in page
    plain = next(t for name, t in pages.items() if "plain" in name)
    assert "Support manifest" not in plain


def test_a_leak_is_blamed_on_the_operator_that_leaked():
    from torchconform.db.claims import culprits

    assert culprits("AssertionError: device memory leak: 24576 bytes ...; leaking operators: aten::flip x6, "
                    "aten::add.out x1") == ("aten::add.out", "aten::flip")
    assert culprits("Tensor-likes are not close!") == ()
    cells = [cell("cumsum", "pass"), cell("cumsum", "error", variant="compare_cpu_grad", culprits=("aten::flip",)),
             cell("flip", "pass", variant="compile_compare_cpu")]
    report = judge(Claims(operators=("aten::cumsum", "aten::flip", "cumsum", "flip"), features=("eager", "autograd",
                                                                                                 "compile")),
                   cells, [Row("aten::cumsum", "native"), Row("aten::flip", "native")])
    verdicts = {v.claim: v for v in report.operators + report.features}
    assert verdicts["aten::flip"].state == "broken" and "1 name it as the cause" in verdicts["aten::flip"].why
    assert verdicts["flip"].state == "broken"
    assert verdicts["aten::cumsum"].state == verdicts["cumsum"].state == "verified"
    assert verdicts["autograd"].state == "unverified"        # its one test failed, through flip's fault
    assert verdicts["eager"].state == verdicts["compile"].state == "verified"


def test_store_cells_carry_the_culprits_of_a_leak(store):
    from torchconform.db.claims import result_cells

    leak = Outcome("t::cumsum", "error", suite="ops", op="cumsum", variant="compare_cpu_grad", dtype="float32",
                   message="AssertionError: device memory leak: 8 bytes; leaking operators: aten::flip x2")
    _store_build(store, "b1", OUTCOMES + [leak], CLAIMS)
    cells = {(c.op, c.outcome): c for c in result_cells(store, "b1")}
    assert cells[("cumsum", "error")].culprits == ("aten::flip",) and cells[("cumsum", "error")].count == 1
    assert cells[("add", "pass")].culprits == () and len(cells) == 3
