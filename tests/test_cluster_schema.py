"""The failure-categories file (``--categories PATH``) read through its declared schema
(torchconform/core/category_schema.py): the loader every YAML file kind uses (no aliases,
positions), each problem one line ``FILE:LINE: ...`` naming the cause and the fix, and the
values a good file gives."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchconform.cli.main import main
from torchconform.core.category_schema import CategoriesFile
from torchconform.core.clusters import Category, load_categories
from torchconform.errors import UserError

DOCS = Path(__file__).resolve().parents[1] / "docs" / "clusters.md"


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "categories.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_the_documented_example_loads(tmp_path):
    """The example of docs/clusters.md (no categories file ships with torchconform)."""
    page = DOCS.read_text(encoding="utf-8")
    example = page.split("## User categories", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert load_categories(_write(tmp_path, example)) == [
        Category("Numerics mismatch", re.compile("Tensor-likes are not close"), frozenset({"fail"})),
        Category("Memory leaks", re.compile("memory leak"), frozenset())]


def test_a_list_alone_allure_spelling_and_names_trimmed(tmp_path):
    listed = load_categories(_write(tmp_path, "- name: ' Leaks '\n  messageRegex: 'leak(ed)?'\n"
                                              "  outcomes: [error, crash]\n- {name: Any, message: ''}\n"))
    assert listed == [Category("Leaks", re.compile("leak(ed)?"), frozenset({"error", "crash"})),
                      Category("Any", re.compile(""), frozenset())]
    assert load_categories(_write(tmp_path, "categories: []\n")) == []


BOMB = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}" if i else "x"] * 9) + "]\n" for i in range(9))
ENTRY = "- name: Leaks\n  message: leak\n"

# (file text, the line the error names, words it holds)
BAD = {
    "unknown entry key": (ENTRY + "  colour: red\n", 3, "category 1 (Leaks): unknown key 'colour'; a category has"),
    "Allure's key": (ENTRY + "  matchedStatuses: [failed]\n", 3, "unknown key 'matchedStatuses'; use outcomes: [...]"),
    "unknown top key": ("categories: []\ncolour: red\n", 2, "unknown key 'colour'; a categories file is a list"),
    "wrong type": ("- name: 404\n  message: x\n", 1, "category 1: 'name' must be a string (quote it), got 404"),
    "wrong regex type": (ENTRY + "- name: B\n  message: [x]\n", 4, "category 2 (B): 'message' must be a string"),
    "bad regex": (ENTRY + "- name: B\n  message: 'x(['\n", 4, "category 2 (B): bad regex 'x([' in 'message': "),
    "bad Allure regex": ("- name: B\n  messageRegex: '*x'\n", 2, "bad regex '*x' in 'messageRegex': nothing to repeat"),
    "no failed outcome": (ENTRY + "  outcomes:\n    - fail\n    - pass\n", 5, "'pass' is no failed outcome: remove it"),
    "outcomes not a list": (ENTRY + "  outcomes: fail\n", 3, "outcomes must be a list of some of crash, error"),
    "no regex": ("- name: Leaks\n", 1, "category 1 (Leaks): needs a message regex; add message: REGEX"),
    "two regexes": (ENTRY + "  messageRegex: y\n", 3, "has both message and messageRegex; keep one"),
    "no name": ("- message: x\n", 1, "category 1: needs a name; add name: TEXT"),
    "empty name": ("- name: ' '\n  message: x\n", 1, "needs a name: 'name' is empty"),
    "entry no mapping": (ENTRY + "- just text\n", 3, "category 2: a category has name, message"),
    "categories no list": ("\ncategories: {name: a, message: b}\n", 2, "'categories' must be a list of categories"),
    "top level text": ("hello\n", 1, "a categories file is a list of categories"),
    "empty file": ("", 1, "a categories file is a list of categories"),
    "duplicate key": ("- name: a\n  name: b\n  message: x\n", 2, "duplicate key 'name' (first at line 1); keep one"),
    "alias bomb": (BOMB + "categories: *l8\n", 1, "YAML aliases are not allowed (&l0); write the values out in full"),
    "bad YAML": (ENTRY + "- name: [\n", 4, "invalid YAML"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_file_is_one_line_naming_its_line(tmp_path, case):
    text, line, words = BAD[case]
    path = _write(tmp_path, text)
    with pytest.raises(UserError) as err:
        load_categories(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}:{line}: ") and words in message, message


def test_a_missing_file_names_it(tmp_path):
    with pytest.raises(UserError, match=r"absent\.yaml:0: no such file; check the path"):
        load_categories(tmp_path / "absent.yaml")


def test_the_schema_declares_every_key():
    entry = CategoriesFile.model_json_schema(by_alias=True)["$defs"]["CategoryEntry"]
    assert set(entry["properties"]) == {"name", "message", "messageRegex", "outcomes"}
    assert entry["additionalProperties"] is False and entry["required"] == ["name"]


def test_the_gate_refuses_a_bad_file_in_one_line_and_stores_nothing(tmp_path, capsys):
    db = tmp_path / "absent.db"
    bad = _write(tmp_path, ENTRY + "  colour: red\n")
    assert main(["gate", "--db", str(db), "--build", "b2", "--categories", bad]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"torchconform: error: {bad}:3: category 1 (Leaks): unknown key 'colour'; " \
                          "a category has name, message (or messageRegex) and outcomes (remove it or fix its spelling)"
    assert not db.exists()
