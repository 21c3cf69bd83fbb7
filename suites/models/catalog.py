"""Which models a selection names, and which builder builds a model id.

Model ids are ``FAMILY/NAME``: ``hf/bert`` (transformers), ``tv/resnet18``
(torchvision), ``timm/resnet18`` (timm), ``py/PATH.py::FUNC`` (a Python file),
``hfcfg/PATH.json`` (a Hugging Face config file).  A selection file is a user
model list (``sweep --models FILE``): see userlist.py for its entries.
"""
from __future__ import annotations

import os

from torchconform.errors import UserError
from torchconform.suites.models import causal_lm, hf, hfconfig, pyfile, userlist, vision
from torchconform.suites.models.data_files import load_yaml
from torchconform.suites.models.spec import Built, Unbuildable, split_model_id

SELECTIONS = ("quick", "full", causal_lm.SELECTION)
# The package whose code defines a family's models: its version is part of the key of
# a stored operator set (census/models.py).  py/ files are the user's: no version.
LIBRARIES = {"hf": "transformers", "hfcfg": "transformers", "hfclm": "transformers", "tv": "torchvision",
             "timm": "timm"}


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
    elif selection == causal_lm.SELECTION:
        # torch-neuronx's model test: every CausalLM head, 2 layers, 1024 tokens (causal_lm.py)
        ids = causal_lm.select(notes)
    elif os.path.isfile(selection):
        ids = userlist.expand(selection)
    elif "/" in selection:
        ids = [part.strip() for part in selection.split(",") if part.strip()]  # ids given inline
    else:
        raise UserError(f"unknown model selection {selection!r}; use quick, full, {causal_lm.SELECTION}, "
                        "model ids (hf/bert,hf/gpt2) "
                        "or a model list file (--models FILE)")
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
    if family == "hfcfg":
        return hfconfig.build(name, seed)
    if family == causal_lm.FAMILY:
        return causal_lm.build(name, seed)
    raise Unbuildable(f"unknown model family {family!r} in {model_id!r}; families: hf, hfclm, tv, timm, py, hfcfg")


def library_version(model_id: str) -> str:
    """What a stored operator set of ``model_id`` is valid for besides torch's version: the
    installed version of the package defining its family ("" when not installed), and
    for a model defined by a file (py/, hfcfg/) a hash of that file, so that an edited
    file is traced again.  Read from package metadata, so the sweep's driver can ask
    without importing transformers."""
    from importlib import metadata

    family, _, name = model_id.partition("/")
    parts = []
    package = LIBRARIES.get(family)
    if package:
        try:
            parts.append(metadata.version(package))
        except metadata.PackageNotFoundError:
            return ""
    if family in userlist.PATH_FAMILIES:
        parts.append("file-" + _file_digest(name.partition("::")[0]))
    return "+".join(parts)


def _file_digest(path: str) -> str:
    import hashlib

    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()[:12]
    except OSError:
        return "missing"
