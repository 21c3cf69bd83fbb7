"""The runner's lean JUnit encoding (packed tc attribute, suite defaults, repro template)
read back exactly, the older forms (packed tc property, one property per field), and
ingest's parsing process (pipeline)."""
import multiprocessing
import os
import signal

import pytest

from pg import db_url, pg_server, store  # noqa: F401  (fixtures)
from torchconform.core.outcome import Outcome
from torchconform.db.junit.write import decode_tc, encode_tc, suite_defaults, write_junit
from torchconform.db import ingest as ingest_module
from torchconform.db.junit import parse as junit_parse
from torchconform.db import read_builds, read_rows
from torchconform.db.ingest import ingest, parse_junit
from torchconform.errors import UserError


def tricky_outcomes(n=60):
    """Mostly one device/suite/outcome (so defaults apply), plus values that must survive
    escaping and override a default with an empty value."""
    out = []
    for i in range(n):
        test_id = f"test/test_ops.py::TestCommonREFDEV::test_add_{i}"
        out.append(Outcome(test_id, "pass", suite="ops",
                           file="test/test_ops.py", cls="TestCommonREFDEV", name=f"test_add_{i}", op="add",
                           variant="forward", dtype="float32", device="refdev:0", duration=0.25,
                           repro=f"/venv/bin/python -m pytest /src/{test_id} --tc-device refdev --tc-ops add"))
    out += [
        # a test id that is not file::class::name, a device and suite off the defaults
        Outcome("weird id;with=signs%20", "skip_backend", kind="missing_op", missing_op="aten::cat.out",
                suite="modules", file="test/test_nn.py", cls="TestX", name="test_y", device="", op="cat",
                repro="/venv/bin/python -m pytest '/src/weird id;with=signs%20' --tc-device refdev --tc-ops cat",
                message="NotImplementedError: Could not run 'aten::cat.out' with arguments from the 'PrivateUse1' backend."),
        Outcome("test/test_ops.py::TestCommonREFDEV::test_mm", "pass_fallback", fallback_ops=["aten::mm", "aten::addmm"],
                suite="ops", file="test/test_ops.py", cls="TestCommonREFDEV", name="test_mm", device="refdev:0",
                repro="pytest 'a;b=c' --tc-device refdev", attempt=2),
        Outcome("test/test_ops.py::TestCommonREFDEV::test_sk", "skip_backend", kind="skiplist",
                skiplist_entry="refdev-3 (a=b; c%)", suite="ops", file="test/test_ops.py", cls="TestCommonREFDEV",
                name="test_sk", device="refdev:0", variant="", dtype="float32"),
        Outcome("test/test_ops.py::TestCommonREFDEV::test_ansi", "fail", suite="ops", file="test/test_ops.py",
                cls="TestCommonREFDEV", name="test_ansi", device="refdev:0",
                message="AssertionError: \x1b[31mred\x1b[0m <b>&\"x\""),
    ]
    # every other outcome class and backend-skip kind, each distinguishable only by its tc fields
    for outcome, kind in (("error", ""), ("crash", ""), ("timeout", ""), ("xfail", ""), ("xpass", ""),
                          ("skip_eligibility", ""), ("skip_backend", "unsupported_dtype"),
                          ("skip_backend", "not_executed")):
        name = f"test_{outcome}_{kind or 'none'}"
        out.insert(len(out) - 1, Outcome(f"test/test_ops.py::TestCommonREFDEV::{name}", outcome, kind=kind,
                                         suite="ops", file="test/test_ops.py", cls="TestCommonREFDEV", name=name,
                                         device="refdev:0", message=f"{outcome} {kind}".strip()))
    return out


def _comparable(o: Outcome) -> dict:
    d = o.to_dict()
    d["duration"] = round(d["duration"], 3)
    return d


def test_tc_property_escaping_round_trips():
    fields = [("outcome", "pass"), ("repro", "a=b; c%3B %25 %"), ("skiplist_entry", ""), ("op", "x")]
    assert decode_tc(encode_tc(fields)) == dict(fields)
    with pytest.raises(ValueError, match="malformed tc value"):
        decode_tc("outcome=pass;op")


