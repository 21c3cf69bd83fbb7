"""Per-model operator sets and what blocks each model on a build's device.

A model variant's set is the ATen overloads its CPU reference run reaches (traced
by the models suite).  It depends on the model's code, not on the device, so it is
stored per (model, variant, torch version, library version) in ``model_ops`` and
one trace serves every build made with those versions.

Joined with a build's census, a model is blocked by every operator of its sets
that does not run on the device: a ``missing`` operator itself, or, for a composite
whose decomposition reaches missing operators, those operators (``blocked_by``).
That is the whole blocking set, where a test run only ever sees the first one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from torchconform.core.dispatch import COMPOSITE, Row
from torchconform.db import model_ops

DIRECT = "direct"  # how an operator blocks: reached by the model itself ...
# ... or only through a composite's decomposition: the value is then that composite's name.


def blocking(rows: dict[str, Row], ops: Iterable[str]) -> dict[str, str]:
    """The operators of ``ops`` (one model's set) that keep it from running on the device
    whose census is ``rows`` (op -> Row): blocking operator -> DIRECT, or the name of the
    composite the model reaches through whose decomposition it is reached.  A blocked
    composite is followed down its ``blocked_by`` to operators that are not composites
    (census rows name only what a decomposition reaches first; the dispatcher's error,
    and so a run's missing_op, names the root).  Operators the census does not list
    (another torch build's) are not judged."""
    out: dict[str, str] = {}

    def visit(op: str, how: str, seen: frozenset) -> None:
        row = rows.get(op)
        if row is None or row.works:
            return
        if row.status == COMPOSITE:
            if op not in seen:  # a cycle is no evidence (resolve_coverage's rule)
                for reached in row.blocked_by:
                    visit(reached, op if how == DIRECT else how, seen | {op})
        elif out.get(op) != DIRECT:
            out[op] = how  # reached by the model itself wins over any composite reaching it too

    for op in sorted(set(ops)):
        visit(op, DIRECT, frozenset())
    return out


@dataclass
class ModelBlock:
    model_id: str
    traced: bool                    # the model has a stored operator set at this torch version
    ops: dict[str, str]             # blocking operator -> DIRECT or the composite reaching it
    variants: dict[str, list[str]]  # variant -> its blocking operators

    def to_dict(self) -> dict:
        return {"model": self.model_id, "traced": self.traced, "blocking": dict(sorted(self.ops.items())),
                "variants": self.variants}


def blocking_for_build(store, build: str, census_rows: list[Row]) -> dict[str, ModelBlock]:
    """Every model of ``build`` with its blocking operators on the build's device (the
    union over its variants; a model is unblocked when all of them run)."""
    by_op = {r.op: r for r in census_rows}
    with store.read() as conn:
        ids, version = model_ops.build_models(store, build, conn)
        sets = model_ops.load(store, version, ids, conn)
    out = {}
    for model_id in ids:
        variants = sets.get(model_id, {})
        union: dict[str, str] = {}
        per_variant = {}
        for variant, ops in sorted(variants.items()):
            found = blocking(by_op, ops)
            per_variant[variant] = sorted(found)
            for op, how in found.items():
                if union.get(op) != DIRECT:
                    union[op] = how
        out[model_id] = ModelBlock(model_id, bool(variants), union, per_variant)
    return out
