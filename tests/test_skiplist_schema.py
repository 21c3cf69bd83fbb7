"""Skiplist format, validation with file:line, matching, lint checks (library level, no subprocess)."""
import datetime as dt
import textwrap

import pytest

from torchconform.core.outcome import Outcome
from torchconform.errors import UserError
from torchconform.skiplists.entries import TestInfo, first_match, info_from_outcome, ref_from_message
from torchconform.skiplists.lint import lint
from torchconform.skiplists.schema import load_skiplist, parse_skiplist

GOOD = """\
backend: refdev
entries:
  - id: sort-stable
    match: {op: sort, dtype: [float32, float64], kind: test_compare_cpu}
    mode: skip
    category: unsupported_feature
    reason: stable sort is not implemented yet
    issue: https://github.com/example/refdev/issues/1
    added: 2026-11-01
  - id: div-floor
    match: {op: div, variant: floor_rounding}
    mode: xfail
    category: known_bug
    reason: floor division rounds toward zero
    issue: https://github.com/example/refdev/issues/2
    added: 2026-11-01
    expires: 2027-06-01
    torch: ">=2.12,<2.15"
  - id: one-test
    match: {test: "*TestThing*::test_exact_refdev"}
    mode: skip
    category: flaky
    reason: fails one run in twenty
    issue: https://github.com/example/refdev/issues/3
    added: 2026-11-01
  - id: by-regex
    match: {regex: "test_out_(add|mul)_refdev"}
    mode: xfail
    category: known_bug
    reason: out= resize is wrong for these two
    issue: https://github.com/example/refdev/issues/4
    added: 2026-11-01
"""


