"""Suite sets: the suites one build is made of (``suites/sets.yaml``, or a file of that shape).

``torchconform run --suite all`` (the set ``all``) or ``--suite-set NAME|PATH`` runs each
step as a run of the same build, records the planned runs on the build (``builds.metadata``
``plan``: ``[{"suite", "shards"}]``, db/runstate.py) so that a build whose later
steps never ran is incomplete, and prints the combined breakdown.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from torchconform.errors import UserError
from torchconform.core.yamlpos import load_data, load_yaml
from torchconform.suites.set_schema import NEEDS, describe, validate  # noqa: F401 (NEEDS: the words)

SETS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sets.yaml")


@dataclass(frozen=True)
class Step:
    suite: str
    selection: str = "full"
    needs: str = ""


def load_set(name_or_path: str) -> tuple[str, list[Step]]:
    """(set name, steps) for a set of sets.yaml or a YAML file holding ``steps:``, or a
    ``sets:`` mapping: its one set, or of several the one named after the file."""
    if os.path.sep in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        path, name = name_or_path, os.path.splitext(os.path.basename(name_or_path))[0]
        if not os.path.isfile(path):
            raise UserError(f"--suite-set {path}: no such file; pass a set name ({', '.join(set_names())}) or a YAML path")
    else:
        path, name = SETS_FILE, name_or_path
    data = load_yaml(path) or {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: a suite-set file is a mapping with 'sets:' or 'steps:'; see {SETS_FILE}")
    model, failures = validate(data)   # the file's shape: suites/set_schema.py
    if failures:
        raise UserError(describe(failures[0], path, name))
    sets = model.sets if "sets" in data else {name: model.steps}
    if path != SETS_FILE and isinstance(sets, dict) and name not in sets:
        if len(sets) != 1:
            raise UserError(f"{path} holds the suite sets {', '.join(map(str, sorted(sets)))} and none is named after "
                            f"the file ({name!r}); keep one set in the file, or give it 'steps:' only")
        name = next(iter(sets))
    if not isinstance(sets, dict) or name not in sets:
        raise UserError(f"unknown suite set {name!r}; use one of {', '.join(sorted(sets or {}))} or a file path")
    if sets[name] is None:
        raise UserError(f"{path}: suite set {name!r} must be a non-empty list of steps like {{suite: ops, selection: full}}")
    return name, [Step(s.suite, str(s.selection or "full"), s.needs or "") for s in sets[name]]


def set_names() -> list[str]:
    return sorted((load_data(SETS_FILE) or {}).get("sets") or {})


def applicable(steps: list[Step], pytorch_src: str | None) -> tuple[list[Step], list[str]]:
    """(steps to run, notes on the steps left out)."""
    kept, notes = [], []
    for step in steps:
        if step.needs == "pytorch_src" and not pytorch_src:
            notes.append(f"{step.suite}: left out (no PyTorch checkout; pass --pytorch-src to include it)")
            continue
        kept.append(step)
    return kept, notes