def test_lean_junit_round_trips_every_field(tmp_path):
    outcomes = tricky_outcomes()
    path = tmp_path / "run.xml"
    write_junit(str(path), {"build": "b", "suite": "ops", "device": "refdev"}, outcomes)
    text = path.read_text()
    defaults = suite_defaults(outcomes)
    assert defaults["device"] == "refdev:0" and defaults["outcome"] == "pass" and defaults["suite"] == "ops"
    assert '<property name="tc.default.device" value="refdev:0" />' in text
    # the repro commands differ only by test id and op: the suite writes them once, as a template
    assert defaults["repro"] == "/venv/bin/python -m pytest /src/{id} --tc-device refdev --tc-ops {op}"
    # a default-valued test writes neither the default fields nor its derivable test id or repro
    add0 = next(line for line in text.splitlines() if 'name="test_add_0"' in line)
    assert add0.endswith('tc="op=add" />') and "test_id" not in add0 and "refdev:0" not in add0
    assert "pytest" not in add0
    # a test without a repro (or one off the template) says so
    assert "repro=\"" in next(line for line in text.splitlines() if 'name="test_sk"' in line)
    assert "\x1b" not in text  # control characters cannot be carried by XML 1.0
    back = parse_junit(str(path))
    expected = [_comparable(o) for o in outcomes]
    got = [_comparable(o) for o in back]
    expected[-1]["message"] = expected[-1]["message"].replace("\x1b", "\ufffd")
    assert got == expected
    # the empty device overrides the suite's default instead of inheriting it
    weird = next(o for o in back if o.test_id == "weird id;with=signs%20")
    assert weird.device == "" and weird.suite == "modules"
    # an unexpected pass keeps its message although a passing test case has no result element
    assert next(o for o in back if o.outcome == "xpass").message == "xpass"


def test_undecodable_bytes_in_a_message_are_written_as_replacement_characters(store, tmp_path):
    # Python decodes a non-UTF-8 file name with lone surrogates; no UTF-8 writer takes them.
    message = b"FileNotFoundError: /data/caf\xe9.pt".decode("utf-8", "surrogateescape")
    o = Outcome("t::a", "fail", suite="ops", file="t.py", message=message)
    assert o.message == "FileNotFoundError: /data/caf\ufffd.pt"
    (tmp_path / "junit").mkdir()
    path = tmp_path / "junit" / "run.xml"
    write_junit(str(path), {"suite": "ops"}, [o])
    assert os.listdir(tmp_path / "junit") == ["run.xml"]
    (back,) = parse_junit(str(path))
    assert back.message == o.message
    run = store.start_run(store.ensure_build("b") and "b")
    store.add_outcomes(run, [o])
    assert [x.message for x in read_rows.iter_outcomes(store, "b")] == [o.message]


def test_a_failed_junit_write_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch):
    from torchconform.db.junit import write as sink_junit

    path = tmp_path / "run.xml"
    write_junit(str(path), {"suite": "ops"}, tricky_outcomes(3))
    before = path.read_text()

    def broken(out, run, outcomes, **kwargs):
        out.write("<testsuites>")
        raise OSError("disk full")
    monkeypatch.setattr(sink_junit, "write_junit_stream", broken)
    with pytest.raises(OSError, match="disk full"):
        write_junit(str(path), {"suite": "ops"}, tricky_outcomes())
    assert os.listdir(tmp_path) == ["run.xml"] and path.read_text() == before


def test_sink_fed_in_batches_writes_what_one_write_of_everything_writes(tmp_path):
    # The sink keeps the suite defaults' counts batch by batch instead of recounting.
    from torchconform.db.junit.write import JunitSink

    outcomes = tricky_outcomes()
    sink = JunitSink(tmp_path / "sink.xml")
    sink.REWRITE_EVERY, sink.REWRITE_SHARE = 0.0, 1.0
    run = {"suite": "ops", "host": "h"}
    sink.pytest_torchconform_run_start(None, run)
    for i in range(0, len(outcomes), 7):
        sink.pytest_torchconform_outcomes(None, outcomes[i:i + 7])
    sink.pytest_torchconform_run_end(None, run, 0)
    write_junit(str(tmp_path / "once.xml"), run, outcomes)
    assert (tmp_path / "sink.xml").read_text() == (tmp_path / "once.xml").read_text()


def test_older_one_property_per_field_files_still_read(tmp_path):
    path = tmp_path / "old.xml"
    path.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="torchconform.ops"><properties>'
        '<property name="tc.run.suite" value="ops"/></properties>'
        '<testcase classname="test.test_ops.TestCommonREFDEV" name="test_cat" file="test/test_ops.py" time="0.1">'
        '<properties><property name="tc.outcome" value="skip_backend"/><property name="tc.kind" value="missing_op"/>'
        '<property name="tc.missing_op" value="aten::cat.out"/><property name="tc.op" value="cat"/>'
        '<property name="tc.test_id" value="test/test_ops.py::TestCommonREFDEV::test_cat"/>'
        '<property name="tc.attempt" value="2"/></properties>'
        '<skipped message="Could not run" type="missing_op"/></testcase></testsuite></testsuites>')
    (o,) = parse_junit(str(path))
    assert (o.test_id, o.outcome, o.kind, o.missing_op, o.op, o.attempt, o.suite) == (
        "test/test_ops.py::TestCommonREFDEV::test_cat", "skip_backend", "missing_op", "aten::cat.out", "cat", 2, "ops")


