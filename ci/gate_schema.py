"""The gate config format (ci/gate.yaml), declared once as pydantic models.

Strict on purpose: a misspelt rule, mode or threshold key is an error naming its line, never
a silently ignored setting (a typo that switched a rule off would make a red build look
green).  The rules and their thresholds with defaults are the ``RULE_PARAMS`` table; each
rule's model (mode + its thresholds) is made from it, so a rule is declared in one place.
``ci/config.py`` validates a file through :class:`GateFile` (``core/yamlschema.py``).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BeforeValidator, Field, create_model

from torchconform.core.yamlschema import Strict, check, fail, field

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


def _param_check(rule: str, key: str):
    """The check of one threshold of one rule (its words name both)."""
    def check_param(value):
        if key == "outcomes":
            if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
                raise fail(f"'{rule}.outcomes' must be a non-empty list of outcomes")
            wrong = [v for v in value if v not in REGRESSION_TARGETS]
            if wrong:
                raise fail(f"'{rule}.outcomes' names {wrong[0]!r}; use some of {', '.join(REGRESSION_TARGETS)}")
            return list(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise fail(f"'{rule}.{key}' must be a number >= 0, got {value!r}")
        if key.startswith("max_") and key not in ("max_drop", "max_fraction", "max_spread") and value != int(value):
            raise fail(f"'{rule}.{key}' must be a whole number, got {value!r}")
        if key in ("threshold", "max_spread") and value <= 1:
            raise fail(f"'{rule}.{key}' is a factor (> 1), got {value!r}")
        if key == "factor" and value < 1:
            raise fail(f"'{rule}.factor' is how many times an error may grow (>= 1), got {value!r}")
        if key == "max_fraction" and value > 1:
            raise fail(f"'{rule}.{key}' is a fraction of the baseline's tests (0..1), got {value!r}")
        return value
    return check_param


def _mode_check(rule: str):
    def check_mode(value):
        if value not in MODES:
            raise fail(f"rule {rule!r} has mode {value!r}; use one of fail, warn, off")
        return value
    return check_mode


def _settings(rule: str):
    """``missing_tests: warn`` is short for ``missing_tests: {mode: warn}``."""
    def settings(value):
        if isinstance(value, str):
            return {"mode": value}
        if not isinstance(value, dict):
            raise fail(f"rule {rule!r} must be a mode (fail|warn|off) or a mapping")
        return value
    return settings


def _rule_model(rule: str, params: dict):
    fields: dict[str, Any] = {"mode": (Annotated[Literal[MODES], BeforeValidator(_mode_check(rule))],
                                       field(DEFAULT_MODES[rule], doc="fail | warn | off"))}
    for key, default in params.items():
        kind = list[Literal[REGRESSION_TARGETS]] if key == "outcomes" else Union[int, float]
        fields[key] = (Annotated[kind, BeforeValidator(_param_check(rule, key))], field(default, doc=key))
    name = "".join(part.title() for part in rule.split("_")) + "Rule"
    return create_model(name, __base__=Strict, **fields)


RULE_MODELS = {rule: _rule_model(rule, params) for rule, params in RULE_PARAMS.items()}
Rules = create_model("Rules", __base__=Strict, **{
    rule: (Optional[Annotated[model, BeforeValidator(_settings(rule))]], field(None, doc=f"the {rule} rule"))
    for rule, model in RULE_MODELS.items()})
_WHOLE = "'{where}' must be a whole number >= 0, got {value!r}"
Flaky = create_model("Flaky", __base__=Strict, **{
    key: (Annotated[int, Field(ge=0)], field(default, bad=_WHOLE, doc=key)) for key, default in FLAKY_PARAMS.items()})
Report = create_model("Report", __base__=Strict, **{
    key: (Annotated[int, Field(ge=0)], field(default, bad=_WHOLE, doc=key)) for key, default in REPORT_PARAMS.items()})


class GateFile(Strict):
    """A gate config: keys left out keep their defaults."""

    rules: Optional[Rules] = field(bad="'rules' must be a mapping of rule name to settings",
                                   doc="rule -> mode, or {mode, thresholds}")
    flaky: Optional[Flaky] = field(bad="'flaky' must be a mapping", doc="flaky reruns")
    report: Optional[Report] = field(bad="'report' must be a mapping", doc="report sizes")


def _unknown(parent: str, key) -> str:
    if not parent:
        return f"unknown section {key!r} (known: rules, flaky, report)"
    if parent == "rules":
        return f"unknown rule {key!r} (known: {', '.join(RULE_PARAMS)})"
    if parent.startswith("rules."):
        rule = parent.partition(".")[2]
        return f"rule {rule!r} has unknown key {key!r} (known: mode, {', '.join(RULE_PARAMS[rule])})"
    known = FLAKY_PARAMS if parent == "flaky" else REPORT_PARAMS
    return f"'{parent}' has unknown key {key!r} (known: {', '.join(known)})"


def _missing(parent: str, key) -> str:
    return f"missing {key!r} under {parent!r}"


def validate(data):
    """(GateFile or None, [Failure] by line) of a document (None: the defaults)."""
    if data is None:
        return GateFile(), []
    if not isinstance(data, dict):
        return None, [(getattr(data, "line", 0), "the top level must be a mapping with rules/flaky/report")]
    model, failures = check(GateFile, data, unknown=_unknown, missing=_missing)
    return model, [(f.line, f.message) for f in failures]
