"""Streaming JUnit XML parsing: each <testcase>'s attributes, tc fields, first result
element and captured output, handed to a callback (db/junit/read.py makes store
rows of them).

expat with handlers that keep only what an outcome needs: no tree is built, and a
150k-case file streams in bounded memory.  junitparser, which wraps ElementTree
elements in objects, stays the reference reader in the tests.

**The runner's lines.**  The runner's JUnit sink (db/junit/write.py) writes each
test case on one line, in one shape.  Such a line is read with one regular expression
and withheld from expat: in a 150k-case file expat's two callbacks per element cost
about as much as storing the rows.  expat still reads everything else (the document's
structure, the suites' properties, every other test case), so a malformed file is
still an error, on the line it has in the file.  A line is read so only where expat
would report exactly the same test case:
  * the line is one ``<testcase>`` with the attributes classname, name, time, file and
    optionally tc, in that order and double-quoted, and either no child or one
    ``<skipped message type />`` or ``<failure|error message type>text</...>``;
  * its values hold no character XML forbids or rewrites (control characters other
    than tab and newline in text, U+FFFE/U+FFFF, ``<``, ``]]>`` in text) and no
    reference but the five predefined entities and ``&#9;``, ``&#10;``, ``&#13;``;
  * expat has consumed everything before the line (no tag, comment or section left
    open) and stands directly inside the innermost <testsuite>, outside any test case;
  * the file is UTF-8 and has no DOCTYPE (which could give attributes defaults).
tests/test_store_junit_parse.py compares both ways on the same files.
"""
from __future__ import annotations

import re
from xml.parsers import expat

from torchconform.errors import UserError

RESULT_TAGS = ("failure", "error", "skipped")
CAPTURE_TAGS = ("system-out", "system-err")
CHUNK = 1 << 20
FIRST_CHUNK = 1 << 15

# An attribute value and an element's text as the fast path takes them (see above).
_VALUE = '"([^"<\x00-\x1f\ufffe\uffff]*)"'
_TEXT = "[^<\x00-\x08\x0b-\x1f\ufffe\uffff]*"
CASE_LINE = re.compile(
    "^<testcase classname=" + _VALUE + " name=" + _VALUE + " time=" + _VALUE + " file=" + _VALUE
    + "(?: tc=" + _VALUE + ")?"
    "(?: />|>(?:<skipped message=" + _VALUE + " type=" + _VALUE + " />"
    "|<(?P<tag>failure|error) message=" + _VALUE + " type=" + _VALUE + ">(?P<text>" + _TEXT + ")</(?P=tag)>)"
    "</testcase>)\n",
    re.MULTILINE)
# What a reference in a fast line may stand for (the sink's escaping writes no others).
_REFERENCES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'", "#9": "\t", "#10": "\n", "#13": "\r"}
_DECLARED_ENCODING = re.compile(rb"""^<\?xml[^>]*?encoding\s*=\s*["']([^"']*)["']""")
# No tc properties, no result attributes (never written to: the reader only reads them).
_NONE: dict = {}


def _parse_error(path: str, exc: expat.ExpatError, withheld: int = 0) -> UserError:
    reason = expat.errors.messages.get(exc.code, str(exc))
    return UserError(f"{path}:{exc.lineno + withheld}: malformed or truncated XML ({reason}, column {exc.offset}); "
                     "fix or regenerate the file and ingest again")


def _not_junit(path: str, tag: str) -> UserError:
    return UserError(f"{path}: not a JUnit XML report (root element <{tag}>, expected <testsuites> or <testsuite>); "
                     "pass a file written by pytest --junitxml or another JUnit reporter")


def unescape(value: str) -> str | None:
    """``value`` with its references replaced, or None when one is not in _REFERENCES
    (expat reads that value)."""
    head, *rest = value.split("&")
    out = [head]
    for piece in rest:
        end = piece.find(";")
        char = _REFERENCES.get(piece[:end]) if end > 0 else None
        if char is None:
            return None
        out.append(char)
        out.append(piece[end + 1:])
    return "".join(out)


