"""The runner's test case lines read without expat (db/junit/parse.py) give exactly what
expat gives: the same outcomes, the same errors on the same lines, on the runner's own
files and on files built to trip a line reader (comments, open tags, references, a
DTD, other encodings, nested and multi-line test cases)."""
from __future__ import annotations

import pytest

from torchconform.core.outcome import Outcome
from torchconform.db.junit.write import write_junit
from torchconform.db.junit import parse as junit_parse
from torchconform.db.junit.read import parse_junit
from torchconform.errors import UserError

from test_store_junit_encoding import tricky_outcomes

HEAD = ('<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n<testsuite name="s">\n<properties>\n'
        '  <property name="tc.default.outcome" value="pass" />\n</properties>\n')
LINE = '<testcase classname="m.C" name="t{i}" time="0.5{i}" file="m.py" tc="op=o{i}" />\n'
TAIL = "</testsuite>\n</testsuites>\n"


def read(path, fast: bool, monkeypatch) -> tuple:
    """(outcomes as dicts, or the error's text; how many lines the fast path read)."""
    taken = []
    real = junit_parse.case_of_line

    def counted(match):
        case = real(match)
        taken.append(case is not None)
        return case

    monkeypatch.setattr(junit_parse, "case_of_line", counted)
    if not fast:
        monkeypatch.setattr(junit_parse, "fast_lines_possible", lambda start: False)
    try:
        result = [o.to_dict() for o in parse_junit(str(path))]
    except UserError as exc:
        result = str(exc)
    finally:
        monkeypatch.undo()
    return result, sum(taken)


def both(path, monkeypatch):
    fast, taken = read(path, True, monkeypatch)
    slow, untaken = read(path, False, monkeypatch)
    assert untaken == 0
    assert fast == slow
    return fast, taken


def test_runner_files_read_the_same_both_ways(tmp_path, monkeypatch):
    outcomes = tricky_outcomes()
    path = tmp_path / "runner.xml"
    write_junit(str(path), {"suite": "ops", "build": "b"}, outcomes)
    result, taken = both(path, monkeypatch)
    assert len(result) == len(outcomes)
    # every line but one was read without expat: the sink quoted that message with
    # single quotes (it holds a double quote), which the line reader leaves to expat
    assert taken == len(outcomes) - 1
    assert [r["test_id"] for r in result] == [o.test_id for o in outcomes]


def test_small_pieces_and_long_lines(tmp_path, monkeypatch):
    # pieces smaller than a line: the reader hands the rest of the file to expat
    path = tmp_path / "pieces.xml"
    write_junit(str(path), {"suite": "ops"}, tricky_outcomes())
    monkeypatch.setattr(junit_parse, "FIRST_CHUNK", 64)
    monkeypatch.setattr(junit_parse, "CHUNK", 4096)
    fast, taken = read(path, True, monkeypatch)
    slow, _ = read(path, False, monkeypatch)
    assert fast == slow and len(fast) == len(tricky_outcomes())


@pytest.mark.parametrize("middle, expect_cases", [
    # a test case line inside a comment is no test case
    ("<!--\n" + LINE.format(i=1) + "-->\n", 2),
    # nor one inside another test case (expat: a child element of it)
    ('<testcase classname="m.C" name="outer" time="1" file="m.py">\n' + LINE.format(i=1) + "</testcase>\n", 3),
    # references: the five entities and the sink's newline, tab and return are read here ...
    ('<testcase classname="m.C" name="a&amp;b&lt;&gt;&quot;&apos;&#10;&#9;&#13;" time="1" file="m.py" />\n', 3),
    # ... other character references by expat, to the same text
    ('<testcase classname="m.C" name="x&#x41;&#65;" time="1" file="m.py" />\n', 3),
    # a failure with its text, on one line and over two
    ('<testcase classname="m.C" name="f" time="1" file="m.py" tc="outcome=fail">'
     '<failure message="boom &amp; more" type="fail">line one &gt; two</failure></testcase>\n', 3),
    ('<testcase classname="m.C" name="f" time="1" file="m.py" tc="outcome=fail">'
     '<failure message="" type="fail">first\nsecond</failure></testcase>\n', 3),
    ('<testcase classname="m.C" name="s" time="1" file="m.py" tc="outcome=skip_eligibility">'
     '<skipped message="not on this dtype" type="skip_eligibility" /></testcase>\n', 3),
    # a literal tab in a value: expat makes it a space, so expat reads it
    ('<testcase classname="m.C" name="a\tb" time="1" file="m.py" />\n', 3),
    # a non-ASCII name
    ('<testcase classname="m.C" name="t\u00e9st_\u4e2d" time="1" file="m.py" />\n', 3),
    # an error with a type the sink writes, and single quotes (another writer)
    ('<testcase classname="m.C" name="e" time="1" file="m.py" tc="outcome=crash">'
     '<error message="died" type="crash">died</error></testcase>\n', 3),
    ("<testcase classname='m.C' name='q' time='1' file='m.py' />\n", 3),
])
def test_edge_lines_read_the_same_both_ways(tmp_path, monkeypatch, middle, expect_cases):
    path = tmp_path / "edge.xml"
    path.write_text(HEAD + LINE.format(i=0) + middle + LINE.format(i=2) + TAIL, encoding="utf-8")
    result, taken = both(path, monkeypatch)
    assert len(result) == expect_cases
    assert taken >= 2   # the plain lines around it


