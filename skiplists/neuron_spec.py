"""torch-neuronx test plans ("specs"): read them, select tests with them, turn their
expectations into skiplist entries.

A spec is a JSON file ``{"test_configurations": [...]}`` as the Neuron team keeps them in
``tests/pytorch_tests/specs/`` of torch-neuronx.  Each configuration names PyTorch test
files (``file``, or ``folder`` with ``exclude_subfolders``), optionally a ``class`` (with
``class_name_suffix_options``: the instantiated class is the class name plus one of them),
``methods``, and ``xfail`` / ``skip_tests`` lists in three forms::

    {"tests": ["test_a", "test_b"], "reason": "..."}             grouped
    {"test_a": {"reason": "..."}, "test_b": {"reason": "..."}}   individual
    {"test_list_filename": "failing_test_methods/X.json", "reason": "..."}

A list file holds ``{"failed_tests": [...]}`` and is resolved, as torch-neuronx does, from
the folder that holds ``specs/`` (the spec file's folder's parent).  Test names match method
names by substring (torch-neuronx's aten and dynamo runners); for files under
``distributed/`` by exact name (its distributed runner).  A ``folder`` configuration with
neither ``class`` nor ``methods`` and no non-empty ``xfail`` expects every test to fail
(torch-neuronx's default; ``xfail_reason`` words it).  ``skip_tests`` wins over ``xfail``.

Entry ids name the spec item: ``c<k>.<xfail|skip><i>.<test>`` is test ``<test>`` of item
``i`` of configuration ``k`` (0-based, file order); ``c<k>.xfail-all`` the folder default.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
from dataclasses import dataclass, field

from torchconform.errors import UserError
from torchconform.skiplists.entries import Entry, Skiplist

TOP_KEYS = ("test_configurations",)
# selection keys, kept as they are by import/export
SELECT_KEYS = ("file", "folder", "exclude_subfolders", "class", "class_name_suffix_options", "methods",
               "skip_classes", "sanity_methods", "xfail_reason")
EXPECT_KEYS = {"xfail": "xfail", "skip_tests": "skip"}
CONFIG_KEYS = SELECT_KEYS + tuple(EXPECT_KEYS)
SPEC_DEVICE = "neuron"          # the device name inside torch-neuronx's test names
FOLDER_DEFAULT = "folder configuration without xfail entries: every test is expected to fail (torch-neuronx default)"
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass
class Item:
    """One element of an ``xfail`` / ``skip_tests`` list."""
    mode: str                     # xfail | skip
    index: int
    form: str                     # grouped | individual | list
    tests: list[tuple[str, str]]  # (test name, reason)
    list_file: str = ""           # test_list_filename, for the list form


@dataclass
class Config:
    index: int
    select: dict
    items: list[Item] = field(default_factory=list)
    folder_default: str = ""      # reason of the folder-level xfail-all, "" when it does not apply
    present: tuple = ()           # which of xfail / skip_tests the spec wrote (perhaps empty)

    @property
    def exact(self) -> bool:
        where = self.select.get("file") or self.select.get("folder") or ""
        return where.replace("\\", "/").startswith("distributed/")


@dataclass
class Spec:
    path: str
    configs: list[Config]

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def root(self) -> str:
        """The folder holding ``specs/``: where list files are resolved from."""
        return os.path.dirname(os.path.dirname(os.path.abspath(self.path)))

    def counts(self) -> dict:
        xfail = sum(len(i.tests) for c in self.configs for i in c.items if i.mode == "xfail")
        skip = sum(len(i.tests) for c in self.configs for i in c.items if i.mode == "skip")
        forms = sorted({i.form for c in self.configs for i in c.items})
        return {"entries": len(self.configs), "xfail": xfail, "skip": skip,
                "folder_defaults": sum(bool(c.folder_default) for c in self.configs), "forms": forms}


def _where(path, k, key=None, i=None) -> str:
    out = f"{path}: test_configurations[{k}]"
    if key is not None:
        out += f".{key}"
    if i is not None:
        out += f"[{i}]"
    return out


def _names(value) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) and x for x in value)


def parse_spec(path: str) -> Spec:
    """Read and check one spec file; any problem is a one-line ``UserError`` naming the entry."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise UserError(f"{path}: cannot read the spec ({exc.strerror}); check the path") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not JSON ({exc.msg}); fix the file") from None
    if not isinstance(data, dict) or not isinstance(data.get("test_configurations"), list):
        raise UserError(f"{path}: a torch-neuronx spec is an object with a 'test_configurations' list")
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise UserError(f"{path}: unknown top-level key {unknown[0]!r}; a spec holds only 'test_configurations'")
    spec = Spec(path=path, configs=[])
    for k, raw in enumerate(data["test_configurations"]):
        spec.configs.append(_parse_config(spec, k, raw))
    return spec


