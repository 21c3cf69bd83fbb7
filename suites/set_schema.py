"""The suite-set file format (``suites/sets.yaml``, or a file of that shape), declared once.

A file holds ``sets:`` (set name -> steps) or ``steps:`` (one set, named after the file);
each step is a :class:`SetStep`.  ``suites/sets.py`` validates through :class:`SuiteSetFile`
(``core/yamlschema.py``), so an error names its line.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, BeforeValidator, field_validator

from torchconform.core.yamlschema import Failure, Strict, check, fail, field
from torchconform.suites import known_suites

NEEDS = ("pytorch_src",)
_STEP = "a step is a mapping with 'suite'; e.g. {suite: ops, selection: full}"


def _step_mapping(value):
    if not isinstance(value, dict) or not isinstance(value.get("suite"), str):
        raise fail(_STEP)
    return value


class SetStep(Strict):
    """One run of the build."""

    suite: str = field(..., doc="a torchconform suite (traits, ops, modules, upstream, models, distributed)")
    selection: Any = field(doc="quick or full (default); models also take model ids")
    needs: Optional[Literal[NEEDS]] = field(doc="pytorch_src: runs only when a PyTorch checkout is given")

    @field_validator("suite")
    @classmethod
    def _known(cls, suite):
        suites = known_suites()
        if suite not in suites:
            raise fail(f"unknown suite {suite!r}; use one of {', '.join(suites)}")
        return suite

    @field_validator("needs", mode="before")
    @classmethod
    def _needs(cls, needs):
        if needs and needs not in NEEDS:
            raise fail(f"needs {str(needs)!r} is not known; use needs: pytorch_src")
        return needs or None


def _steps(value):
    if not isinstance(value, list) or not value:
        raise fail("must be a non-empty list of steps like {suite: ops, selection: full}")
    return value


def _one_step_per_suite(steps):
    if len({s.suite for s in steps}) != len(steps):
        raise fail("names a suite twice; one step per suite (runs are per suite)")
    return steps


Steps = Annotated[list[Annotated[SetStep, BeforeValidator(_step_mapping)]], BeforeValidator(_steps),
                  AfterValidator(_one_step_per_suite)]


class SuiteSetFile(Strict):
    """A file of suite sets: ``sets:`` or ``steps:``."""

    sets: Optional[dict[str, Steps]] = field(bad="'sets' must be a mapping of set name to steps",
                                            doc="set name -> its steps")
    steps: Optional[Steps] = field(doc="the steps of the one set of this file (named after the file)")


def _unknown(parent: str, key) -> str:
    if not parent:
        return f"unknown key {key!r}; a suite-set file holds 'sets:' or 'steps:'"
    return f"unknown key {key!r}; a step has suite, selection and needs"


def _missing(parent: str, key) -> str:
    return _STEP


def describe(failure: Failure, path: str, name: str) -> str:
    """``FILE:LINE: suite set NAME [step N]: what is wrong`` for one failure."""
    loc = failure.loc
    if loc and loc[0] == "sets" and len(loc) > 1:
        name, loc = loc[1], loc[2:]
    elif loc and loc[0] == "steps":
        loc = loc[1:]
    else:
        return f"{path}:{failure.line}: {failure.message}"
    if loc and isinstance(loc[0], int):
        return f"{path}:{failure.line}: suite set {name!r} step {loc[0] + 1}: {failure.message}"
    return f"{path}:{failure.line}: suite set {name!r} {failure.message}"


def validate(data):
    """(SuiteSetFile or None, [Failure] by line)."""
    return check(SuiteSetFile, data, unknown=_unknown, missing=_missing)