def fast_lines_possible(start: bytes) -> bool:
    """Whether a file beginning with ``start`` may have its test case lines read
    without expat: UTF-8 (declared or by default, no byte-order mark) and opening with
    the XML declaration or the root element."""
    if start.startswith(b"<?xml"):
        declared = _DECLARED_ENCODING.match(start)
        return declared is None or declared.group(1).lower() in (b"utf-8", b"utf8")
    return start.startswith(b"<testsuite")


def case_of_line(match: re.Match) -> tuple | None:
    """A fast line's ``on_case`` arguments up to its result text (its classname, name,
    time, file and tc attributes, no tc properties, its result tag, attributes and
    text), or None when one of its values holds a reference expat must read."""
    groups = match.groups()
    if "&" in match.group(0):
        groups = [unescape(g) if g and "&" in g else g for g in groups]
        if any(g is None and o is not None for g, o in zip(groups, match.groups())):
            return None
    classname, name, time_, file_, packed, skip_message, skip_type, tag, message, type_, text = groups
    if text and "]]>" in text:
        return None
    if tag:
        return classname, name, time_, file_, packed, _NONE, tag, {"message": message, "type": type_}, text
    if skip_type is not None:
        return classname, name, time_, file_, packed, _NONE, "skipped", {"message": skip_message, "type": skip_type}, ""
    return classname, name, time_, file_, packed, _NONE, "", _NONE, ""


