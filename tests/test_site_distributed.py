"""The build page's "Distributed APIs × outcome" table (dashboard/distributed.py): rows, counts,
missing names, the overlap trait, escaping, and no table for a build without the suite."""
import html as htmllib
import json
import re

import pytest

from torchconform.core.outcome import Outcome
from torchconform.core.traitnotes import not_measurable, trait_note
from torchconform.dashboard import build_site, distributed
from torchconform.db.opening import open_store

FILE = "suites/distributed/test_distributed.py"
XSS_MESSAGE = 'AssertionError: rank 1 <script>alert("dist")</script> & more'
XSS_OP = "<img src=x onerror=alert(7)>"


def _dist(name, op, outcome, kind="", **extra):
    return Outcome(f"{FILE}::{name}", outcome, suite="distributed", file=FILE, name=name, op=op,
                   device="refdev:0", kind=kind, **extra)


def _overlap(overlaps, fraction):
    note = trait_note("overlap", {"overlaps": overlaps, "fraction": fraction},
                      {"comm_s": 0.01, "compute_s": 0.02, "per_rank_fraction": [fraction, fraction]})
    return _dist("test_overlap[overlap]", "overlap", "pass", message=note)


def d1_outcomes():
    return [
        _dist("test_collective_all_reduce[c10d-float32]", "all_reduce", "pass"),
        _dist("test_collective_all_reduce[functional-float32]", "all_reduce", "pass_fallback",
              fallback_ops=["aten::add.out"]),
        _dist("test_collective_all_reduce[c10d-int64]", "all_reduce", "fail", dtype="int64", message=XSS_MESSAGE),
        _dist("test_collective_broadcast[c10d-float32]", "broadcast", "pass"),
        _dist("test_collective_all_to_all[list-float32]", "all_to_all", "skip_backend", kind="missing_collective",
              missing_op="all_to_all", message="refdev's c10d backend has no all_to_all"),
        _dist("test_collective_all_to_all[tensor-float32]", "all_to_all", "skip_backend", kind="missing_collective",
              missing_op="all_to_all", message="refdev's c10d backend has no all_to_all"),
        _dist("test_collective_barrier[barrier]", "barrier", "crash", message="rank 1 died (signal 11)"),
        _dist("test_collective_send_recv[send_recv]", "send_recv", "timeout", message="ranks killed after 60 s"),
        _dist("test_ddp[ddp-steps]", "ddp", "pass"),
        _dist("test_ddp[ddp-no_sync]", "ddp", "pass"),
        _dist("test_fsdp[fsdp-True]", "fsdp", "pass"),
        _dist("test_fsdp_state_dict[fsdp]", "fsdp", "skip_backend", kind="missing_device_api",
              missing_op="torch.refdev.Stream"),
        _dist("test_dtensor_distribute[dtensor-shard_0]", "dtensor", "pass"),
        _dist("test_dtensor_redistribute[dtensor-shard_0->replicate]", "dtensor", "skip_eligibility",
              message="Skipped: needs 4 ranks"),
        _dist("test_dtensor_ops[dtensor-matmul]", "dtensor", "xfail"),
        _dist("test_tensor_parallel[tensor_parallel]", "tensor_parallel", "skip_backend",
              kind="missing_c10d_backend", missing_op="refdev"),
        _overlap(False, 0.0),
        _dist("test_pipeline[x]", XSS_OP, "error", message="no pipeline"),
        # not the distributed suite: never counted in the table
        Outcome("suites/ops/test_ops.py::T::test_forward_add_refdev_float32", "fail", suite="ops",
                file="suites/ops/test_ops.py", name="test_forward_add_refdev_float32", op="all_reduce",
                variant="forward", dtype="float32"),
    ]


