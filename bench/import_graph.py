"""The import graph of torchconform's own files, read statically (issue 32).

Every ``.py`` file of the package (the ground package ``torchconform/`` and the component
folders setup.py maps under it) is parsed with ``ast``; every import of a ``torchconform``
module is an edge, whether it sits at module level or inside a function.  Printed:
imports inside functions, folder pairs that import each other, strongly connected groups
of folders, and circles of files.  ``tests/test_import_graph.py`` holds the same graph to
its contract (no folder circle, no file circle), so the knot cannot come back unnoticed.

    python bench/import_graph.py            # figures
    python bench/import_graph.py --detail   # and every circle, by file
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROUND = "torchconform"
ENTRY = "torchconform.__main__"
# The floors, lowest first: a file may import its own folder, the ground and the folders on
# lower floors, never one on its own floor or above (docs/architecture.md says why each sits
# where it does).  The ground is ``torchconform/`` with ``torchconform/core/``.
FLOORS = (
    (GROUND,),
    ("refdev",),
    ("skiplists",),
    ("db",),
    ("census",),
    ("collectors",),
    ("suites",),
    ("ci",),
    ("dashboard",),
    ("sweep",),
    ("cli",),
    (ENTRY,),
)


def components(root: str = ROOT) -> list[str]:
    """The component folders, as setup.py lists them (one list, read from there)."""
    tree = ast.parse(open(os.path.join(root, "setup.py")).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "COMPONENTS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise SystemExit("setup.py has no COMPONENTS list; import_graph reads the component folders from it")


@dataclass
class Graph:
    components: tuple = ()                             # the component folders (setup.py)
    files: dict = field(default_factory=dict)          # module name -> path
    edges: dict = field(default_factory=lambda: defaultdict(set))   # module -> modules it imports
    inside_functions: int = 0                           # import statements of ours inside a def
    unexplained: list = field(default_factory=list)     # "path:line" of those without a comment saying why

    def folder(self, module: str) -> str:
        if module == ENTRY:
            return ENTRY      # ``python -m torchconform``: the top floor by nature, not the ground
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in self.components else GROUND


def _modules(root: str, folders: list[str]) -> dict[str, str]:
    found = {}
    for top in [GROUND] + folders:
        for base, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            if "__init__.py" not in files:
                continue
            rel = os.path.relpath(base, root).replace(os.sep, ".")
            # torchconform/x/ is torchconform.x; a component folder c/x/ is torchconform.c.x
            package = rel if top == GROUND else f"{GROUND}.{rel}"
            for name in files:
                if name.endswith(".py"):
                    module = package if name == "__init__.py" else f"{package}.{name[:-3]}"
                    found[module] = os.path.join(base, name)
    return found


def _resolve(graph: Graph, module: str, is_package: bool, node: ast.AST) -> list[str]:
    """The torchconform modules one import statement names (a ``from X import y`` names
    X.y when that is a module of ours, else X)."""
    targets = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
        for name in names:
            while name and name not in graph.files:
                name = name.rpartition(".")[0]
            if name:
                targets.append(name)
        return targets
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    if not (base == GROUND or base.startswith(GROUND + ".")):
        return []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in graph.files:
            targets.append(sub)
        elif base in graph.files:
            targets.append(base)
    return targets


def _explained(lines: list[str], lineno: int) -> bool:
    """An import inside a function stays there only for a reason said in a comment: on its
    own line, or on the line above it or above the block of imports (blank lines between) it belongs to."""
    if "#" in lines[lineno - 1]:
        return True
    above = lineno - 2
    while above >= 0 and (not lines[above].strip() or lines[above].strip().startswith(("import ", "from "))):
        if "#" in lines[above]:
            return True
        above -= 1
    return above >= 0 and lines[above].strip().startswith("#")


def build(root: str = ROOT) -> Graph:
    folders = components(root)
    graph = Graph(components=tuple(folders), files=_modules(root, folders))
    for module, path in graph.files.items():
        source = open(path).read()
        tree = ast.parse(source, filename=path)
        lines = source.splitlines()
        is_package = path.endswith("__init__.py")
        in_function = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(fn):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        in_function.add(id(inner))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = [t for t in _resolve(graph, module, is_package, node) if t != module]
            if targets and id(node) in in_function:
                graph.inside_functions += 1
                if not _explained(lines, node.lineno):
                    graph.unexplained.append(f"{os.path.relpath(path, root)}:{node.lineno}")
            graph.edges[module].update(targets)
    return graph


def strongly_connected(nodes, edges) -> list[list[str]]:
    """Tarjan's groups of size > 1 (iterative, so deep graphs do not hit the recursion limit)."""
    index, low, on_stack, stack, groups, counter = {}, {}, set(), [], [], [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def folder_edges(graph: Graph) -> dict[tuple[str, str], int]:
    counts = defaultdict(int)
    for source, targets in graph.edges.items():
        for target in targets:
            a, b = graph.folder(source), graph.folder(target)
            if a != b:
                counts[(a, b)] += 1
    return dict(counts)


def upward_edges(graph: Graph, floors=FLOORS) -> list[str]:
    """File edges that leave their folder for one on the same floor or above."""
    rank = {folder: i for i, floor in enumerate(floors) for folder in floor}
    unknown = sorted({graph.folder(m) for m in graph.files} - set(rank))
    if unknown:
        raise ValueError(f"folders on no floor: {', '.join(unknown)}; add them to FLOORS in bench/import_graph.py")
    return sorted(f"{s} -> {t}" for s, ts in graph.edges.items() for t in ts
                  if graph.folder(s) != graph.folder(t) and rank[graph.folder(t)] >= rank[graph.folder(s)])


def figures(graph: Graph, floors=FLOORS) -> dict:
    between = folder_edges(graph)
    pairs = sorted({tuple(sorted(p)) for p in between if (p[1], p[0]) in between})
    folder_graph = defaultdict(set)
    for a, b in between:
        folder_graph[a].add(b)
    return {
        "files": len(graph.files),
        "imports_inside_functions": graph.inside_functions,
        "imports_inside_functions_unexplained": sorted(graph.unexplained),
        "folder_pairs_both_ways": [(a, b, between[(a, b)], between[(b, a)]) for a, b in pairs],
        "folder_groups": strongly_connected(set(folder_graph) | {b for bs in folder_graph.values() for b in bs}, folder_graph),
        "file_circles": strongly_connected(graph.files, graph.edges),
        "upward": upward_edges(graph, floors),
        "ground_imports_components": sorted(
            f"{s} -> {t}" for s, ts in graph.edges.items() for t in ts
            if graph.folder(s) == GROUND and graph.folder(t) != GROUND),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detail", action="store_true", help="print every circle's files")
    args = parser.parse_args(argv)
    found = figures(build())
    print(f"files: {found['files']}")
    print(f"imports of ours inside functions: {found['imports_inside_functions']}"
          f" ({len(found['imports_inside_functions_unexplained'])} without a comment saying why)")
    if args.detail:
        for where in found["imports_inside_functions_unexplained"]:
            print("  " + where)
    print(f"folder pairs importing each other: {len(found['folder_pairs_both_ways'])}")
    for a, b, ab, ba in found["folder_pairs_both_ways"]:
        print(f"  {a} <-> {b}  ({ab} file edges one way, {ba} the other)")
    groups = found["folder_groups"]
    print(f"strongly connected folder groups: {len(groups)}" + (f" (largest {max(map(len, groups))} folders)" if groups else ""))
    for group in groups:
        print("  " + ", ".join(group))
    circles = found["file_circles"]
    print(f"file circles: {len(circles)}" + (f" ({sum(map(len, circles))} files)" if circles else ""))
    if args.detail:
        for circle in circles:
            print("  " + " <-> ".join(circle))
    print(f"imports reaching up a floor: {len(found['upward'])}")
    if args.detail:
        for line in found["upward"]:
            print("  " + line)
    print(f"ground package importing a component: {len(found['ground_imports_components'])}")
    if args.detail:
        for line in found["ground_imports_components"]:
            print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
