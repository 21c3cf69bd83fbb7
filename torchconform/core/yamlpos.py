"""YAML loading that remembers where every value came from.

PyYAML's ``safe_load`` forgets line numbers, and a skiplist error that does not
name its line sends people hunting through a long file.  Here we compose the
node tree ourselves and build plain dicts/lists that carry their position, and
we refuse duplicate keys (plain YAML silently keeps the last one, which would
hide a half-edited entry).

Every YAML file torchconform reads (skiplists, backend and refdev profiles, the
gate config, the suites' data files, failure categories) goes through this module: ``load_yaml``
for Pos* containers, ``load_data`` for plain data.  Both refuse anchors and
aliases (``&a`` / ``*a``) where the parser meets the first one: none of our
files needs them, and nine levels of aliases nine wide expand to 387 million
strings (a recursive alias to a RecursionError) in whatever builds the data.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

import yaml

from torchconform.errors import UserError


class YamlError(UserError):
    """A YAML problem at ``path:line`` (1-based); one line, exit 2 where it reaches the CLI."""

    def __init__(self, path: str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = path, line, message


class PosDict(dict):
    """A mapping with its own line and the line of each key."""

    line: int = 0
    key_lines: dict

    def line_of(self, key) -> int:
        return self.key_lines.get(key, self.line)


class PosList(list):
    line: int = 0
    item_lines: list


class YamlAliasError(YamlError):
    """An anchor or alias, refused (see the module docstring)."""


class _Loader(yaml.SafeLoader):
    """SafeLoader whose composer stops at the first anchor or alias, before
    anything is built from it."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if event.anchor is not None:
            sign = "*" if isinstance(event, yaml.AliasEvent) else "&"
            raise YamlAliasError(self.name, event.start_mark.line + 1,
                                 f"YAML aliases are not allowed ({sign}{event.anchor}); write the values out in full")
        return super().compose_node(parent, index)


class _Constructor(yaml.constructor.SafeConstructor):
    pass


def _build(node, path: str, constructor: _Constructor):
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out = PosDict()
        out.line, out.key_lines = line, {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise YamlError(path, key_node.start_mark.line + 1, "YAML merge keys (<<) are not supported in skiplists; write the fields out")
            key = _build(key_node, path, constructor)
            if isinstance(key, (dict, list)):
                raise YamlError(path, key_node.start_mark.line + 1, "a mapping key must be a plain scalar")
            if key in out:
                raise YamlError(path, key_node.start_mark.line + 1,
                                f"duplicate key {key!r} (first at line {out.key_lines[key]}); keep one")
            out[key] = _build(value_node, path, constructor)
            out.key_lines[key] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        out = PosList(_build(child, path, constructor) for child in node.value)
        out.line = line
        out.item_lines = [child.start_mark.line + 1 for child in node.value]
        return out
    try:
        return constructor.construct_object(node, deep=True)
    except ValueError:
        # e.g. 2026-13-01 looks like a date to YAML but is none; keep the text so
        # that validation can say which field is wrong and where.
        return node.value


def _compose(path: str, text: str | None):
    """The node tree of one YAML document from ``path`` (or ``text``), or None."""
    if text is None:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except FileNotFoundError:
            raise YamlError(path, 0, "no such file; check the path") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise YamlError(path, 0, f"cannot read file ({exc}); check the path and that it is UTF-8 text") from None
    loader = _Loader(text)
    loader.name = path
    try:
        return loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        raise YamlError(path, line, f"invalid YAML: {exc.problem or exc.context}; fix the syntax") from None
    except yaml.YAMLError as exc:
        raise YamlError(path, 0, f"invalid YAML: {exc}; fix the syntax") from None
    finally:
        loader.dispose()


def _construct(path: str, build):
    try:
        return build()
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise YamlError(path, mark.line + 1 if mark else 0, f"invalid value: {exc.problem}") from None


def load_yaml(path: str, text: str | None = None):
    """Parse one YAML document from ``path`` (or ``text``) into Pos* containers."""
    node = _compose(path, text)
    if node is None:
        return None
    return _construct(path, lambda: _build(node, path, _Constructor()))


def load_data(path: str, text: str | None = None):
    """Parse one YAML document from ``path`` (or ``text``) into plain Python data,
    like ``yaml.safe_load`` but without anchors or aliases; errors are ``YamlError``."""
    node = _compose(path, text)
    if node is None:
        return None
    return _construct(path, lambda: _Constructor().construct_document(node))


@dataclass
class Problem:
    path: str
    line: int
    code: str          # yaml, schema, regex, duplicate, overlap, expired, stale, torch
    message: str
    severity: str = "error"   # error | warning

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.severity}: [{self.code}] {self.message}"


def suggest(key, choices) -> str:
    close = difflib.get_close_matches(str(key), choices, n=1)
    return f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(choices)}"