def d2_outcomes():
    """d1 a build later: all_to_all implemented, and the overlap probe overlaps."""
    fixed = {f"{FILE}::test_collective_all_to_all[list-float32]", f"{FILE}::test_collective_all_to_all[tensor-float32]",
             f"{FILE}::test_overlap[overlap]"}
    out = [o for o in d1_outcomes() if o.test_id not in fixed]
    out += [_dist("test_collective_all_to_all[list-float32]", "all_to_all", "pass"),
            _dist("test_collective_all_to_all[tensor-float32]", "all_to_all", "pass"),
            _overlap(True, 0.62)]
    return out


def plain_outcomes():
    return [Outcome("suites/ops/test_ops.py::T::test_forward_mul_refdev_float32", "pass", suite="ops",
                    file="suites/ops/test_ops.py", name="test_forward_mul_refdev_float32", op="mul",
                    variant="forward", dtype="float32")]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("site-distributed")
    db = root / "store.db"
    with open_store(str(db)) as store:
        for name, branch, outcomes in (("d1", "main", d1_outcomes()), ("d2", "main", d2_outcomes()),
                                       ("plain", "release", plain_outcomes())):
            store.ensure_build(name, branch=branch, device="refdev", backend="refdev", profile="full",
                               torch_version="2.13.0", commit="abc")
            run = store.start_run(name, suite="distributed", selection="fixture", host="test")
            store.add_outcomes(run, outcomes)
            store.finish_run(run, 0)
        build_site(store, root / "out")
    return {"db": db, "out": root / "out"}


def page(built, slug):
    return (built["out"] / "builds" / slug / "index.html").read_text(encoding="utf-8")


