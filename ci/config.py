"""The gate's configuration: ci/gate.yaml, validated strictly through its declared schema
(ci/gate_schema.py): a misspelt rule, mode or threshold key is a one-line UserError naming
the file and line, never a silently ignored setting.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field

from torchconform.errors import UserError
from torchconform.core.yamlpos import YamlError, load_yaml
from torchconform.ci.gate_schema import (DEFAULT_MODES, FLAKY_PARAMS, MODES, REGRESSION_TARGETS,  # noqa: F401
                                         REPORT_PARAMS, RULE_PARAMS, validate)

DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate.yaml")


@dataclass
class Rule:
    name: str
    mode: str
    params: dict


@dataclass
class GateConfig:
    rules: dict[str, Rule]
    flaky: dict = field(default_factory=lambda: dict(FLAKY_PARAMS))
    report: dict = field(default_factory=lambda: dict(REPORT_PARAMS))
    path: str = "(defaults)"

    def rule(self, name: str) -> Rule:
        return self.rules[name]


def default_config() -> GateConfig:
    rules = {name: Rule(name, DEFAULT_MODES[name], copy.deepcopy(params)) for name, params in RULE_PARAMS.items()}
    return GateConfig(rules=rules)


def load_config(path: str | None = None) -> GateConfig:
    """Read and validate a gate config (default: the shipped ci/gate.yaml).

    Keys left out keep their defaults, so a config may name only what it changes.
    """
    path = path or DEFAULT_CONFIG
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise UserError(f"cannot read gate config {path}: {exc.strerror}; pass --config with an existing "
                        f"file (the default is {DEFAULT_CONFIG})") from None
    try:
        data = load_yaml(path, text)
    except YamlError as exc:
        raise UserError(f"bad gate config {exc} (start from {DEFAULT_CONFIG})") from None
    return parse_config(data, path)


def parse_config(data, path: str = "(inline)") -> GateConfig:
    """Validate already-parsed YAML (a dict; with ``load_yaml``'s positions, errors name the line)."""
    config = default_config()
    config.path = path
    model, failures = validate(data)
    if failures:
        line, detail = failures[0]
        where = f"{path}:{line}" if line else path
        raise UserError(f"bad gate config {where}: {detail}; fix it (start from {DEFAULT_CONFIG})")
    for name, settings in (model.rules.model_dump(exclude_unset=True) if model.rules else {}).items():
        if settings is None:
            continue
        rule = config.rules[name]
        for key, value in settings.items():
            if key == "mode":
                rule.mode = value
            else:
                rule.params[key] = value
    for section, target in (("flaky", config.flaky), ("report", config.report)):
        values = getattr(model, section)
        target.update(values.model_dump(exclude_unset=True) if values is not None else {})
    return config
