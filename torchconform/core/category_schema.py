"""The failure-categories file format (``--categories PATH`` of ``site`` and ``gate``), declared once.

A file holds a list of categories, or ``categories:`` holding that list; each is a
:class:`CategoryEntry`: ``name``, ``message`` (a Python regex; Allure's spelling
``messageRegex`` is taken too) and optional ``outcomes`` (which failed outcomes it applies
to).  ``core/clusters.py`` (``load_categories``) reads a file through :func:`load`: the YAML
loader of every file kind (``yamlpos.load_yaml``: no aliases, positions kept) and
:class:`CategoriesFile` (``core/yamlschema.py``), so each problem is one line
``FILE:LINE: category N (NAME): what is wrong; the fix``.
"""
from __future__ import annotations

import re
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, BeforeValidator, model_validator

from torchconform.core.outcome import FAILED
from torchconform.core.yamlpos import PosDict, PosList, YamlError, load_yaml
from torchconform.core.yamlschema import Failure, Strict, check, fail, field

OUTCOMES = tuple(sorted(FAILED))
_SHAPE = ("a categories file is a list of categories like {name: Numerics, message: 'not close'}, "
          "or 'categories:' holding that list")
_KEYS = "a category has name, message (or messageRegex) and outcomes"
# Allure's categories.json keys torchconform does not read, and what to write instead
_ALLURE = {"matchedStatuses": f"use outcomes: [...] with some of {', '.join(OUTCOMES)}",
           "traceRegex": "only the message is matched; use message: REGEX"}


def _name(value: str) -> str:
    if not value.strip():
        raise fail("needs a name: 'name' is empty; give the category a name")
    return value.strip()


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise fail(f"bad regex {value!r} in '{{key}}': {exc}; fix the pattern "
                   r"(Python re syntax: escape ( [ . * + ? with \ to match them as text)") from None
    return value


def _outcomes(value):
    if value is None:
        return value
    words = f"outcomes must be a list of some of {', '.join(OUTCOMES)}"
    if not isinstance(value, list):
        raise fail(f"{words}, got {value!r}; e.g. outcomes: [fail, error]")
    for i, item in enumerate(value):
        if item not in FAILED:
            raise fail(f"{words}; {item!r} is no failed outcome: remove it", at=(i,))
    return value


def _entry_mapping(value):
    if not isinstance(value, dict):
        raise fail(f"{_KEYS}; got {value!r}, write it as {{name: NAME, message: REGEX}}")
    return value


_STR = "'{key}' must be a string (quote it), got {value!r}"
Regex = Optional[Annotated[str, AfterValidator(_regex)]]


class CategoryEntry(Strict):
    """One named category: the failures whose message its regex finds (``re.search``)."""

    name: Annotated[str, AfterValidator(_name)] = field(..., bad=_STR, doc="the cluster's name on pages and reports")
    message: Regex = field(bad=_STR, doc="a Python regex searched in the failure's message")
    messageRegex: Regex = field(bad=_STR, doc="Allure's spelling of message")   # named as the file spells it
    outcomes: Annotated[Optional[list[Literal[OUTCOMES]]], BeforeValidator(_outcomes)] = field(
        doc=f"the failed outcomes it applies to ({', '.join(OUTCOMES)}); left out: all")

    @model_validator(mode="after")
    def _one_regex(self):
        if self.message is None and self.messageRegex is None:
            raise fail("needs a message regex; add message: REGEX (e.g. message: 'not close')")
        if self.message is not None and self.messageRegex is not None:
            raise fail("has both message and messageRegex; keep one", at=("messageRegex",))
        return self

    @property
    def regex(self) -> str:
        return self.message if self.message is not None else self.messageRegex


def _entry_list(value):
    if not isinstance(value, list):
        raise fail(f"'categories' must be a list of categories like {{name: NAME, message: REGEX}}, got {value!r}")
    return value


Entries = Annotated[list[Annotated[CategoryEntry, BeforeValidator(_entry_mapping)]], BeforeValidator(_entry_list)]


class CategoriesFile(Strict):
    """A categories file (a bare list is read as ``categories:`` holding it)."""

    categories: Entries = field(..., doc="the categories; the first whose regex matches a failure is its cluster")


def _unknown(parent: str, key) -> str:
    if not parent:
        return f"unknown key {key!r}; {_SHAPE}"
    return f"unknown key {key!r}; " + _ALLURE.get(key, f"{_KEYS} (remove it or fix its spelling)")


def _missing(parent: str, key) -> str:
    if not parent:
        return _SHAPE
    return f"needs a {key}; add {key}: TEXT"


def validate(data):
    """(CategoriesFile or None, [Failure] by line) of a document loaded by ``yamlpos.load_yaml``."""
    if isinstance(data, PosList):   # the list alone: as if under 'categories:'
        wrapped = PosDict(categories=data)
        wrapped.line, wrapped.key_lines = data.line, {"categories": data.line}
        data = wrapped
    if not isinstance(data, dict):
        said = "the file is empty; " + _SHAPE if data is None else f"{_SHAPE}; got {data!r}"
        return None, [Failure(getattr(data, "line", 0) or 1, "schema", said, ())]
    return check(CategoriesFile, data, unknown=_unknown, missing=_missing)


def describe(failure: Failure, data) -> str:
    """``category N (NAME): what is wrong`` (N from 1) for a failure in an entry; the message alone otherwise."""
    loc = failure.loc
    if len(loc) < 2 or loc[0] != "categories" or not isinstance(loc[1], int):
        return failure.message
    entries = data.get("categories") if isinstance(data, dict) else data
    entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else None
    name = entry.get("name") if isinstance(entry, dict) else None
    named = f" ({name.strip()})" if isinstance(name, str) and name.strip() else ""
    return f"category {loc[1] + 1}{named}: {failure.message}"


def load(path) -> list[CategoryEntry]:
    """The categories of the file at ``path``, in order; a ``YamlError`` (a ``UserError``:
    ``FILE:LINE: ...``, exit 2) for a file that cannot be read or is not of this shape."""
    path = str(path)
    data = load_yaml(path)
    model, failures = validate(data)
    if failures:
        raise YamlError(path, failures[0].line, describe(failures[0], data))
    return model.categories
