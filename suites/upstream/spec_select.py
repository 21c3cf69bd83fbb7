"""``run --suite upstream --spec PATH``: a torch-neuronx spec selects the upstream tests.

The spec's files/folders become the pytest file arguments (:func:`spec_files`); this
plugin then keeps only the tests its configurations select (class, with
``class_name_suffix_options`` read as the instantiated class names, ``methods``,
``skip_classes``) and deselects the rest.  Its ``xfail`` / ``skip_tests`` entries reach
the tests as skiplist entries (``--tc-skiplist SPEC``, skiplists/neuron_spec.py), so every
record they touch carries the entry (``<spec>::c<k>.<mode><i>.<test>``) and its reason.

The plan comes from ``$TORCHCONFORM_UPSTREAM_SPEC``: a torch-neuronx JSON spec or a YAML
written by ``torchconform skiplist import`` (its ``spec:`` section).
"""
from __future__ import annotations

import os
import sys

import pytest

from torchconform import settings
from torchconform.skiplists import neuron_spec as ns
from torchconform.collectors.session import option
from torchconform.core.yamlpos import load_data
from torchconform.errors import UserError
from torchconform.skiplists.neuron_spec_io import check_section

SPEC_ENV = "TORCHCONFORM_UPSTREAM_SPEC"


def load_plan(path: str) -> ns.Spec:
    """The configurations of a JSON spec or of an imported skiplist YAML (selection only for YAML)."""
    if path.endswith(".json"):
        return ns.parse_spec(path)

    section = (load_data(path) or {}).get("spec") if os.path.isfile(path) else None
    if section is None and not os.path.isfile(path):
        raise UserError(f"--spec {path}: no such file; pass a torch-neuronx spec (.json) or an imported skiplist")
    check_section(section, path)
    configs = [ns.Config(index=k, select={key: c[key] for key in ns.SELECT_KEYS if key in c})
               for k, c in enumerate(section["configurations"])]
    return ns.Spec(path=path, configs=configs)


def spec_files(spec: ns.Spec, src: str) -> list[str]:
    """Absolute paths of the test files the spec names, in spec order, each once."""
    test_dir = os.path.join(src, "test")
    out: list[str] = []
    for config in spec.configs:
        if "file" in config.select:
            path = os.path.join(test_dir, config.select["file"])
            if not os.path.isfile(path):
                raise UserError(f"{spec.path}: test_configurations[{config.index}]: test file "
                                f"test/{config.select['file']} is not in {src}; check the checkout's version")
            found = [path]
        else:
            folder = os.path.join(test_dir, config.select["folder"])
            if not os.path.isdir(folder):
                print(f"torchconform: warning: {spec.path}: test_configurations[{config.index}]: no folder "
                      f"test/{config.select['folder']} in {src}; it selects nothing", file=sys.stderr)
                continue
            found = [p for p in _walk(folder) if _in_folder(config, os.path.relpath(p, test_dir))]
        out.extend(os.path.abspath(p) for p in found if os.path.abspath(p) not in out)
    if not out:
        raise UserError(f"{spec.path}: selects no test file in {test_dir}; check the spec against the checkout")
    return out


def _walk(folder: str):
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            if name.startswith("test_") and name.endswith(".py"):
                yield os.path.join(root, name)


def _in_folder(config: ns.Config, rel: str) -> bool:
    """``rel`` (relative to test/) lies in the configuration's folder, outside its excluded subfolders."""
    rel = rel.replace(os.sep, "/")
    folder = config.select["folder"].strip("/") + "/"
    if not rel.startswith(folder) or not os.path.basename(rel).startswith("test_") or not rel.endswith(".py"):
        return False
    inner = rel[len(folder):]
    return not any(inner.startswith(e.strip("/") + "/") for e in config.select.get("exclude_subfolders") or [])


def selects(config: ns.Config, rel: str, cls: str, method: str, own_class: bool, device: str) -> bool:
    """Does ``config`` select test ``method`` of class ``cls`` in file ``rel`` (relative to test/)?"""
    rel = rel.replace(os.sep, "/")
    if "file" in config.select:
        if rel != config.select["file"].strip("/"):
            return False
    elif not _in_folder(config, rel):
        return False
    classes = ns.class_names(config, device)
    if classes is None:
        if not own_class or any(s in cls for s in config.select.get("skip_classes") or []):
            return False
    elif cls not in classes:
        return False
    methods = config.select.get("methods")
    return methods is None or method in {ns.localize(m, device) for m in methods}


class SpecSelection:
    def __init__(self, spec: ns.Spec, device: str, root: str):
        self.spec, self.device, self.root = spec, device, root
        self.selected = 0

    def wanted(self, item) -> bool:
        cls = getattr(item, "cls", None)
        if cls is None:
            return False   # torch-neuronx runs test classes' methods only
        rel = os.path.relpath(str(item.path), os.path.join(self.root, "test"))
        own = getattr(cls, "__module__", None) == getattr(getattr(item, "module", None), "__name__", None)
        name = item.name.split("[", 1)[0]
        return any(selects(c, rel, cls.__name__, name, own, self.device) for c in self.spec.configs)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config, items):
        keep, drop = [], []
        for item in items:
            (keep if self.wanted(item) else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        self.selected = len(keep)

    def pytest_report_header(self, config):
        return f"torchconform upstream spec: {self.spec.path} ({len(self.spec.configs)} configurations)"


def pytest_configure(config):
    path = settings.given(SPEC_ENV)
    if not path:
        return

    device = option(config, "tc_device") or ns.SPEC_DEVICE
    try:
        spec = load_plan(path)
    except UserError as exc:
        raise pytest.UsageError(f"torchconform: error: {exc}") from None
    config.pluginmanager.register(SpecSelection(spec, device, str(config.rootpath)), "torchconform-upstream-spec")
