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
from datetime import datetime, timezone
from typing import Iterable

from sqlalchemy import delete, insert, select

from torchconform.core.dispatch import COMPOSITE, Row
from torchconform.db.models import builds, model_ops, results, tests

MODELS_SUITE = "models"
DIRECT = "direct"  # how an operator blocks: reached by the model itself ...
# ... or only through a composite's decomposition: the value is then that composite's name.


def save(store, model_id: str, variant: str, torch_version: str, library_version: str,
         ops: Iterable[str], conn=None) -> None:
    """Store (replace) the set of ``model_id``'s ``variant`` at these versions."""
    row = {"model_id": model_id, "variant": variant, "torch_version": torch_version,
           "library_version": library_version or "", "ops": " ".join(sorted(set(ops))),
           "traced": datetime.now(timezone.utc).replace(tzinfo=None)}
    key = ((model_ops.c.model_id == model_id) & (model_ops.c.variant == variant)
           & (model_ops.c.torch_version == torch_version) & (model_ops.c.library_version == row["library_version"]))
    if conn is None:
        with store.write() as c:
            c.execute(delete(model_ops).where(key))
            c.execute(insert(model_ops), [row])
    else:
        conn.execute(delete(model_ops).where(key))
        conn.execute(insert(model_ops), [row])


def save_traces(store, outcomes, conn) -> int:
    """Store the operator sets the models suite's outcomes carry (``Outcome.trace``) in the
    caller's transaction: Store.add_outcomes calls it, so a set is stored exactly when its
    outcome is.  Returns how many sets."""
    n = 0
    for o in outcomes:
        trace = getattr(o, "trace", None)
        if trace and o.suite == MODELS_SUITE:
            save(store, o.op, o.variant, trace.get("torch_version", ""), trace.get("library_version", ""),
                 trace.get("ops", ()), conn=conn)
            n += 1
    return n


def stored(store, model_ids: Iterable[str], torch_version: str) -> dict[str, tuple]:
    """model -> ((variant, torch version, library version), ...) of its stored sets at
    ``torch_version``: what a sweep tells its workers not to trace again (Task.traced)."""
    wanted = set(model_ids)
    query = select(model_ops.c.model_id, model_ops.c.variant, model_ops.c.library_version).where(
        model_ops.c.torch_version == torch_version)
    out: dict[str, list] = {}
    with store.read() as conn:
        for model_id, variant, library in conn.execute(query):
            if model_id in wanted:
                out.setdefault(model_id, []).append((variant, torch_version, library))
    return {m: tuple(sorted(v)) for m, v in out.items()}


def load(store, torch_version: str, model_ids: Iterable[str] | None = None, conn=None) -> dict[str, dict[str, set[str]]]:
    """model -> variant -> overloads at ``torch_version`` (``model_ids``: None = all).  Where
    several library versions were traced, the newest trace wins."""
    query = select(model_ops.c.model_id, model_ops.c.variant, model_ops.c.ops, model_ops.c.traced).where(
        model_ops.c.torch_version == torch_version)
    wanted = None if model_ids is None else set(model_ids)
    if conn is None:
        with store.read() as c:
            rows = c.execute(query).all()
    else:
        rows = conn.execute(query).all()
    newest: dict[tuple[str, str], tuple] = {}
    for model_id, variant, ops, traced in rows:
        if wanted is not None and model_id not in wanted:
            continue
        key = (model_id, variant)
        if key not in newest or traced > newest[key][1]:
            newest[key] = (ops, traced)
    out: dict[str, dict[str, set[str]]] = {}
    for (model_id, variant), (ops, _) in newest.items():
        out.setdefault(model_id, {})[variant] = set(ops.split())
    return out


def build_models(store, build: str, conn) -> tuple[list[str], str]:
    """(model ids run in ``build``, the build's torch version)."""
    build_id = store.build_id(build, conn)
    version = conn.execute(select(builds.c.torch_version).where(builds.c.id == build_id)).scalar() or ""
    ids = conn.execute(select(tests.c.op).distinct().join(results, results.c.test_pk == tests.c.id)
                       .where(results.c.build_id == build_id, tests.c.suite == MODELS_SUITE)).scalars().all()
    return sorted(ids), version


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
        ids, version = build_models(store, build, conn)
        sets = load(store, version, ids, conn)
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