def write(tmp_path, text, name="list.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_good_file_loads_with_positions(tmp_path):
    path = write(tmp_path, GOOD)
    sl = load_skiplist(path)
    assert sl.backend == "refdev"
    assert [e.id for e in sl.entries] == ["sort-stable", "div-floor", "one-test", "by-regex"]
    assert [e.line for e in sl.entries] == [3, 10, 19, 26]
    sort = sl.entries[0]
    assert sort.dtypes == ("float32", "float64") and sort.kind == "test_compare_cpu"
    assert sort.ref == "list.yaml::sort-stable"
    assert sl.entries[1].expires == dt.date(2027, 6, 1)
    assert lint([path], today=dt.date(2026, 12, 1), torch_version="2.13.0+cpu") == []


def test_matching_by_op_variant_dtype_kind_glob_and_regex(tmp_path):
    entries = load_skiplist(write(tmp_path, GOOD)).entries
    today, tv = dt.date(2026, 12, 1), "2.13.0"

    def find(**kw):
        e = first_match(entries, TestInfo(**{"test_id": "f.py::C::t", **kw}), today, tv)
        return e.id if e else None

    assert find(op="sort", dtype="float32", kind="test_compare_cpu") == "sort-stable"
    assert find(op="sort", dtype="int64", kind="test_compare_cpu") is None
    assert find(op="sort", dtype="float32", kind="test_out") is None
    assert find(op="div", op_variant="floor_rounding", dtype="int64", kind="test_out") == "div-floor"
    assert find(op="div", op_variant="", kind="test_out") is None
    # The store keeps OpInfo full names in ``op``; the same entry matches.
    assert find(op="div.floor_rounding", kind="test_out") == "div-floor"
    assert first_match(entries, TestInfo("suites/x.py::TestThingREFDEV::test_exact_refdev"), today, tv).id == "one-test"
    assert first_match(entries, TestInfo("x.py::C::test_out_mul_refdev_float32"), today, tv).id == "by-regex"
    assert first_match(entries, TestInfo("x.py::C::test_out_sub_refdev_float32"), today, tv) is None


def test_expiry_and_torch_range_switch_entries_off(tmp_path):
    entries = load_skiplist(write(tmp_path, GOOD)).entries
    div = TestInfo("t", op="div", op_variant="floor_rounding", kind="test_out")
    assert first_match(entries, div, dt.date(2027, 5, 31), "2.13.0").id == "div-floor"
    assert first_match(entries, div, dt.date(2027, 6, 2), "2.13.0") is None       # expired
    assert first_match(entries, div, dt.date(2027, 1, 1), "2.15.1+cu124") is None  # out of range


def test_outcome_records_match_like_items(tmp_path):
    entries = load_skiplist(write(tmp_path, GOOD)).entries
    o = Outcome(test_id="suites/ops/test_ops.py::TestCommonREFDEV::test_compare_cpu_sort_refdev_float64",
                outcome="fail", op="sort", variant="compare_cpu", dtype="float64",
                name="test_compare_cpu_sort_refdev_float64")
    assert info_from_outcome(o).kind == "test_compare_cpu"
    assert first_match(entries, info_from_outcome(o), dt.date(2026, 12, 1), "2.13.0").id == "sort-stable"


def test_skip_reason_carries_the_entry(tmp_path):
    entry = load_skiplist(write(tmp_path, GOOD)).entries[0]
    reason = entry.skip_reason()
    assert reason.startswith("torchconform skiplist: list.yaml::sort-stable: stable sort")
    assert ref_from_message("Skipped: " + reason) == "list.yaml::sort-stable"
    # The runner's classifier reads the same reference out of the reason.
    from torchconform.core.classify import classify_text

    v = classify_text(reason, None, status="skipped")
    assert (v.outcome, v.kind, v.skiplist_entry) == ("skip_backend", "skiplist", "list.yaml::sort-stable")


@pytest.mark.parametrize("snippet, line, words", [
    ("    mode: sometimes\n", 4, "mode 'sometimes' is not one of skip, xfail"),
    ("    categry: flaky\n", 5, "unknown entry key 'categry'; did you mean 'category'?"),
    ("    issue2: x\n", 5, "unknown entry key 'issue2'; did you mean 'issue'?"),
])
def test_schema_errors_name_the_line(tmp_path, snippet, line, words):
    base = """\
backend: refdev
entries:
  - match: {op: add}
PLACE    category: known_bug
    reason: add is wrong for big inputs
    issue: https://github.com/example/refdev/issues/9
    added: 2026-11-01
"""
    text = base.replace("PLACE", snippet if "mode" in snippet else "    mode: skip\n" + snippet)
    _, problems = parse_skiplist(write(tmp_path, text))
    assert any(p.line == line and words in p.message for p in problems), problems


def test_semantic_errors(tmp_path):
    text = """\
backend: refdev
entries:
  - match: {regex: "test_(foo"}
    mode: xfail
    category: crashes_device
    reason: short
    issue: not-a-url
    added: 2026-13-01
  - match: {test: "*x*", dtype: float32}
    mode: skip
    category: flaky
    reason: a test glob with a dtype
    issue: https://issue.invalid/file-an-issue-and-paste-its-url
    added: 2026-11-01
    expires: 2026-10-01
"""
    _, problems = parse_skiplist(write(tmp_path, text))
    got = {(p.line, p.code, p.message.split(";")[0].split(":")[0]) for p in problems}
    messages = " | ".join(f"{p.line}:{p.message}" for p in problems)
    assert (3, "regex", "bad regex 'test_(foo'") in got, messages
    assert "4:category crashes_device needs mode skip" in messages
    assert "6:`reason` must say" in messages
    assert "7:`issue` must be the tracking issue" in messages
    assert "8:`added` must be a date" in messages
    assert "9:`dtype` only works with `op`" in messages
    assert "13:`issue` is still the placeholder URL" in messages
    assert "15:`expires` (2026-10-01) must be after `added`" in messages


def test_yaml_syntax_and_duplicate_keys_are_positioned(tmp_path):
    _, problems = parse_skiplist(write(tmp_path, "backend: refdev\nentries:\n  - match: {op: add\n"))
    assert problems[0].code == "yaml" and problems[0].line >= 3
    _, problems = parse_skiplist(write(tmp_path, "backend: refdev\nbackend: cpu\nentries: []\n", "dup.yaml"))
    assert problems[0].line == 2 and "duplicate key 'backend' (first at line 1)" in problems[0].message
    with pytest.raises(UserError, match=r"dup\.yaml:2: duplicate key"):
        load_skiplist(str(tmp_path / "dup.yaml"))


def test_lint_duplicates_overlaps_expired(tmp_path):
    text = GOOD + """\
  - id: sort-again
    match: {op: sort, dtype: [float32, float64], kind: test_compare_cpu}
    mode: skip
    category: unsupported_feature
    reason: same match as sort-stable
    issue: https://github.com/example/refdev/issues/1
    added: 2026-11-01
  - id: sort-f32
    match: {op: sort, dtype: float32, kind: test_compare_cpu}
    mode: skip
    category: unsupported_feature
    reason: narrower than sort-stable, never applies
    issue: https://github.com/example/refdev/issues/1
    added: 2026-11-01
  - id: exact-covered
    match: {test: "tests/a.py::TestThingREFDEV::test_exact_refdev"}
    mode: skip
    category: flaky
    reason: covered by the one-test glob above
    issue: https://github.com/example/refdev/issues/3
    added: 2026-11-01
"""
    path = write(tmp_path, text)
    problems = lint([path], today=dt.date(2027, 7, 1), torch_version="2.13.0")
    by_code = {}
    for p in problems:
        by_code.setdefault(p.code, []).append(p)
    assert [p.line for p in by_code["duplicate"]] == [33]
    assert sorted(p.line for p in by_code["overlap"]) == [40, 47]
    assert [p.line for p in by_code["expired"]] == [10]
    assert all(p.severity == "error" for p in problems)


def test_lint_against_collected_tests_finds_stale_entries(tmp_path):
    path = write(tmp_path, GOOD)
    collected = [TestInfo("s.py::TestCommonREFDEV::test_compare_cpu_sort_refdev_float32", op="sort",
                          dtype="float32", kind="test_compare_cpu"),
                 TestInfo("s.py::TestCommonREFDEV::test_out_add_refdev_float32", op="add", dtype="float32", kind="test_out")]
    problems = lint([path], collected=collected, today=dt.date(2026, 12, 1), torch_version="2.13.0")
    stale = sorted(p.message.split()[1] for p in problems if p.code == "stale")
    assert stale == ["div-floor", "one-test"]
    assert not [p for p in problems if p.code != "stale"]


def test_propose_groups_failures_and_file_edits_round_trip(tmp_path):
    from torchconform.skiplists import propose as pr

    path = write(tmp_path, GOOD)
    existing = load_skiplist(path).entries
    outs = [Outcome(test_id=f"s.py::TestCommonREFDEV::test_out_topk_refdev_{d}", outcome="fail", op="topk",
                    variant="out", dtype=d, name=f"test_out_topk_refdev_{d}", device="refdev:0",
                    message="RuntimeError: out: wrong shape") for d in ("int64", "float32")]
    outs += [Outcome(test_id="m.py::T::test_boom", outcome="crash", name="test_boom", device="refdev:0",
                     message="worker crashed"),
             Outcome(test_id="m.py::T::test_slow", outcome="timeout", name="test_slow", device="refdev:0"),
             # already covered by sort-stable: no candidate
             Outcome(test_id="s.py::TestCommonREFDEV::test_compare_cpu_sort_refdev_float32", outcome="fail",
                     op="sort", variant="compare_cpu", dtype="float32", name="test_compare_cpu_sort_refdev_float32")]
    cands = pr.propose_entries(outs, existing, "b1", issue="https://github.com/example/refdev/issues/50",
                               today=dt.date(2026, 12, 1))
    got = {c.entry["id"]: (c.entry["match"], c.entry["mode"], c.entry["category"], len(c.tests)) for c in cands}
    # the covered failure is said in the report, not silently dropped
    already = pr.covered(outs, existing, today=dt.date(2026, 12, 1))
    assert [(tid.rsplit("::", 1)[1], e.id) for tid, e in already] == [("test_compare_cpu_sort_refdev_float32", "sort-stable")]
    report = pr.render_report("b1", cands, [], "refdev", already)
    assert "# 1 failing test(s) left out: already covered by entries of" in report and "sort-stable" in report
    assert got == {
        "topk-test_out": ({"op": "topk", "dtype": ["float32", "int64"], "kind": "test_out"}, "xfail", "known_bug", 2),
        "test_boom": ({"test": "m.py::T::test_boom"}, "skip", "crashes_device", 1),
        "test_slow": ({"test": "m.py::T::test_slow"}, "skip", "too_slow", 1),
    }
    pr.append_entries(path, cands, "refdev")
    after = load_skiplist(path).entries
    assert [e.id for e in after][-3:] == ["topk-test_out", "test_boom", "test_slow"]
    assert lint([path], today=dt.date(2026, 12, 1), torch_version="2.13.0") == []
    pr.remove_entries([pr.Removal(e, "stale") for e in after if e.id in ("div-floor", "test_boom")])
    assert [e.id for e in load_skiplist(path).entries] == ["sort-stable", "one-test", "by-regex", "topk-test_out", "test_slow"]
    # Removals come from a build: passing tests or none at all; skipped tests say nothing.
    build = [Outcome(test_id="x::TestThingREFDEV::test_exact_refdev", outcome="skip_backend", kind="skiplist",
                     skiplist_entry="list.yaml::one-test"),
             Outcome(test_id="s.py::C::test_out_topk_refdev_int64", outcome="xpass", op="topk", variant="out",
                     dtype="int64", name="test_out_topk_refdev_int64")]
    removals = {r.entry.id: r.why for r in pr.propose_removals(build, load_skiplist(path).entries)}
    assert set(removals) == {"sort-stable", "by-regex", "topk-test_out", "test_slow"}
    assert removals["topk-test_out"].startswith("all 1 matched test(s) passed (1 xpass)")


def test_module_names_match_in_either_spelling(tmp_path):
    # Live items carry ModuleInfo names (nn.GELU), stored outcomes formatted ones (nn_GELU).
    path = write(tmp_path, GOOD.replace("match: {test: \"*TestThing*::test_exact_refdev\"}", "match: {op: nn_GELU}"))
    entries = load_skiplist(path).entries
    for op in ("nn.GELU", "nn_GELU"):
        assert first_match(entries, TestInfo("t", op=op, kind="test_cpu_gpu_parity"), dt.date(2026, 12, 1), "2.13.0").id == "one-test"
    assert first_match(entries, TestInfo("t", op="nn.GELUx"), dt.date(2026, 12, 1), "2.13.0") is None


def test_propose_report_is_yaml(tmp_path):
    import yaml

    from torchconform.skiplists import propose as pr

    entries = load_skiplist(write(tmp_path, GOOD)).entries
    outs = [Outcome(test_id="m.py::T::test_boom", outcome="crash", name="test_boom", device="refdev:0",
                    message="Fatal Python error: Segmentation fault: at 0x0")]
    report = pr.render_report("b: 1", pr.propose_entries(outs, entries, "b: 1"),
                              pr.propose_removals(outs, entries), "refdev")
    data = yaml.safe_load(report)
    assert data["backend"] == "refdev" and data["entries"][0]["match"] == {"test": "m.py::T::test_boom"}
    assert data["entries"][0]["reason"].startswith("crash on refdev in build b: 1: Fatal Python error")
    assert [r["id"] for r in data["remove"]] == ["sort-stable", "div-floor", "one-test", "by-regex"]
    assert data["remove"][0]["at"].endswith("list.yaml:3")