def table_rows(html):
    """{API: [cell texts]} of the distributed table on a build page (texts unescaped)."""
    m = re.search(r'<table id="distributed" class="data">(.*?)</table>', html, re.S)
    assert m, "no distributed table"
    heads = [htmllib.unescape(h) for h in re.findall(r'data-col="\d+">(.*?)</button>', m.group(1))]
    assert heads == distributed.COLUMNS
    rows = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", m.group(1).split("<tbody>", 1)[1], re.S):
        cells = [htmllib.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        rows[cells[1]] = dict(zip(distributed.COLUMNS, cells))
    return rows


def test_rows_per_api_in_order_with_counts(built):
    rows = table_rows(page(built, "d1"))
    assert list(rows) == ["all_reduce", "broadcast", "all_to_all", "barrier", "send_recv", "ddp", "fsdp",
                          "dtensor", "tensor_parallel", "overlap", XSS_OP]
    assert {a for a, r in rows.items() if r["group"] == "Collectives"} == \
        {"all_reduce", "broadcast", "all_to_all", "barrier", "send_recv"}
    ar = rows["all_reduce"]
    # the ops-suite failure with op all_reduce is not the distributed suite's
    assert (ar["tests"], ar["passed"], ar["failed"], ar["failure kinds"]) == ("3", "2", "1", "fail 1")
    assert ar["first failure"] == f"test_collective_all_reduce[c10d-int64] (fail): {XSS_MESSAGE}"
    assert (rows["barrier"]["failed"], rows["barrier"]["failure kinds"]) == ("1", "crash 1")
    assert rows["barrier"]["first failure"] == "test_collective_barrier[barrier] (crash): rank 1 died (signal 11)"
    assert rows["send_recv"]["failure kinds"] == "timeout 1"
    assert (rows["ddp"]["tests"], rows["ddp"]["passed"]) == ("2", "2")
    # test_fsdp_state_dict belongs to FSDP, with the device attribute it lacks
    fsdp = rows["fsdp"]
    assert (fsdp["group"], fsdp["tests"], fsdp["passed"], fsdp["skip_backend"]) == ("FSDP", "2", "1", "1")
    assert fsdp["missing (kind)"] == "torch.refdev.Stream (missing_device_api)"
    dt = rows["dtensor"]
    assert (dt["group"], dt["tests"], dt["passed"], dt["other skipped"], dt["xfail / xpass"]) == \
        ("DTensor", "3", "1", "1", "1")
    assert rows["tensor_parallel"]["missing (kind)"] == "refdev (missing_c10d_backend)"
    assert rows["tensor_parallel"]["group"] == "Tensor parallelism"
    # an API the table does not know yet is still counted, under Other
    assert (rows[XSS_OP]["group"], rows[XSS_OP]["failure kinds"]) == ("Other", "error 1")


def test_missing_collective_shown_for_skip_backend(built):
    rows = table_rows(page(built, "d1"))
    a2a = rows["all_to_all"]
    assert (a2a["tests"], a2a["passed"], a2a["failed"], a2a["skip_backend"]) == ("2", "0", "0", "2")
    assert a2a["missing (kind)"] == "all_to_all (missing_collective)"
    assert rows["broadcast"]["missing (kind)"] == ""
    # a build later all_to_all runs: no skip, no missing name
    a2a = table_rows(page(built, "d2"))["all_to_all"]
    assert (a2a["passed"], a2a["skip_backend"], a2a["missing (kind)"]) == ("2", "0", "")


def test_overlap_fraction_from_the_trait_note(built):
    d1, d2 = table_rows(page(built, "d1")), table_rows(page(built, "d2"))
    assert (d1["overlap"]["group"], d1["overlap"]["passed"]) == ("Overlap", "1")
    assert d1["overlap"]["overlap"] == "no overlap (0.00)"
    assert d2["overlap"]["overlap"] == "overlaps (0.62)"
    # only the overlap probe carries the trait
    assert {a for a, r in d1.items() if r["overlap"]} == {"overlap"}


def test_download_matches_the_store_query(built):
    records = json.loads((built["out"] / "builds/d1/distributed.json").read_text(encoding="utf-8"))
    with open_store(str(built["db"])) as store:
        expected = distributed.table("", distributed.from_store(store, "d1")).records()
        assert distributed.from_store(store, "plain") == []
    assert records == expected
    assert next(r for r in records if r["API"] == "all_to_all")["skip_backend"] == 2
    # every distributed outcome is in exactly one row
    assert sum(r["tests"] for r in records) == len([o for o in d1_outcomes() if o.suite == "distributed"])


def test_test_strings_are_escaped(built):
    html = page(built, "d1")
    assert "<script>alert(" not in html and "<img src=x" not in html
    # shown, as text
    assert "&lt;script&gt;alert(&#34;dist&#34;)&lt;/script&gt; &amp; more" in html
    assert "&lt;img src=x onerror=alert(7)&gt;" in html


def test_build_without_distributed_outcomes_has_no_table(built):
    html = page(built, "plain")
    assert "Distributed APIs" not in html and 'id="distributed"' not in html
    assert not (built["out"] / "builds/plain/distributed.json").exists()
    d1 = page(built, "d1")
    assert 'href="#distributed-title"' in d1 and "Distributed APIs \u00d7 outcome" in d1
    assert (built["out"] / "builds/d1/distributed.csv").is_file()


def test_api_of_and_overlap_text():
    assert distributed.api_of("test_collective_all_to_all[tensor-float32]", "all_to_all") == \
        ("Collectives", "all_to_all")
    # the name says which collective when the op is not one
    assert distributed.api_of("test_collective_reduce_scatter[list-float32]", "") == \
        ("Collectives", "reduce_scatter")
    assert distributed.api_of("test_fsdp_state_dict[fsdp]", "fsdp") == ("FSDP", "fsdp")
    assert distributed.api_of("test_dtensor_ops[dtensor-add]", "dtensor") == ("DTensor", "dtensor")
    assert distributed.api_of("test_ddpx[y]", "ddpx") == ("Other", "ddpx")
    assert distributed.overlap_text({"overlaps": True, "fraction": 0.6249}) == "overlaps (0.62)"
    assert distributed.overlap_text(not_measurable("no streams", overlaps=None, fraction=None)) == \
        "not measurable: no streams"
    assert distributed.summarize([]) == []
