"""Which models a selection names, and which builder builds a model id.

Model ids are ``FAMILY/NAME``: ``hf/bert`` (transformers), ``tv/resnet18``
(torchvision), ``timm/resnet18`` (timm), ``py/PATH.py::FUNC`` (a Python file).
"""
from __future__ import annotations

import os

from torchconform.errors import UserError
from torchconform.suites.models import hf, pyfile, vision
from torchconform.suites.models.data_files import load_yaml
from torchconform.suites.models.spec import Built, Unbuildable, split_model_id

SELECTIONS = ("quick", "full")
# The package whose code defines a family's models: its version is part of the key of
# a stored operator set (census/models.py).  py/ files are the user's: no version.
LIBRARIES = {"hf": "transformers", "tv": "torchvision", "timm": "timm"}


def _read_list(path: str) -> list[str]:
    """A selection file: YAML list, or a mapping with ``models:``, or one id per line."""
    from torchconform.skiplists.yamlpos import YamlAliasError, YamlError, load_data

    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        data = load_data(path, text)
    except YamlAliasError:
        raise  # refused in every file of ours, whatever its form
    except YamlError:
        data = None  # not YAML: one id per line
    if isinstance(data, dict):
        data = data.get("models")
    if isinstance(data, list):
        return [str(x) for x in data]
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def select(selection: str, notes: list | None = None) -> list[str]:
    """Model ids of ``selection`` (quick, full, comma-separated ids, or a file listing ids), sorted, unique."""
    notes = notes if notes is not None else []
    if selection == "quick":
        ids = load_yaml("selections.yaml")["quick"]
    elif selection == "full":
        ok, why = hf.available()
        ids = [f"hf/{t}" for t in hf.model_types()] if ok else []
        if not ok:
            notes.append(f"hf family left out: {why}")
        for family, pkg, names in (("tv", "torchvision", vision.torchvision_names),
                                   ("timm", "timm", vision.timm_names)):
            ok, why = vision.available(pkg)
            if ok:
                ids += [f"{family}/{n}" for n in names()]
            else:
                notes.append(f"{family} family left out: {why}")
    elif os.path.isfile(selection):
        ids = _read_list(selection)
    elif "/" in selection:
        ids = [part.strip() for part in selection.split(",") if part.strip()]  # ids given inline
    else:
        raise UserError(f"unknown model selection {selection!r}; use quick, full, model ids (hf/bert,hf/gpt2) "
                        "or a file listing model ids")
    for model_id in ids:
        try:
            split_model_id(model_id)
        except ValueError as exc:
            raise UserError(f"{exc}; fix the selection {selection!r}")
    return sorted(set(ids))


def build(model_id: str, seed: int = 0) -> Built:
    """Build a model on CPU; Unbuildable (-> skip_eligibility) when it cannot be."""
    family, name = split_model_id(model_id)
    if family == "hf":
        ok, why = hf.available()
        if not ok:
            raise Unbuildable(why)
        return hf.build(name, seed)
    if family == "tv":
        return vision.build_torchvision(name, seed)
    if family == "timm":
        return vision.build_timm(name, seed)
    if family == "py":
        return pyfile.build(name, seed)
    raise Unbuildable(f"unknown model family {family!r} in {model_id!r}; families: hf, tv, timm, py")


def library_version(model_id: str) -> str:
    """Installed version of the package defining ``model_id``'s family ("" for py/ files,
    an unknown family or a package that is not installed).  Read from the package's
    metadata, so the sweep's driver can ask without importing transformers."""
    from importlib import metadata

    package = LIBRARIES.get(model_id.partition("/")[0])
    if not package:
        return ""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""
