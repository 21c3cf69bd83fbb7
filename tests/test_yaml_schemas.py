"""Every YAML file kind torchconform reads is validated through its declared schema (pydantic
models, core/yamlschema.py): an unknown key and a wrong type are each one line naming
FILE:LINE, and each kind's schema can be written out as JSON schema (so a hand-written
validator cannot quietly take its place)."""
from __future__ import annotations

import pytest
from pydantic import BaseModel

from torchconform.ci import config as gate_config
from torchconform.ci.gate_schema import GateFile
from torchconform.core import profile as backend_profile
from torchconform.core.category_schema import CategoriesFile
from torchconform.core.clusters import load_categories
from torchconform.core.profile_schema import BackendProfileFile
from torchconform.core.yamlschema import json_schema
from torchconform.errors import UserError
from torchconform.refdev import profiles as refdev_profiles
from torchconform.refdev.profile_schema import RefdevProfileFile
from torchconform.skiplists.schema import SkiplistFile, load_skiplist
from torchconform.suites import sets as suite_sets
from torchconform.suites.set_schema import SuiteSetFile

ENTRY = ("  - match: {op: add}\n    mode: skip\n    category: known_bug\n"
         "    reason: add is wrong for big inputs\n    issue: https://github.com/example/x/issues/1\n"
         "    added: 2026-11-01\n")

# kind -> (loader, good text, (unknown-key text, its line, words), (wrong-type text, its line, words))
KINDS = {
    "skiplist": (
        load_skiplist, "backend: refdev\nentries:\n" + ENTRY,
        ("backend: refdev\nentries:\n" + ENTRY + "    colour: red\n", 9, "unknown entry key 'colour'"),
        ("backend: refdev\nentries:\n" + ENTRY.replace("mode: skip", "mode: [skip]"), 4, "mode ['skip'] is not one of"),
    ),
    "backend-profile": (
        backend_profile.load_profile, "device: npu\nbackend_names: [npu]\n",
        ("device: npu\n\ncolour: red\n", 3, "unknown key 'colour'"),
        ("device: npu\ndistributed:\n  ranks_per_host: many\n", 3, "distributed.ranks_per_host must be a whole number"),
    ),
    "refdev-profile": (
        refdev_profiles.load_profile, "name: mine\nmissing: {share_percent: 5, salt: s}\n",
        ("name: mine\ntraits:\n  fast: true\n", 3, "unknown trait 'fast'"),
        ("name: mine\ncollectives:\n  synchronous: yes please\n", 3, "'collectives.synchronous' must be true or false"),
    ),
    "gate-config": (
        gate_config.load_config, "rules:\n  regression: warn\n",
        ("rules:\n  regression:\n    mode: warn\n    max_test: 1\n", 4, "unknown key 'max_test'"),
        ("rules: {}\nflaky:\n  reruns: three\n", 3, "'flaky.reruns' must be a whole number >= 0"),
    ),
    "suite-set": (
        suite_sets.load_set, "steps:\n  - {suite: ops, selection: quick}\n",
        ("steps:\n  - suite: ops\n    when: nightly\n", 3, "unknown key 'when'"),
        ("steps:\n  - suite: ops\n  - 7\n", 3, "a step is a mapping with 'suite'"),
    ),
    "failure-categories": (
        load_categories, "categories:\n  - {name: Leaks, message: memory leak}\n",
        ("categories:\n  - name: Leaks\n    message: leak\n    colour: red\n", 4, "unknown key 'colour'"),
        ("- name: Leaks\n  message: 404\n", 2, "'message' must be a string"),
    ),
}
SCHEMAS = {"skiplist": SkiplistFile, "backend-profile": BackendProfileFile, "refdev-profile": RefdevProfileFile,
           "gate-config": GateFile, "suite-set": SuiteSetFile, "failure-categories": CategoriesFile}


def _write(tmp_path, text):
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_has_a_declared_schema(kind):
    model = SCHEMAS[kind]
    assert issubclass(model, BaseModel) and model.model_config.get("extra") == "forbid"
    schema = json_schema(model)
    assert schema["type"] == "object" and schema["properties"] and schema.get("additionalProperties") is False


@pytest.mark.parametrize("case", ["unknown-key", "wrong-type"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_bad_file_is_one_line_naming_file_and_line(tmp_path, kind, case):
    load, good, unknown, wrong = KINDS[kind]
    load(_write(tmp_path, good))   # the good file loads
    text, line, words = unknown if case == "unknown-key" else wrong
    path = _write(tmp_path, text)
    with pytest.raises(UserError) as err:
        load(path)
    message = str(err.value)
    assert "\n" not in message and f"{path}:{line}: " in message and words in message, message


def test_the_schemas_are_what_validates(tmp_path, monkeypatch):
    """The loader reads the declared model: a field taken out of the model is refused in a file,
    and the key tables (docs, ``backend init``) are read from the model."""
    from pydantic import create_model

    from torchconform.core import profile_schema

    assert profile_schema.KEYS["worker_env"][0] == "str"
    path = _write(tmp_path, "device: npu\nworker_env: X\n")
    assert backend_profile.load_profile(path).worker_env == "X"
    keep = {n: (f.annotation, f) for n, f in BackendProfileFile.model_fields.items() if n != "worker_env"}
    monkeypatch.setattr(profile_schema, "BackendProfileFile",
                        create_model("Narrowed", __base__=profile_schema.Strict, **keep))
    with pytest.raises(UserError, match=r"mine\.yaml:2: unknown key 'worker_env'"):
        backend_profile.load_profile(path)