def test_older_packed_property_files_still_read(tmp_path):
    path = tmp_path / "packed.xml"
    path.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="torchconform.ops"><properties>'
        '<property name="tc.default.outcome" value="pass"/><property name="tc.default.device" value="refdev:0"/>'
        '</properties>'
        '<testcase classname="test.test_ops.TestCommonREFDEV" name="test_cat" file="test/test_ops.py" time="0.1">'
        '<properties><property name="tc" value="outcome=skip_backend;kind=missing_op;missing_op=aten::cat.out;op=cat"/>'
        '</properties><skipped message="Could not run" type="missing_op"/></testcase>'
        '<testcase classname="test.test_ops.TestCommonREFDEV" name="test_add" file="test/test_ops.py" time="0.1">'
        '<properties><property name="tc" value="op=add"/></properties></testcase></testsuite></testsuites>')
    cat, add = parse_junit(str(path))
    assert (cat.outcome, cat.kind, cat.missing_op, cat.op, cat.device, cat.message) == (
        "skip_backend", "missing_op", "aten::cat.out", "cat", "refdev:0", "Could not run")
    assert (add.test_id, add.outcome, add.op) == ("test/test_ops.py::TestCommonREFDEV::test_add", "pass", "add")


def test_tc_values_that_differ_by_op_read_like_any_other(tmp_path):
    # The reader shares the work between tc values that differ only by op: escaped ops,
    # an op first, last or alone, a repeated op field and a value without outcome must
    # read as if each value were decoded on its own.
    cases = [("op=a%3Bb", "a;b"), ("op=a%3Bc", "a;c"), ("outcome=fail;op=x", "x"), ("outcome=fail;op=y", "y"),
             ("outcome=fail;op=z;dtype=f64", "z"), ("op=y;op=w", "w"), ("op=%25", "%"), ("kind=;op=q", "q")]
    body = "".join(f'<testcase classname="m.C" name="t{i}" file="m.py" tc="{packed}" />'
                   for i, (packed, _) in enumerate(cases))
    path = tmp_path / "ops.xml"
    path.write_text('<?xml version="1.0"?><testsuites><testsuite name="s"><properties>'
                    '<property name="tc.default.outcome" value="pass"/></properties>' + body
                    + '<testsuite name="inner"><testcase classname="m.C" name="u" file="m.py" tc="op=a%3Bb" />'
                    '</testsuite></testsuite></testsuites>')
    back = parse_junit(str(path))
    assert [o.op for o in back] == [op for _, op in cases] + ["a;b"]
    assert [o.outcome for o in back] == ["pass", "pass", "fail", "fail", "fail", "pass", "pass", "pass", "pass"]
    assert back[4].dtype == "f64" and back[2].dtype == ""
    nodefault = tmp_path / "nodefault.xml"
    nodefault.write_text('<?xml version="1.0"?><testsuites><testsuite name="s">'
                         '<testcase classname="m.C" name="t" file="m.py" tc="op=a" /></testsuite></testsuites>')
    (o,) = parse_junit(str(nodefault))  # no outcome anywhere: classified (a passing test case)
    assert (o.op, o.outcome) == ("a", "pass")


@pytest.fixture
def pipeline(monkeypatch):
    """Force ingest through its parsing process whatever the file size."""
    monkeypatch.setattr(ingest_module, "PIPELINE_MIN_BYTES", 0)
    # pieces of a few test cases: many batches cross the pipe
    monkeypatch.setattr(junit_parse, "FIRST_CHUNK", 600)
    monkeypatch.setattr(junit_parse, "CHUNK", 2000)
    if not ingest_module._can_fork():
        pytest.skip("ingest's parsing process needs fork (Linux) and two CPUs")


def test_pipeline_stores_what_parsing_here_stores(store, tmp_path, pipeline, monkeypatch):
    outcomes = tricky_outcomes()
    a, b = tmp_path / "a.xml", tmp_path / "b.xml"
    write_junit(str(a), {"suite": "ops", "selection": "quick", "torch_version": "2.13.0"}, outcomes[:30])
    write_junit(str(b), {"suite": "ops", "shard": "2"}, outcomes[30:])
    result = ingest(store, [str(a), str(b)], "piped")
    assert result == {"build": "piped", "files": 2, "outcomes": len(outcomes)}
    monkeypatch.setattr(ingest_module, "PIPELINE_MIN_BYTES", 1 << 40)
    ingest(store, [str(a), str(b)], "here")
    piped = {o.test_id: _comparable(o) for o in read_rows.iter_outcomes(store, "piped")}
    here = {o.test_id: _comparable(o) for o in read_rows.iter_outcomes(store, "here")}
    assert piped == here and len(piped) == len(outcomes)
    # and both are what was written, repro commands included (stored as the run's template)
    written = {o.test_id: _comparable(o) for o in outcomes}
    written["test/test_ops.py::TestCommonREFDEV::test_ansi"]["message"] = "AssertionError: \ufffd[31mred\ufffd[0m <b>&\"x\""
    assert here == written
    assert read_builds.build_info(store, "piped")["torch_version"] == "2.13.0"
    assert multiprocessing.active_children() == []