def iter_cases(path: str, run_properties: dict, on_case):
    """Streams a JUnit file, calling ``on_case(classname, name, time, file (attributes,
    None where absent), packed tc value or None, older-form tc fields, result tag,
    result attributes, result text, captured output, its <testsuite>'s state)`` at each
    </testcase>; yields (None) after each piece of
    the file parsed.  A suite's state is [outer suite name, tc defaults, two caches
    for the reader, repro template]; ``run_properties`` receives the suites' ``tc.run.*``
    as they come."""
    # expat with closures over plain locals: the handlers run once per element, so
    # each attribute lookup counts.
    depth = 0
    suites: list[tuple[int, list]] = []         # per open <testsuite>: depth, state
    case_depth = -1                             # depth of the open <testcase>, -1 outside one
    attrs_ = props = result_attrs = packed = None
    result_tag = result_text = ""
    captured: list[str] = []
    text: list[str] | None = None               # character data of the element being captured
    text_depth = 0
    text_into = ""                              # "result", "captured" or a tc field's name
    no_suite = ["", {}, {}, {}, ""]
    fast = True                                 # test case lines may be read without expat

    def start(tag, attrs):
        nonlocal depth, case_depth, attrs_, props, packed, result_tag, result_attrs, result_text, captured
        nonlocal text, text_depth, text_into
        depth += 1
        if case_depth >= 0:
            if tag == "property":
                if depth == case_depth + 2:  # <testcase><properties><property>
                    name = attrs.get("name", "")
                    if name == "tc":
                        packed = attrs.get("value") or ""
                    elif name.startswith("tc."):
                        value = attrs.get("value")
                        if value is None:
                            text, text_depth, text_into = [], depth, name[3:]
                        else:
                            props[name[3:]] = value
            elif depth == case_depth + 1:
                if tag in RESULT_TAGS:
                    if not result_tag:
                        result_tag, result_attrs = tag, attrs
                        text, text_depth, text_into = [], depth, "result"
                elif tag in CAPTURE_TAGS:
                    text, text_depth, text_into = [], depth, "captured"
            return
        if depth == 1 and tag not in ("testsuites", "testsuite"):
            raise _not_junit(path, tag)
        if tag == "testcase":
            case_depth, attrs_, packed, props, result_tag, result_attrs, result_text, captured = \
                depth, attrs, attrs.get("tc"), {}, "", {}, "", []
        elif tag == "property":
            if suites and depth == suites[-1][0] + 2:  # the suite's own <properties>
                name = attrs.get("name") or ""
                if name.startswith("tc.run."):
                    run_properties.setdefault(name[7:], attrs.get("value", ""))
                elif name == "tc.default.repro":  # a template (outcome.repro_template)
                    suites[-1][1][4] = attrs.get("value", "")
                elif name.startswith("tc.default."):
                    suites[-1][1][1][name[11:]] = attrs.get("value", "")
        elif tag == "testsuite":
            outer = suites[-1][1] if suites else None
            suites.append((depth, [outer[0], dict(outer[1]), {}, {}, outer[4]] if outer else
                           [attrs.get("name") or "", {}, {}, {}, ""]))

    def end(tag):
        nonlocal depth, case_depth, text, result_text
        if text is not None and depth == text_depth:
            joined, text = "".join(text), None
            if text_into == "result":
                result_text = joined
            elif text_into == "captured":
                captured.append(joined)
            else:
                props[text_into] = joined
        elif depth == case_depth:
            case_depth = -1
            get = attrs_.get
            on_case(get("classname"), get("name"), get("time"), get("file"), packed, props, result_tag, result_attrs,
                    result_text, captured, suites[-1][1] if suites else no_suite)
        elif suites and depth == suites[-1][0]:
            suites.pop()
        depth -= 1

    def data(chunk):
        if text is not None:
            text.append(chunk)

    def doctype(*_):
        nonlocal fast
        fast = False   # a DTD may give attributes defaults or types the fast path does not see

    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.buffer_size = 1 << 16
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = data
    parser.StartDoctypeDeclHandler = doctype
    fed = 0            # bytes given to expat
    withheld = 0       # lines read by the fast path, which expat's line numbers leave out

    def feed(piece, final: bool = False) -> None:
        nonlocal fed
        try:
            parser.Parse(piece, final)
        except expat.ExpatError as exc:
            raise _parse_error(path, exc, withheld) from None
        fed += len(piece) if isinstance(piece, bytes) or piece.isascii() else len(piece.encode())

    def feed_lines(piece: str) -> int:
        # Test case lines in the runner's shape are read here, the rest by expat, in file
        # order; returns how many.
        nonlocal withheld
        at = taken = 0
        for match in CASE_LINE.finditer(piece):
            if match.start() > at:
                feed(piece[at:match.start()])
            at = match.start()
            if not (fast and case_depth < 0 and text is None and suites and depth == suites[-1][0]
                    and parser.CurrentByteIndex == fed):
                continue   # expat reads it with what follows
            case = case_of_line(match)
            if case is None:
                continue
            on_case(*case, (), suites[-1][1])
            withheld += 1 + (match.group("text") or "").count("\n")   # a failure's text may take lines
            taken += 1
            at = match.end()
        if at < len(piece):
            feed(piece[at:])
        return taken

    with open(path, "rb") as f:
        tail = b""               # the last piece's unfinished line
        first = True
        size = FIRST_CHUNK
        while True:
            # Pieces grow from small to CHUNK, by half each time: the storing side waits for
            # the first one, then stores each piece while the next, not much larger, is parsed.
            chunk = f.read(size)
            size = min(size * 3 // 2, CHUNK)
            if first:
                fast = fast_lines_possible(chunk[:512])
                first = False
            if not chunk:
                feed(tail, True)
                yield
                return
            if not fast:
                feed(tail + chunk if tail else chunk)
                tail = b""
                yield
                continue
            piece = tail + chunk
            cut = piece.rfind(b"\n") + 1
            if cut == 0:         # no line ends here: expat reads the piece, and this line to its end
                feed(piece)
                tail = b""
                fast = False
                yield
                continue
            piece, tail = piece[:cut], piece[cut:]
            try:
                lines = piece.decode("utf-8")
            except UnicodeDecodeError:
                fast = False     # expat says where the file is not UTF-8
                feed(piece)
                yield
                continue
            if not feed_lines(lines):
                fast = False     # a file not written by the runner (plain pytest): expat reads the rest
            yield
