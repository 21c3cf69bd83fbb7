"""The package's imports hold to its floors (issue 32): read statically from every source
file, imports inside functions included, by bench/import_graph.py.  A change that imports a
component from a lower floor, or closes a circle of files, fails here with the edges named."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import import_graph  # noqa: E402


@pytest.fixture(scope="module")
def graph():
    return import_graph.build()


def test_every_component_folder_is_read(graph):
    folders = {graph.folder(m) for m in graph.files}
    assert set(import_graph.components()) | {import_graph.GROUND, import_graph.ENTRY} == folders
    assert len(graph.files) > 200 and sum(len(t) for t in graph.edges.values()) > 500


def test_the_ground_imports_no_component(graph):
    assert import_graph.figures(graph)["ground_imports_components"] == []


def test_no_import_reaches_a_floor_above_or_beside(graph):
    assert import_graph.upward_edges(graph) == []


def test_no_two_folders_import_each_other(graph):
    found = import_graph.figures(graph)
    assert found["folder_pairs_both_ways"] == [] and found["folder_groups"] == []


def test_no_circle_of_files(graph):
    assert import_graph.figures(graph)["file_circles"] == []


def test_the_checker_sees_an_upward_import_and_a_circle(tmp_path):
    """The checker itself on a tiny tree: an upward edge and a circle are found."""
    (tmp_path / "setup.py").write_text('COMPONENTS = ["low", "high"]\n')
    for folder in ("torchconform", "low", "high"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "low" / "a.py").write_text("def f():\n    from torchconform.high import b\n")
    (tmp_path / "high" / "b.py").write_text("from torchconform.low import a\n")
    (tmp_path / "high" / "c.py").write_text("from . import b\n")
    graph = import_graph.build(str(tmp_path))
    floors = (("torchconform",), ("low",), ("high",), (import_graph.ENTRY,))
    assert import_graph.upward_edges(graph, floors) == ["torchconform.low.a -> torchconform.high.b"]
    assert import_graph.figures(graph, floors)["file_circles"] == [["torchconform.high.b", "torchconform.low.a"]]
    assert graph.inside_functions == 1


def test_the_map_names_every_component_and_its_floor():
    """docs/architecture.md (the one written component list) names every folder setup.py
    maps, and draws the floors in FLOORS' order."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8") as fh:
        text = fh.read()
    assert all(f"`{folder}/`" in text for folder in import_graph.components())
    drawn = text.split("## The floors", 1)[1].split("```")[1].split()
    order = [folder for floor in import_graph.FLOORS[1:-1] for folder in floor]
    assert [w for w in drawn if w in order][::-1] == order


def test_every_import_inside_a_function_says_why(graph):
    """An import of ours inside a function is there for a reason said in a comment (start-up
    time, an optional dependency, a process whose import failure is its reported error), never
    to dodge a circle: the floors above make a circle fail on its own."""
    assert graph.unexplained == []


def test_the_checker_sees_an_unexplained_import_inside_a_function(tmp_path):
    (tmp_path / "setup.py").write_text('COMPONENTS = ["low"]\n')
    for folder in ("torchconform", "low"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "low" / "a.py").write_text("def f():\n    from torchconform.low import b\n\n\n"
                                          "def g():\n    # start-up: b is heavy\n    from torchconform.low import b\n")
    (tmp_path / "low" / "b.py").write_text("")
    graph = import_graph.build(str(tmp_path))
    assert graph.inside_functions == 2 and graph.unexplained == [os.path.join("low", "a.py") + ":2"]