def test_pipeline_bad_input_is_one_user_error_and_stores_nothing(store, tmp_path, pipeline):
    good = tmp_path / "good.xml"
    write_junit(str(good), {"suite": "ops"}, tricky_outcomes())
    truncated = tmp_path / "truncated.xml"
    truncated.write_text(good.read_text()[: len(good.read_text()) * 2 // 3])
    with pytest.raises(UserError, match=r"truncated\.xml:\d+: malformed or truncated XML"):
        ingest(store, [str(good), str(truncated)], "bad")
    badtc = tmp_path / "badtc.xml"
    badtc.write_text(good.read_text().replace('tc="op=add"', 'tc="op=add;variant"', 1))
    with pytest.raises(UserError, match="malformed tc value"):
        ingest(store, [str(badtc)], "bad")
    assert read_builds.list_builds(store) == []
    # an error on the storing side (the build exists) stops the parsing process too
    ingest(store, [str(good)], "once")
    with pytest.raises(UserError, match="already exists"):
        ingest(store, [str(good)], "once")
    assert multiprocessing.active_children() == []
    assert len(list(read_rows.iter_outcomes(store, "once"))) == len(tricky_outcomes())


def test_bulk_write_restores_the_connection_settings(tmp_path):
    from torchconform.db.opening import open_store

    with open_store(str(tmp_path / "s.db")) as st:
        with st.write(bulk=True) as conn:
            dbapi = conn.connection.driver_connection
            assert dbapi.execute("PRAGMA foreign_keys").fetchone()[0] == 0
        with st.write() as conn:  # the same pooled connection, foreign keys enforced again
            assert conn.connection.driver_connection.execute("PRAGMA foreign_keys").fetchone()[0] == 1
            assert conn.connection.driver_connection.execute("PRAGMA cache_size").fetchone()[0] == -2000


def test_junit_sink_rewrites_take_a_bounded_share_of_the_run(tmp_path, monkeypatch):
    """A rewrite that took 2 s is not repeated for 40 s (5 %), a quick one every 10 s;
    the end of the run always writes."""
    from torchconform.db.junit import write as sink_junit

    clock = [100.0]
    writes = []

    def fake_write(path, run, outcomes, counts=None):
        writes.append((clock[0], len(outcomes)))
        clock[0] += cost[0]

    cost = [2.0]
    monkeypatch.setattr(sink_junit.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(sink_junit, "write_junit", fake_write)
    sink = sink_junit.JunitSink(tmp_path / "x.xml")
    one = tricky_outcomes(1)[:1]
    for _ in range(30):                      # a batch of outcomes every 3 s
        sink.pytest_torchconform_outcomes(None, one)
        clock[0] += 3.0
    starts = [t for t, _ in writes]
    assert starts[0] == 100.0 and all(b - a >= 40.0 for a, b in zip(starts, starts[1:]))
    cost[0] = 0.01
    before = len(writes)
    for _ in range(30):
        sink.pytest_torchconform_outcomes(None, one)
        clock[0] += 3.0
    quick = [t for t, _ in writes[before:]]
    assert len(quick) >= 6 and all(10.0 <= b - a <= 13.0 for a, b in zip(quick, quick[1:]))
    sink.pytest_torchconform_run_end(None, {}, 0)
    assert writes[-1][1] == 60


def test_a_killed_parsing_process_is_one_user_error_and_stores_nothing(store, tmp_path, pipeline, monkeypatch):
    path = tmp_path / "a.xml"
    write_junit(str(path), {"suite": "ops"}, tricky_outcomes())
    real = ingest_module.parsed_here

    def parse_then_die(readers):
        # in the forked parsing process: one batch out, then killed as by the OOM killer
        for batch in real(readers):
            yield batch
            os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(ingest_module, "parsed_here", parse_then_die)
    with pytest.raises(UserError, match=r"parsing process died \(killed by signal 9\).*nothing was stored"):
        ingest(store, [str(path)], "killed")
    assert read_builds.list_builds(store) == []
    assert multiprocessing.active_children() == []
