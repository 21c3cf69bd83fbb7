"""torch-neuronx specs <-> torchconform skiplist YAML (``skiplist import`` / ``skiplist export``).

An imported file is an ordinary skiplist (``backend``, ``entries``) plus a ``spec`` section
that keeps what the entries cannot say: the spec's file name and, per configuration, its
test selection and the form of each ``xfail`` / ``skip_tests`` item::

    spec:
      name: aten_spec.json
      configurations:
        - file: test_nn.py
          class: TestNNDeviceType
          class_name_suffix_options: [PRIVATEUSE1, NEURON]
          xfail: [{form: list, test_list_filename: failing_test_methods/TestNNDeviceType.json}]

The tests and reasons live in the entries, one per test, id ``c<k>.<mode><i>.<test>``
(neuron_spec.entry_id); export reads the ids, so entries edited or added by hand
(``c<k>.xfail.<test>``: a new item of configuration k) go back into the spec.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from collections import OrderedDict

import yaml

from torchconform.errors import UserError
from torchconform.skiplists import neuron_spec as ns
from torchconform.core.yamlpos import load_data
from torchconform.skiplists.schema import load_skiplist

DEFAULT_ISSUE = "https://github.com/aws-neuron/torch-neuronx/issues"


# -- import -------------------------------------------------------------------

def spec_document(spec: ns.Spec, device: str = ns.SPEC_DEVICE, issue: str = DEFAULT_ISSUE,
                  added: _dt.date | None = None) -> dict:
    """The skiplist document (plain data) of one parsed spec."""
    added = added or _dt.date.today()
    configurations = []
    for config in spec.configs:
        section = dict(config.select)
        for key, mode in ns.EXPECT_KEYS.items():
            items = [i for i in config.items if i.mode == mode]
            if items or key in config.present:
                section[key] = [_item_head(i) for i in items]
        configurations.append(section)
    entries, seen_regex = [], {}
    for e in ns.spec_entries(spec, device, issue=issue, added=added):
        regex = e.regex
        if regex in seen_regex:
            # The spec lists this test twice (another item): keep both, the first applies;
            # a regex comment keeps lint from taking the second for a copy.
            regex += f"(?#{e.id})"
        seen_regex.setdefault(e.regex, e.id)
        entries.append({"id": e.id, "match": {"regex": regex}, "mode": e.mode, "category": e.category,
                        "reason": e.reason, "issue": e.issue, "added": added.isoformat()})
    return {"backend": device, "description": f"imported from torch-neuronx spec {spec.name}",
            "spec": {"name": spec.name, "configurations": configurations}, "entries": entries}


def _item_head(item: ns.Item) -> dict:
    head = {"form": item.form}
    if item.list_file:
        head["test_list_filename"] = item.list_file
    return head


def dump(document: dict) -> str:
    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper, value):
        style = "'" if any(c in value for c in "\\:#'\"{}[]*&!|>%@`") else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    text = yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=100000, allow_unicode=True,
                     default_flow_style=None)
    return "# torchconform skiplist imported from a torch-neuronx spec (docs/neuron.md)\n" + text


def import_specs(paths, out: str | None, device: str = ns.SPEC_DEVICE, issue: str = DEFAULT_ISSUE) -> list[tuple]:
    """Write one skiplist YAML per spec; returns ``(spec, written path or None, text)``."""
    if not issue.startswith(("http://", "https://")):
        raise UserError(f"--issue {issue!r} is not a URL; pass the tracking issue's http(s) URL")
    if len(paths) > 1 and out and not (os.path.isdir(out) or out.endswith(os.sep)):
        raise UserError(f"-o {out}: several specs need a folder (one YAML per spec); create it or name a folder")
    if len(paths) > 1 and not out:
        raise UserError("several specs need -o FOLDER (one YAML per spec)")
    specs = [ns.parse_spec(p) for p in paths]      # every spec checked before anything is written
    results = []
    for spec in specs:
        text = dump(spec_document(spec, device, issue))
        target = None
        if out:
            target = out
            if os.path.isdir(out) or out.endswith(os.sep) or len(paths) > 1:
                target = os.path.join(out, os.path.splitext(spec.name)[0] + ".yaml")
            os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
            with open(target, "w", encoding="utf-8") as fh:
                fh.write(text)
        results.append((spec, target, text))
    return results


# -- export -------------------------------------------------------------------

def load_imported(path: str):
    """(spec section, validated entries) of an imported skiplist YAML; one-line errors."""
    skiplist = load_skiplist(path)
    data = load_data(path) or {}
    section = data.get("spec")
    check_section(section, path)
    # the reasons as written: the skiplist loader strips them, a spec keeps its spaces
    raw = {e.get("id"): e.get("reason") for e in data.get("entries") or [] if isinstance(e, dict)}
    for entry in skiplist.entries:
        if isinstance(raw.get(entry.id), str) and raw[entry.id].strip() == entry.reason:
            entry.reason = raw[entry.id]
    return section, skiplist.entries


def check_section(section, path: str) -> None:
    if not isinstance(section, dict) or not isinstance(section.get("configurations"), list):
        raise UserError(f"{path}: no `spec:` section with `configurations`; it was not written by "
                        "`torchconform skiplist import` (only those export to a torch-neuronx spec)")
    if not isinstance(section.get("name"), str) or not section["name"].endswith(".json"):
        raise UserError(f"{path}: spec.name must be the spec's file name (e.g. aten_spec.json)")
    for k, config in enumerate(section["configurations"]):
        if not isinstance(config, dict):
            raise UserError(f"{path}: spec.configurations[{k}] must be a mapping")
        for key in config:
            if key not in ns.CONFIG_KEYS:
                raise UserError(f"{path}: spec.configurations[{k}]: unknown key {key!r}; allowed: "
                                f"{', '.join(ns.CONFIG_KEYS)}")
        for key in ns.EXPECT_KEYS:
            for i, head in enumerate(config.get(key) or []):
                if not isinstance(head, dict) or head.get("form") not in ("grouped", "individual", "list") \
                        or (head["form"] == "list") != bool(head.get("test_list_filename")):
                    raise UserError(f"{path}: spec.configurations[{k}].{key}[{i}] must be {{form: grouped|individual}} "
                                    "or {form: list, test_list_filename: PATH}")


def export_document(section: dict, entries, path: str = "") -> tuple[dict, dict]:
    """(the spec as JSON data, {list file: names}) from an imported skiplist."""
    configs = section["configurations"]
    grouped: dict[tuple, list] = OrderedDict()    # (k, mode, i or None) -> [(name, reason)]
    for e in entries:
        parsed = ns.parse_entry_id(e.id)
        if e.id.endswith(".xfail-all"):
            continue    # the folder default: torch-neuronx derives it again
        if parsed is None:
            raise UserError(f"{e.where}: entry {e.id} has no spec id (c<k>.xfail.<test> or c<k>.skip.<test>); "
                            "rename it so export knows its configuration")
        k, mode, i, name = parsed
        if k >= len(configs):
            raise UserError(f"{e.where}: entry {e.id} names configuration {k}; the spec has {len(configs)}")
        if e.mode != mode:
            raise UserError(f"{e.where}: entry {e.id} has mode {e.mode} but its id says {mode}; make them agree")
        grouped.setdefault((k, mode, i), []).append((name, e.reason))
    lists: dict[str, list] = {}
    out = []
    for k, config in enumerate(configs):
        raw = {key: value for key, value in config.items() if key not in ns.EXPECT_KEYS}
        for key, mode in ns.EXPECT_KEYS.items():
            heads = config.get(key) or []
            items = []
            for i, head in enumerate(heads):
                items.extend(_items(head, grouped.pop((k, mode, i), []), lists))
            items.extend(_items({"form": "grouped"}, grouped.pop((k, mode, None), []), lists))
            if items or key in config:
                raw[key] = items
        out.append(raw)
    if grouped:
        (k, mode, i), tests = next(iter(grouped.items()))
        raise UserError(f"{path}: entries c{k}.{mode}{i}.* ({tests[0][0]}, ...) name item {i} of "
                        f"configuration {k}'s {mode} list, which the spec section lacks; fix the ids")
    return {"test_configurations": out}, lists


def _items(head: dict, tests: list, lists: dict) -> list[dict]:
    """Spec items of one head: several when hand edits gave its tests different reasons."""
    if not tests:
        return []
    if head["form"] == "individual":
        item: dict = {}
        for name, reason in tests:
            item[name] = {"reason": reason}
        return [item]
    by_reason: dict[str, list] = OrderedDict()
    for name, reason in tests:
        by_reason.setdefault(reason, []).append(name)
    out = []
    for n, (reason, names) in enumerate(by_reason.items()):
        if head["form"] == "list" and n == 0:
            lists[head["test_list_filename"]] = names
            out.append({"test_list_filename": head["test_list_filename"], "reason": reason})
        else:
            out.append({"tests": names, "reason": reason})
    return out


def export_specs(paths, out: str) -> list[tuple[str, list[str]]]:
    """Write ``OUT/specs/<name>`` (and ``OUT/failing_test_methods/...``) for each imported YAML."""
    results = []
    loaded = [(p, *load_imported(p)) for p in paths]
    for path, section, entries in loaded:
        data, lists = export_document(section, entries, path)
        written = []
        target = os.path.join(out, "specs", section["name"])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
            fh.write("\n")
        written.append(target)
        for rel, names in lists.items():
            list_path = os.path.join(out, rel)
            os.makedirs(os.path.dirname(list_path), exist_ok=True)
            with open(list_path, "w", encoding="utf-8") as fh:
                json.dump({"failed_tests": names}, fh, indent=2)
                fh.write("\n")
            written.append(list_path)
        results.append((path, written))
    return results


# -- comparing ------------------------------------------------------------------

def spec_content(spec: ns.Spec) -> list[tuple]:
    """What a spec means, per configuration: its selection and its (mode, test, reason) set."""
    return [(json.dumps(c.select, sort_keys=True), c.folder_default,
             frozenset((i.mode, name, reason) for i in c.items for name, reason in i.tests))
            for c in spec.configs]


def same_spec(a: ns.Spec, b: ns.Spec) -> list[str]:
    """Differences between two specs' meaning ([] when they select and expect the same)."""
    ca, cb = spec_content(a), spec_content(b)
    if len(ca) != len(cb):
        return [f"{len(ca)} configurations vs {len(cb)}"]
    out = []
    for k, (x, y) in enumerate(zip(ca, cb)):
        if x[0] != y[0]:
            out.append(f"configuration {k}: selection differs")
        if x[1] != y[1]:
            out.append(f"configuration {k}: folder default differs")
        if x[2] != y[2]:
            out.append(f"configuration {k}: {len(x[2] - y[2])} expectations lost, {len(y[2] - x[2])} added")
    return out