def _parse_config(spec: Spec, k: int, raw) -> Config:
    path = spec.path
    if not isinstance(raw, dict):
        raise UserError(f"{_where(path, k)}: each configuration must be an object with 'file' or 'folder'")
    for key in raw:
        if key not in CONFIG_KEYS:
            raise UserError(f"{_where(path, k)}: unknown key {key!r}; allowed: {', '.join(CONFIG_KEYS)}")
    if ("file" in raw) == ("folder" in raw):
        raise UserError(f"{_where(path, k)}: needs exactly one of 'file' and 'folder'")
    for key in ("file", "folder", "class", "xfail_reason"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise UserError(f"{_where(path, k, key)}: must be non-empty text")
    for key in ("exclude_subfolders", "class_name_suffix_options", "methods", "skip_classes", "sanity_methods"):
        if raw.get(key) is not None and not _names(raw[key]):
            raise UserError(f"{_where(path, k, key)}: must be a list of names")
    if "file" in raw and "exclude_subfolders" in raw:
        raise UserError(f"{_where(path, k, 'exclude_subfolders')}: only applies to a 'folder' configuration")
    config = Config(index=k, select={key: raw[key] for key in SELECT_KEYS if key in raw},
                    present=tuple(key for key in EXPECT_KEYS if key in raw))
    for key, mode in EXPECT_KEYS.items():
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, list):
            raise UserError(f"{_where(path, k, key)}: must be a list of items")
        for i, item in enumerate(value):
            config.items.append(_parse_item(spec, k, key, mode, i, item))
    if "folder" in raw and raw.get("class") is None and raw.get("methods") is None and not raw.get("xfail"):
        config.folder_default = raw.get("xfail_reason") or FOLDER_DEFAULT
    return config


def _parse_item(spec: Spec, k: int, key: str, mode: str, i: int, item) -> Item:
    where = _where(spec.path, k, key, i)
    if not isinstance(item, dict) or not item:
        raise UserError(f"{where}: must be an object ({{\"tests\": [...], \"reason\": ...}}, "
                        "{\"test\": {\"reason\": ...}} or {\"test_list_filename\": ..., \"reason\": ...})")
    if "tests" in item or "test_list_filename" in item:
        form = "grouped" if "tests" in item else "list"
        expected = {"tests" if form == "grouped" else "test_list_filename", "reason"}
        extra = sorted(set(item) - expected)
        if extra:
            raise UserError(f"{where}: unknown key {extra[0]!r} in a {form} item; it holds {' and '.join(sorted(expected))}")
        reason = item.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise UserError(f"{where}: a {form} item needs a 'reason' (text)")
        if form == "grouped":
            if not _names(item["tests"]):
                raise UserError(f"{where}.tests: must be a list of test names")
            names, list_file = item["tests"], ""
        else:
            list_file = item["test_list_filename"]
            if not isinstance(list_file, str) or not list_file:
                raise UserError(f"{where}.test_list_filename: must be a path like failing_test_methods/X.json")
            names = read_list_file(spec, list_file, where)
        for name in names:
            _check_name(name, where)
        return Item(mode=mode, index=i, form=form, tests=[(n, reason) for n in names], list_file=list_file)
    tests = []
    for name, conf in item.items():
        if not isinstance(conf, dict) or set(conf) != {"reason"} or not isinstance(conf["reason"], str) \
                or not conf["reason"].strip():
            raise UserError(f"{where}: test {name!r} needs {{\"reason\": \"...\"}} and nothing else")
        _check_name(name, where)
        tests.append((name, conf["reason"]))
    return Item(mode=mode, index=i, form="individual", tests=tests)


def _check_name(name: str, where: str) -> None:
    if not _NAME.match(name):
        raise UserError(f"{where}: {name!r} is not a test method name (letters, digits, '_')")


def read_list_file(spec: Spec, rel: str, where: str) -> list[str]:
    path = os.path.join(spec.root, rel)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError:
        raise UserError(f"{where}: list file {rel} not found at {path} (resolved from the folder holding "
                        "specs/); fetch failing_test_methods/ beside specs/") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not JSON ({exc.msg}); fix the list file") from None
    if not isinstance(data, dict) or not _names(data.get("failed_tests")):
        raise UserError(f"{path}: a list file is an object with a 'failed_tests' list of test names")
    return data["failed_tests"]


