"""The gate's configuration: ci/gate.yaml, validated strictly.

Strict on purpose: a misspelt rule, mode or threshold key is a one-line
UserError naming the file, never a silently ignored setting (a typo that
switched a rule off would make a red build look green).
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field

from torchconform.errors import UserError
from torchconform.core.yamlpos import YamlError, load_data

DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate.yaml")

MODES = ("fail", "warn", "off")

# rule -> {threshold/option key: default}; this order is the order of the report.
RULE_PARAMS: dict[str, dict] = {
    "regression": {"max_tests": 0, "outcomes": ["fail", "error", "crash", "timeout", "missing_op",
                                                "missing_collective", "missing_c10d_backend", "missing_device_api"]},
    "new_missing_op": {"max_ops": 0},
    "coverage_drop": {"max_drop": 0.5},
    "new_test_failing": {"max_tests": 0},
    "fallback_creep": {"max_tests": 0},
    "stale_expectations": {"max_tests": 0},
    "missing_tests": {"max_fraction": 0.0},
    "numeric_drift": {"max_pairs": 0, "factor": 10, "min_abs": 1e-12, "min_rel": 1e-12},
    "lost_operator": {"max_ops": 0},
    "fallback_forbidden": {"max_tests": 0},
    # torchconform/core/perf.py: DEFAULT_THRESHOLD, DEFAULT_FLOOR_S
    "perf_regression": {"max_ops": 0, "threshold": 1.25, "floor_s": 2e-4, "max_spread": 1.25},
    # the support manifest (torchconform/core/claims.py): claims the build breaks
    "broken_claim": {"max_claims": 0},
}
DEFAULT_MODES = {"regression": "fail", "new_missing_op": "fail", "coverage_drop": "fail",
                 "new_test_failing": "fail", "fallback_creep": "fail", "stale_expectations": "warn",
                 "missing_tests": "fail", "numeric_drift": "warn", "lost_operator": "warn", "fallback_forbidden": "fail",
                 "perf_regression": "warn", "broken_claim": "warn"}
FLAKY_PARAMS = {"reruns": 3, "max_tests": 20, "timeout": 600}
REPORT_PARAMS = {"max_items": 50}

# What `regression.outcomes` may name: failure outcomes plus the backend-skip kinds.
REGRESSION_TARGETS = ("fail", "error", "crash", "timeout", "missing_op", "skiplist",
                      "unsupported_dtype", "not_executed", "xfail", "skip_eligibility",
                      "missing_collective", "missing_c10d_backend", "missing_device_api")


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
        data = load_data(path, text)
    except YamlError as exc:
        raise UserError(f"bad gate config {exc} (start from {DEFAULT_CONFIG})") from None
    return parse_config(data, path)


def parse_config(data, path: str = "(inline)") -> GateConfig:
    """Validate already-parsed YAML (a dict) into a GateConfig."""
    def bad(detail: str):
        return UserError(f"bad gate config {path}: {detail}; fix it (start from {DEFAULT_CONFIG})")

    config = default_config()
    config.path = path
    if data is None:
        return config
    if not isinstance(data, dict):
        raise bad("the top level must be a mapping with rules/flaky/report")
    unknown = set(data) - {"rules", "flaky", "report"}
    if unknown:
        raise bad(f"unknown section {sorted(unknown)[0]!r} (known: rules, flaky, report)")

    rules = data.get("rules") or {}
    if not isinstance(rules, dict):
        raise bad("'rules' must be a mapping of rule name to settings")
    for name, settings in rules.items():
        if name not in RULE_PARAMS:
            raise bad(f"unknown rule {name!r} (known: {', '.join(RULE_PARAMS)})")
        if isinstance(settings, str):  # shorthand: `missing_tests: warn`
            settings = {"mode": settings}
        if not isinstance(settings, dict):
            raise bad(f"rule {name!r} must be a mode (fail|warn|off) or a mapping")
        rule = config.rules[name]
        for key, value in settings.items():
            if key == "mode":
                if value not in MODES:
                    raise bad(f"rule {name!r} has mode {value!r}; use one of fail, warn, off")
                rule.mode = value
            elif key in RULE_PARAMS[name]:
                rule.params[key] = _check_param(name, key, value, bad)
            else:
                raise bad(f"rule {name!r} has unknown key {key!r} (known: mode, {', '.join(RULE_PARAMS[name])})")

    for section, defaults, target in (("flaky", FLAKY_PARAMS, config.flaky), ("report", REPORT_PARAMS, config.report)):
        values = data.get(section) or {}
        if not isinstance(values, dict):
            raise bad(f"'{section}' must be a mapping")
        for key, value in values.items():
            if key not in defaults:
                raise bad(f"'{section}' has unknown key {key!r} (known: {', '.join(defaults)})")
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise bad(f"'{section}.{key}' must be a whole number >= 0, got {value!r}")
            target[key] = value
    return config


def _check_param(rule: str, key: str, value, bad):
    if key == "outcomes":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise bad(f"'{rule}.outcomes' must be a non-empty list of outcomes")
        wrong = [v for v in value if v not in REGRESSION_TARGETS]
        if wrong:
            raise bad(f"'{rule}.outcomes' names {wrong[0]!r}; use some of {', '.join(REGRESSION_TARGETS)}")
        return list(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise bad(f"'{rule}.{key}' must be a number >= 0, got {value!r}")
    if key.startswith("max_") and key not in ("max_drop", "max_fraction", "max_spread") and value != int(value):
        raise bad(f"'{rule}.{key}' must be a whole number, got {value!r}")
    if key in ("threshold", "max_spread") and value <= 1:
        raise bad(f"'{rule}.{key}' is a factor (> 1), got {value!r}")
    if key == "factor" and value < 1:
        raise bad(f"'{rule}.factor' is how many times an error may grow (>= 1), got {value!r}")
    if key == "max_fraction" and value > 1:
        raise bad(f"'{rule}.{key}' is a fraction of the baseline's tests (0..1), got {value!r}")
    return value
