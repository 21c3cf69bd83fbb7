"""The ``model_ops`` table: the ATen overloads each model variant reaches, traced on CPU
by the models suite, stored per (model, variant, torch version, library version) so that
one trace serves every build made with those versions.  What the sets block on a
device is census/models.py's (it reads them here).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Iterable

from sqlalchemy import delete, insert, select

from torchconform.db.models import builds, model_ops, results, tests
from torchconform.db.shapes import MODELS_SUITE


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
