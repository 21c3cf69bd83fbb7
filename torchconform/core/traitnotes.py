"""Trait evidence: the note a traits-suite probe leaves on its passing outcome
(a sibling of :mod:`torchconform.core.notes`' compile note).

One documented, parseable line (docs/traits.md), kept in the outcome's ``message``
so the store, export and ingest carry it without a schema change::

    trait: <name> <compact JSON object>

``<name>`` is a trait, optionally with one part (``precision.float64``); the JSON
object holds the trait's values at its top level and, under ``"evidence"``, what
they were measured from.  A trait the backend cannot measure has
``"measurable": false`` and a ``"reason"``; its values are ``null``.

The message limit (``outcome.MESSAGE_LIMIT``) is respected by shortening the
evidence (longest strings first, then whole entries), never the values, and
``"evidence_cut": true`` says that happened: a truncated JSON would not parse.
"""
from __future__ import annotations

import json
import re

from torchconform.core.outcome import MESSAGE_LIMIT

# The operators the traits suite's eager fallback probe calls, one call each (suites/traits/
# workload.py); refdev's ground truth reads them too.  Dispatcher names: torch.unique
# without dim is aten::_unique2.
EAGER_FALLBACK_OPS = ("aten::nonzero", "aten::cumsum", "aten::cumprod", "aten::sort", "aten::topk",
                      "aten::median", "aten::kthvalue", "aten::_unique2", "aten::masked_select")

TRAIT_PREFIX = "trait:"
_TRAIT_RX = re.compile(r"^trait: (?P<name>[a-z_]+(?:\.[a-z0-9_]+)?) (?P<body>\{.*\})$")
_NAME_RX = re.compile(r"^[a-z_]+(?:\.[a-z0-9_]+)?$")


def _dump(body: dict) -> str:
    return json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=True, allow_nan=False)


def _cut_longest(evidence: dict) -> bool:
    """Shorten the evidence's longest string by half, else drop its longest entry."""
    strings = [(len(v), k) for k, v in evidence.items() if isinstance(v, str) and len(v) > 24]
    if strings:
        _, key = max(strings)
        value = evidence[key]
        evidence[key] = value[: len(value) // 2] + "..."
        return True
    if evidence:
        _, key = max((len(_dump({k: v})), k) for k, v in evidence.items())
        del evidence[key]
        return True
    return False


def trait_note(name: str, values: dict, evidence: dict | None = None, limit: int = MESSAGE_LIMIT) -> str:
    """The message of a passing probe: ``trait: <name> {values..., "evidence": {...}}``."""
    if not _NAME_RX.match(name):
        raise ValueError(f"bad trait name {name!r}")
    if "evidence" in values:
        raise ValueError("'evidence' is reserved for the evidence object")
    evidence = dict(evidence or {})
    body = dict(values, evidence=evidence)
    text = f"{TRAIT_PREFIX} {name} {_dump(body)}"
    while len(text) > limit:
        # Values are what summary --json reads: only the evidence may give way.
        if not _cut_longest(evidence):
            raise ValueError(f"trait {name}: values alone exceed {limit} characters")
        body = dict(values, evidence=evidence, evidence_cut=True)
        text = f"{TRAIT_PREFIX} {name} {_dump(body)}"
    return text


def not_measurable(reason: str, **values) -> dict:
    """The values of a trait this backend does not let us measure (each given key None)."""
    return dict({k: None for k in values}, measurable=False, reason=str(reason))


def parse_trait_note(message: str) -> tuple[str, dict] | None:
    """``(name, body)`` from a message written by :func:`trait_note`, else None."""
    m = _TRAIT_RX.match(message or "")
    if not m:
        return None
    try:
        body = json.loads(m.group("body"))
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    return m.group("name"), body


def traits_from_messages(messages) -> dict:
    """``{trait: {values..., evidence...}}`` from outcome messages; a part name
    (``precision.float64``) nests under its trait (``traits["precision"]["float64"]``).
    Messages that are not trait notes are ignored; a later note of the same name wins."""
    traits: dict = {}
    for message in messages:
        parsed = parse_trait_note(message)
        if parsed is None:
            continue
        name, body = parsed
        trait, _, part = name.partition(".")
        if part:
            slot = traits.setdefault(trait, {})
            slot[part] = body
        else:
            traits[trait] = body
    return traits
