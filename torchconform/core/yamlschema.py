"""Declared YAML file shapes (pydantic models) checked with ``file:line`` for every problem.

Each YAML file kind torchconform reads declares its shape once as ``Strict`` models (unknown
keys are errors, no type coercion): backend profiles (``core/profile_schema.py``), skiplists
(``skiplists/schema.py``), refdev profiles (``refdev/profile_schema.py``), the gate config
(``ci/gate_schema.py``), suite sets (``suites/set_schema.py``) and failure categories
(``core/category_schema.py``).  :func:`check` validates a
document loaded with positions (``yamlpos.load_yaml``) against one and maps each pydantic
error's ``loc`` back to the YAML line it came from, so a user sees ``FILE:LINE: what is wrong;
the fix`` and never a pydantic report.

The words are the file kind's own, not pydantic's:

* a validator raises :func:`fail` with the finished message (``{where}`` stands for the
  dotted key of the value, ``{key}`` for its last part, ``{parent}`` for the mapping holding it);
* a wrong type or bound on a field says the field's ``bad`` text (:func:`field`);
* an unknown or a missing key is worded by the kind's ``unknown``/``missing`` functions.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from torchconform.core.yamlpos import PosDict, PosList, Problem

__all__ = ["Strict", "field", "fail", "check", "Failure", "field_map", "line_at"]


class Strict(BaseModel):
    """A file section: unknown keys are errors, values keep the type YAML gave them."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


def field(default: Any = None, doc: str = "", *, bad: str | None = None, kind: str | None = None,
          alias: str | None = None, **kwargs) -> Any:
    """A model field with its documentation (``doc``), a short kind word (``kind``: what
    ``backend init`` and docs/profiles.md say it holds) and the message for a value of the
    wrong type or out of bounds (``bad``; ``{where}``, ``{key}``, ``{value!r}`` and ``{type}`` filled in)."""
    extra = {k: v for k, v in (("x-kind", kind), ("x-bad", bad)) if v is not None}
    return Field(default, description=doc or None, alias=alias, json_schema_extra=extra or None, **kwargs)


def fail(message: str, code: str = "schema", at: tuple = ()) -> PydanticCustomError:
    """The error a validator raises: ``message`` as the user reads it; ``code`` is the
    Problem's code (lint prints it); ``at`` names a key below the validated value whose line
    the error belongs to."""
    return PydanticCustomError(code, "{message}", {"message": message, "at": list(at)})


@dataclass
class Failure:
    """One error of a validation: where it is and what it says."""

    line: int
    code: str
    message: str
    loc: tuple


def where_of(loc) -> str:
    """The dotted key of a pydantic ``loc`` (list indices and ``[key]`` markers left out)."""
    return ".".join(str(p) for p in loc if not isinstance(p, int) and p != "[key]")


def _key_of(loc) -> str:
    """The last key of a ``loc`` (``mode`` of ``entries.3.mode``)."""
    return next((str(p) for p in reversed(loc) if not isinstance(p, int) and p != "[key]"), "")


def line_at(data, loc) -> int:
    """The line of the YAML node ``loc`` reaches in ``data`` (Pos* containers): the deepest one
    it can follow (a missing key: the line of the mapping that lacks it); 0 for plain data."""
    line, node = getattr(data, "line", 0), data
    for part in loc:
        if isinstance(node, PosDict) and not isinstance(part, int) and part in node:
            line, node = node.line_of(part), node[part]
        elif isinstance(node, PosList) and isinstance(part, int) and 0 <= part < len(node):
            line, node = node.item_lines[part], node[part]
        else:
            break
    return line


def _models_in(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def field_map(model: type[BaseModel], prefix: str = "") -> dict:
    """{dotted key: FieldInfo} of every field of ``model`` and its sections."""
    out = {}
    for name, info in model.model_fields.items():
        key = prefix + (info.alias or name)
        out[key] = info
        for sub in _models_in(info.annotation):
            out.update(field_map(sub, key + "."))
    return out


def _extra(info) -> dict:
    return info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}


def kinds(model: type[BaseModel]) -> dict:
    """{key: (kind, doc)} of the top-level fields of ``model`` (the tables docs and
    ``backend init`` read)."""
    return {(info.alias or name): (_extra(info).get("x-kind", ""), info.description or "")
            for name, info in model.model_fields.items()}


def _render(err: dict, fields: dict, unknown: Callable, missing: Callable) -> tuple[str, str, tuple]:
    """(code, message, loc) of one pydantic error in the file kind's words."""
    loc, kind, value = tuple(err["loc"]), err["type"], err.get("input")
    ctx = err.get("ctx") or {}
    if "message" in ctx and "at" in ctx:
        where, key = where_of(loc), _key_of(loc)
        parent = where.rpartition(".")[0]
        for part in ctx["at"]:   # the line of a key beside (..) or below the validated value
            loc = loc[:-1] if part == ".." else loc + (part,)
        text = ctx["message"].replace("{where}", where).replace("{parent}", parent).replace("{key}", key)
        return kind, text, loc
    names = [p for p in loc if not isinstance(p, int)]
    where = where_of(loc)
    if kind == "extra_forbidden":
        return "schema", unknown(where_of(loc[:-1]), loc[-1]), loc
    if kind == "missing":
        return "schema", missing(where_of(loc[:-1]), loc[-1]), loc
    info = fields.get(where)
    if info is None and names:   # an item of a list field: the list's words
        info = fields.get(where_of(loc[:-1]))
    bad = _extra(info).get("x-bad") if info is not None else None
    if bad:
        return "schema", bad.format(where=where, key=_key_of(loc), value=value, type=type(value).__name__), loc
    return "schema", f"{where or 'the file'}: {err['msg'].lower()}", loc


def check(model: type[BaseModel], data, *, unknown: Callable, missing: Callable):
    """Validate ``data`` against ``model``: (instance or None, [Failure] sorted by line)."""
    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        fields = field_map(model)
        out = []
        for err in exc.errors(include_url=False):
            code, message, loc = _render(err, fields, unknown, missing)
            out.append((err["type"] != "extra_forbidden", Failure(line_at(data, loc), code, message, loc)))
        # by line; on one line an unknown key first (a misspelt key explains the rest)
        return None, [f for _, f in sorted(out, key=lambda pair: (pair[1].line, pair[0]))]


def problems(failures: list[Failure], path: str, code: str | None = None) -> list[Problem]:
    """Failures as lint's Problems (``code`` replaces the plain ``schema`` code when given)."""
    return [Problem(path, f.line, code if code and f.code == "schema" else f.code, f.message) for f in failures]


def json_schema(model: type[BaseModel]) -> dict:
    """The JSON schema of a file kind (editors and docs)."""
    return model.model_json_schema(by_alias=True)