# -- matching -------------------------------------------------------------------

def class_names(config: Config, device: str = SPEC_DEVICE) -> list[str] | None:
    """Class names a configuration selects (None: every class of its files)."""
    cls = config.select.get("class")
    if not cls:
        return None
    suffixes = list(config.select.get("class_name_suffix_options") or [])
    if suffixes and device.upper() not in suffixes:
        suffixes.append(device.upper())   # how torchconform names the instantiated class
    return [cls + s for s in suffixes] + [cls]


def localize(name: str, device: str = SPEC_DEVICE) -> str:
    """A spec test name as it reads on ``device`` (``test_x_neuron_float32`` -> ``test_x_refdev_float32``)."""
    if device == SPEC_DEVICE:
        return name
    return re.sub(rf"(?<=_){SPEC_DEVICE}(?=_|$)", device, name)


def file_pattern(config: Config) -> str:
    """Regex of the node-id prefix (``test/<file>``) of a configuration's files."""
    if "file" in config.select:
        return re.escape("test/" + config.select["file"].strip("/"))
    folder = "test/" + config.select["folder"].strip("/") + "/"
    excluded = [re.escape(e.strip("/") + "/") for e in config.select.get("exclude_subfolders") or []]
    guard = f"(?!(?:{'|'.join(excluded)}))" if excluded else ""
    return re.escape(folder) + guard + r"(?:[^:]*/)?test_[^:/]*\.py"


def entry_regex(config: Config, name: str | None, device: str = SPEC_DEVICE) -> str:
    """``re.search`` pattern on node ids for a test name of a configuration (None: all its tests)."""
    classes = class_names(config, device)
    if classes is None:
        skip = config.select.get("skip_classes") or []
        cls = (f"(?![^:]*(?:{'|'.join(map(re.escape, skip))}))" if skip else "") + "[^:]+"
    else:
        cls = "(?:" + "|".join(map(re.escape, classes)) + ")"
    head = f"^{file_pattern(config)}::{cls}::"
    if name is None:
        return head
    method = re.escape(localize(name, device))
    return head + (method + "$" if config.exact else "[^:]*" + method)


def entry_id(config: Config, item: Item | None, name: str | None) -> str:
    if item is None:
        return f"c{config.index}.xfail-all"
    return f"c{config.index}.{item.mode}{item.index}.{name}"


_ID = re.compile(r"^c(?P<k>\d+)\.(?P<mode>xfail|skip)(?P<i>\d*)\.(?P<name>.+)$")


def parse_entry_id(entry_id: str):
    """``(config index, mode, item index or None, test name)`` of an id written by :func:`entry_id`, else None."""
    m = _ID.match(entry_id)
    if not m:
        return None
    return int(m["k"]), m["mode"], (int(m["i"]) if m["i"] else None), m["name"]


def spec_entries(spec: Spec, device: str = SPEC_DEVICE, path: str | None = None, issue: str = "",
                 added: _dt.date | None = None):
    """Skiplist entries of a spec: skip entries first (skip_tests wins over xfail), then xfail."""
    added = added or _dt.date.today()
    issue = issue or f"torch-neuronx spec {spec.name}"
    out = {"skip": [], "xfail": []}
    seen: set[str] = set()
    for config in spec.configs:
        for item in config.items:
            for name, reason in item.tests:
                eid = entry_id(config, item, name)
                if eid in seen:
                    continue   # the same name twice in one item: one entry
                seen.add(eid)
                out[item.mode].append(Entry(mode=item.mode, category="known_bug", reason=reason, issue=issue,
                                            added=added, id=eid, regex=entry_regex(config, name, device),
                                            path=path or spec.path))
        if config.folder_default:
            out["xfail"].append(Entry(mode="xfail", category="known_bug", reason=config.folder_default, issue=issue,
                                      added=added, id=entry_id(config, None, None),
                                      regex=entry_regex(config, None, device), path=path or spec.path))
    return out["skip"] + out["xfail"]


def skiplist_from_spec(path: str, device: str | None = None):
    """A spec file as a ``Skiplist`` (what ``--skiplist SPEC.json`` and ``run --spec`` apply)."""
    spec = parse_spec(path)
    return Skiplist(path=path, backend=device or SPEC_DEVICE, description=f"torch-neuronx spec {spec.name}",
                    entries=spec_entries(spec, device or SPEC_DEVICE))
