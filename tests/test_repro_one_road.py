"""One road to a repro command (issue 32): core.outcome builds it; the store's SQL, the
JUnit codec and the site's page fill the same template the same way, and the gate's report
and the site show the same command for a record that has none."""
from torchconform.core.outcome import (
    REPRO_ID, REPRO_OP, fits_template, render_repro, repro_command, repro_parts, repro_template,
)

TEMPLATE = "cd /src && python -m pytest '{id}' --tc-device refdev --tc-ops {op}"


def _sql_fill(template: str, test_id: str, op: str) -> str:
    # what db/read_rows.REPRO computes: replace {id}, then {op}
    return template.replace("{id}", test_id).replace("{op}", op)


def _page_fill(parts: list, test_id: str, op: str) -> str:
    # what dashboard/static/failures.js does with the parts it is given
    return "".join(p if isinstance(p, str) else test_id if p == REPRO_ID else op for p in parts)


def test_every_reader_fills_a_template_alike():
    for test_id, op in (("t.py::test_add_float32", "add"), ("t.py::Test::test_x[a b]", "nn.functional.relu")):
        repro = render_repro(TEMPLATE, test_id, op)
        assert repro == _sql_fill(TEMPLATE, test_id, op) == _page_fill(repro_parts(TEMPLATE), test_id, op)
        assert repro_template(repro, test_id, op) == TEMPLATE and fits_template(TEMPLATE, repro, test_id, op)


def test_values_holding_a_placeholder_are_never_kept_as_a_template():
    # SQL and the page would fill these differently: the command is kept as text instead
    for test_id, op in (("t.py::test_{op}", "add"), ("t.py::test_x", "{id}")):
        repro = render_repro(TEMPLATE, test_id, op)
        assert _sql_fill(TEMPLATE, test_id, op) != _page_fill(repro_parts(TEMPLATE), test_id, op) or "{id}" in op
        assert repro_template(repro, test_id, op) == "" and not fits_template(TEMPLATE, repro, test_id, op)


def test_a_record_without_a_command_gets_the_same_one_everywhere():
    from torchconform.ci import report
    from torchconform.dashboard import failures

    assert report.repro_command is failures.repro_command is repro_command
    assert repro_command("", "t.py::test a", "refdev") == "python -m pytest 't.py::test a' --tc-device refdev"
    assert repro_command("pytest -k x", "t.py::test_a", "refdev") == "pytest -k x"
    assert repro_parts("a {id} b {op}") == ["a ", REPRO_ID, " b ", REPRO_OP]