@pytest.mark.parametrize("middle", [
    # an open start tag whose attribute would swallow the line: malformed, and said so on its line
    '<properties a="x>\n' + LINE.format(i=1) + '"/>\n',
    # "]]>" may not stand in text
    '<testcase classname="m.C" name="f" time="1" file="m.py"><failure message="m" type="fail">a]]>b</failure>'
    "</testcase>\n",
    # an undefined entity
    '<testcase classname="m.C" name="&nope;" time="1" file="m.py" />\n',
    # a stray closing tag after many good lines
    "".join(LINE.format(i=i) for i in range(3, 50)) + "</testcase>\n",
])
def test_malformed_files_fail_the_same_way_on_the_same_line(tmp_path, monkeypatch, middle):
    path = tmp_path / "bad.xml"
    path.write_text(HEAD + LINE.format(i=0) + middle + LINE.format(i=2) + TAIL, encoding="utf-8")
    fast, _ = read(path, True, monkeypatch)
    slow, _ = read(path, False, monkeypatch)
    assert isinstance(slow, str) and "malformed or truncated XML" in slow
    assert fast == slow


def test_truncated_runner_file_names_its_line(tmp_path, monkeypatch):
    outcomes = [Outcome(f"m.py::C::t{i}", "pass", file="m.py", cls="C", name=f"t{i}", op="o") for i in range(500)]
    good = tmp_path / "good.xml"
    write_junit(str(good), {"suite": "ops"}, outcomes)
    text = good.read_text()
    cut = tmp_path / "cut.xml"
    cut.write_text(text[: len(text) * 2 // 3])
    fast, taken = read(cut, True, monkeypatch)
    slow, _ = read(cut, False, monkeypatch)
    assert fast == slow and "malformed or truncated XML" in fast
    assert taken > 100


def test_a_dtd_or_another_encoding_turns_the_line_reader_off(tmp_path, monkeypatch):
    # a DTD may give every test case a default tc attribute: expat applies it
    dtd = tmp_path / "dtd.xml"
    dtd.write_text('<?xml version="1.0" encoding="utf-8"?>\n'
                   '<!DOCTYPE testsuites [<!ATTLIST testcase tc CDATA "outcome=xfail">]>\n'
                   + HEAD.split("\n", 1)[1] + LINE.format(i=0).replace(' tc="op=o0"', "") + TAIL, encoding="utf-8")
    result, taken = both(dtd, monkeypatch)
    assert taken == 0 and result[0]["outcome"] == "xfail"
    latin = tmp_path / "latin.xml"
    latin.write_bytes((HEAD.replace("utf-8", "iso-8859-1") + LINE.format(i=0).replace("t0", "t\u00e9")
                       + TAIL).encode("latin-1"))
    result, taken = both(latin, monkeypatch)
    assert taken == 0 and result[0]["name"] == "t\u00e9"
    crlf = tmp_path / "crlf.xml"
    crlf.write_bytes((HEAD + LINE.format(i=0) + LINE.format(i=1) + TAIL).replace("\n", "\r\n").encode())
    result, taken = both(crlf, monkeypatch)
    assert taken == 0 and len(result) == 2


def test_unescape_takes_only_what_the_sink_writes():
    assert junit_parse.unescape("a&amp;b&#10;c") == "a&b\nc"
    assert junit_parse.unescape("plain") == "plain"
    assert junit_parse.unescape("&#x41;") is None
    assert junit_parse.unescape("a & b") is None
    assert junit_parse.unescape("&amp") is None


def test_random_outcomes_read_the_same_both_ways(tmp_path, monkeypatch):
    # Names, messages and fields drawn from the characters a line reader could get wrong.
    import random

    rng = random.Random(20)
    palette = 'ab <>&"\'\t\n\r;=%]]>\u00e9\u4e2d\U0001f600\x1b\x00\ud800\ufffe{}'

    def text(k):
        return "".join(rng.choice(palette) for _ in range(rng.randint(0, k)))

    kinds = [("pass", ""), ("fail", ""), ("error", ""), ("crash", ""), ("xfail", ""), ("xpass", ""),
             ("skip_eligibility", ""), ("skip_backend", "missing_op"), ("pass_fallback", "")]
    outcomes = []
    for i in range(400):
        outcome, kind = rng.choice(kinds)
        name = f"test_{i}_{text(6)}"
        outcomes.append(Outcome(f"m/t.py::C{i % 3}::{name}", outcome, kind=kind, file="m/t.py", cls=f"C{i % 3}",
                                name=name, op=rng.choice(["add", "a;b", text(4)]), dtype=rng.choice(["", "float32"]),
                                device="refdev:0", message=text(30), missing_op="aten::x" if kind else "",
                                fallback_ops=["aten::mm"] if outcome == "pass_fallback" else [],
                                duration=rng.random(), max_abs_err=rng.choice([None, 0.5, 1e-9])))
    path = tmp_path / "random.xml"
    write_junit(str(path), {"suite": "ops"}, outcomes)
    result, taken = both(path, monkeypatch)
    assert len(result) == len(outcomes) and taken > 100
