"""A team's own model list (``sweep --models FILE``), turned into model ids.

FILE is a YAML list (or a mapping with ``models:``), or one entry per line
(``#`` starts a comment).  Each entry is one of:

- a model id of a family: ``hf/llama``, ``tv/resnet18``, ``timm/convnext_tiny``,
  ``py/PATH.py::FUNCTION``, ``hfcfg/PATH.json``;
- a Hugging Face config file (``PATH.json`` with a ``model_type``): one model,
  built from that config with random weights (``hfcfg/`` family);
- a folder: its ``config.json`` if it has one, else every ``config.json`` below
  it (one model each, e.g. a folder per architecture the team ships);
- a Python file (``PATH.py`` or ``PATH.py::FUNCTION``): each top-level function
  named ``model`` or ``model_*`` (or the one named) returns ``(module, inputs)``,
  an ``nn.Module`` on CPU and its example keyword inputs.

Relative paths are relative to FILE's folder, and become absolute in the model
ids, so that the ids (stored with the results) name the same files whatever
directory the sweep, a resumed sweep or a Ray worker starts from.  The file
is only read here (a Python file is parsed, not run): building is the workers'.
"""
from __future__ import annotations

import ast
import os

from torchconform.errors import UserError
from torchconform.core.yamlpos import YamlAliasError, YamlError, load_data

# Families whose model name is a path (resolved against the list's folder).
PATH_FAMILIES = ("py", "hfcfg")
ID_FAMILIES = ("hf", "hfclm", "tv", "timm") + PATH_FAMILIES
CONFIG_FILE = "config.json"


def read_entries(path: str) -> list[str]:
    """The raw entries of a list file: YAML list, mapping with ``models:``, or one per line."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        data = load_data(path, text)
    except YamlAliasError:
        raise  # refused in every file of ours, whatever its form
    except YamlError:
        data = None  # not YAML: one entry per line
    if isinstance(data, dict):
        data = data.get("models")
    if isinstance(data, list):
        return [str(x).strip() for x in data if str(x).strip()]
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def expand(list_path: str) -> list[str]:
    """Model ids of every entry of ``list_path``, in order, duplicates kept once."""
    base = os.path.dirname(os.path.abspath(list_path))
    ids: list[str] = []
    for entry in read_entries(list_path):
        for model_id in expand_entry(entry, base, list_path):
            if model_id not in ids:
                ids.append(model_id)
    return ids


def expand_entry(entry: str, base: str, list_path: str = "the model list") -> list[str]:
    family, sep, name = entry.partition("/")
    if sep and family in ID_FAMILIES and name:
        if family in PATH_FAMILIES:
            path, colon, func = name.partition("::")
            return [f"{family}/{_resolve(path, base)}{colon}{func}"]
        return [entry]
    path, colon, func = entry.partition("::")
    full = _resolve(path, base)
    if path.endswith(".py"):
        _must_exist(full, entry, list_path)
        return [f"py/{full}::{f}" for f in ([func] if colon else _model_functions(full, entry, list_path))]
    if colon:
        raise UserError(f"{list_path}: entry {entry!r}: only a Python file takes ::FUNCTION; fix the entry")
    if path.endswith(".json"):
        _must_exist(full, entry, list_path)
        return [f"hfcfg/{full}"]
    if os.path.isdir(full):
        return _config_folder(full, entry, list_path)
    raise UserError(f"{list_path}: entry {entry!r} is neither a model id (hf/NAME, tv/NAME, timm/NAME, "
                    "py/FILE.py::FUNCTION, hfcfg/CONFIG.json) nor an existing .py file, config .json file or "
                    "folder of config.json files; fix or remove the entry")


def _resolve(path: str, base: str) -> str:
    return os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def _must_exist(full: str, entry: str, list_path: str) -> None:
    if not os.path.isfile(full):
        raise UserError(f"{list_path}: entry {entry!r}: file {full} not found; fix the path "
                        "(relative paths are relative to the list's folder)")


def _config_folder(folder: str, entry: str, list_path: str) -> list[str]:
    own = os.path.join(folder, CONFIG_FILE)
    if os.path.isfile(own):
        return [f"hfcfg/{own}"]
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        if CONFIG_FILE in files:
            found.append(f"hfcfg/{os.path.join(root, CONFIG_FILE)}")
    if not found:
        raise UserError(f"{list_path}: entry {entry!r}: folder {folder} holds no {CONFIG_FILE}; "
                        "point the entry at a folder of Hugging Face configs or at a config file")
    return found


def _model_functions(path: str, entry: str, list_path: str) -> list[str]:
    """Top-level functions named ``model`` or ``model_*`` (read from the source, not run)."""
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), filename=path)
    except SyntaxError as exc:
        raise UserError(f"{list_path}: entry {entry!r}: {path} line {exc.lineno}: {exc.msg}; fix the file")
    names = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
             and (node.name == "model" or node.name.startswith("model_"))]
    if not names:
        raise UserError(f"{list_path}: entry {entry!r}: {path} defines no function named model or model_*; "
                        "add one returning (module, inputs) or name it as PATH.py::FUNCTION")
    return names
