"""The expected covered set: which models build and pass eval and train on CPU.

Pinned per transformers version and torch minor version in
``data/expected/transformers-<version>-torch-<major.minor>.yaml``, the versions
the sweep that made it ran with: a transformers or torch upgrade (or a builder
change) that loses models is noticed, and a set measured on one torch is never
taken for another's.  Patch releases of torch share a file (they do not change
which models build).  Where no file exists for the running versions,
``expected`` raises ``NoPin`` saying which pins exist and how to make one.
Beside ``covered`` the pin lists ``not_covered``: every other model type with a
short reason taken from the stored message of its first failing run (an
``overrides.yaml`` skip reason arrives the same way), so that covered and
not_covered together account for every model type.  Regenerate after a CPU
sweep of the full selection:

    torchconform sweep --selection full --device cpu --variants eval,train --build cov --db cov.db
    python -m torchconform.suites.models.coverage cov.db cov

After changing how some types are built (an ``overrides.yaml`` entry), sweep just
those (``sweep --models LIST``) and ``--update`` the pin: they take their new status,
the rest keep theirs.  A change to the generic rules (``shrink.yaml``, hf_inputs.py)
reaches every type: sweep the full selection again.
"""
from __future__ import annotations

import os
import re
import sys

import yaml

from torchconform.errors import UserError
from torchconform.core.yamlpos import load_data
from torchconform.suites.models.data_files import data_path
from torchconform.config import db_url
from torchconform.db.models import builds, result_values, results, tests
from torchconform.db.opening import open_store
from torchconform.suites.models import hf
from torchconform.suites.models.spec import Unbuildable

_PIN = re.compile(r"^transformers-(?P<transformers>.+)-torch-(?P<torch>\d+\.\d+)\.yaml$")


# The reason of a model type the build has no run of.
NOT_RUN = "not run in this build"


class NoPin(UserError):
    """No expected covered set was made for the running transformers/torch versions."""


def torch_key(torch_version: str | None = None) -> str:
    """``2.14.1+cu130`` -> ``2.14``: the torch part of a pin's name."""
    if torch_version is None:
        import torch

        torch_version = torch.__version__
    return ".".join(torch_version.split("+")[0].split(".")[:2])


def path_for(version: str, torch_version: str | None = None) -> str:
    """The pin of transformers ``version`` for ``torch_version`` (default: the running torch)."""
    return data_path("expected", f"transformers-{version}-torch-{torch_key(torch_version)}.yaml")


def pins() -> list[tuple[str, str]]:
    """(transformers version, torch major.minor) of every shipped pin, sorted."""
    folder = data_path("expected")
    found = [_PIN.match(name) for name in sorted(os.listdir(folder))] if os.path.isdir(folder) else []
    return [(m["transformers"], m["torch"]) for m in found if m]


def expected(version: str | None = None) -> dict:
    """The pinned covered set for transformers ``version`` (default: the installed one)
    and the running torch; ``NoPin`` when none was made for these versions."""
    version = version or hf.version()
    path = path_for(version)
    if not os.path.exists(path):
        have = ", ".join(f"transformers {t} on torch {p}" for t, p in pins()) or "none"
        raise NoPin(f"no expected covered set for transformers {version} on torch {torch_key()} "
                    f"({os.path.basename(path)}; pinned: {have}); make one with a CPU sweep of the full "
                    "selection and `python -m torchconform.suites.models.coverage DB BUILD` (see that module)")
    return load_data(path)


def covered_from_store(url: str, build: str) -> list[str]:
    """hf model types whose every stored run in ``build`` passed."""
    from sqlalchemy import select

    store = open_store(db_url(url))
    try:
        with store.read() as conn:
            rows = conn.execute(select(tests.c.op, result_values.c.outcome)
                                .join(results, results.c.test_pk == tests.c.id)
                                .join(result_values, result_values.c.id == results.c.value_id)
                                .join(builds, builds.c.id == results.c.build_id)
                                .where(builds.c.name == build, tests.c.suite == "models")).all()
    finally:
        store.close()
    ok: dict[str, bool] = {}
    for op, outcome in rows:
        ok[op] = ok.get(op, True) and outcome in ("pass", "pass_fallback")
    return sorted(m.split("/", 1)[1] for m, good in ok.items() if good and m.startswith("hf/"))


def _short(message: str, limit: int = 160) -> str:
    """The first line of a stored message, without the outcome's boilerplate prefix."""
    lines = [ln.strip() for ln in (message or "").strip().splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        text = f"{text} {lines[1]}"  # "construct: ImportError:" says why on the next line
    for prefix in ("unconstructible: ", "CPU reference failed: "):
        if text.startswith(prefix):
            kind = "build" if prefix.startswith("unconstructible") else "cpu run"
            text = f"{kind}: {text[len(prefix):]}"
            break
    text = " ".join(text.split()).replace("torchconform timeout: ", "")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _rebuild_reason(name: str) -> str:
    try:
        hf.build(name)
    except Unbuildable as exc:
        return _short(f"unconstructible: {' '.join(str(exc).split())}")
    except Exception:
        return ""
    return ""


def not_covered_from_store(url: str, build: str, model_types) -> dict[str, str]:
    """Every hf model type of ``model_types`` not covered in ``build``, with a short
    reason: the message of its first failing run (a skip reason set in
    overrides.yaml comes through the same way), or that the build has no run of it."""
    from sqlalchemy import select

    store = open_store(db_url(url))
    try:
        with store.read() as conn:
            rows = conn.execute(select(tests.c.op, tests.c.variant, result_values.c.outcome, result_values.c.message)
                                .join(results, results.c.test_pk == tests.c.id)
                                .join(result_values, result_values.c.id == results.c.value_id)
                                .join(builds, builds.c.id == results.c.build_id)
                                .where(builds.c.name == build, tests.c.suite == "models")
                                .order_by(tests.c.op, tests.c.variant)).all()
    finally:
        store.close()
    seen: set[str] = set()
    reason: dict[str, str] = {}
    for op, variant, outcome, message in rows:
        if not op.startswith("hf/"):
            continue
        name = op.split("/", 1)[1]
        seen.add(name)
        if outcome not in ("pass", "pass_fallback") and name not in reason:
            why = _short(message) or outcome
            if not why.startswith(("build:", "cpu run:")):
                why = _short(f"{variant} {outcome}: {why}")  # a run on the device under test
            reason[name] = why
    for name in model_types:
        if name not in seen:
            reason[name] = NOT_RUN
        elif reason.get(name, "").endswith(":"):
            # Stores keep a message's first line, and some exceptions (transformers'
            # ImportError naming the missing package) put their detail on the next:
            # ask the builder again for the whole of it.
            reason[name] = _rebuild_reason(name) or reason[name]
    return {name: reason[name] for name in sorted(reason) if name in set(model_types)}


def _check_build(url: str, build: str) -> None:
    """UserError unless ``url`` is an existing store holding ``build`` (nothing created)."""
    with open_store(db_url(url), create=False) as store:
        store.build_row(build)


def merge_update(pinned: dict, covered: list[str], not_covered: dict[str, str], ran: set[str]) -> tuple[dict, dict]:
    """The pin ``pinned`` with the model types of ``ran`` measured again: each takes its new
    status (``covered`` or ``not_covered``); the others keep the pinned one.  Returns the new
    pin's (covered list, not_covered mapping) and what changed: type -> (before, after)."""
    was_covered = set(pinned.get("covered") or [])
    was_not = dict(pinned.get("not_covered") or {})
    now_covered = (was_covered - ran) | (set(covered) & ran)
    now_not = {name: why for name, why in was_not.items() if name not in ran}
    now_not.update({name: why for name, why in not_covered.items() if name in ran})
    changed = {name: ("covered" if name in was_covered else "not covered",
                      "covered" if name in now_covered else "not covered")
               for name in ran if (name in was_covered) != (name in now_covered)}
    return {"covered": sorted(now_covered), "not_covered": dict(sorted(now_not.items()))}, changed


def main(argv=None) -> int:
    import argparse

    import torch

    parser = argparse.ArgumentParser(prog="python -m torchconform.suites.models.coverage",
                                     description="Write the expected covered set of the installed transformers "
                                                 "and torch from a CPU sweep stored in DB as BUILD.")
    parser.add_argument("db", help="the store's URL or SQLite path")
    parser.add_argument("build", help="the sweep's build name")
    parser.add_argument("--update", action="store_true",
                        help="the build swept only some model types (sweep --models): those take their new "
                             "status, every other type keeps the existing pin's")
    args = parser.parse_args(argv)
    _check_build(args.db, args.build)   # a wrong DB or build name must not empty the pin
    types = hf.model_types()
    covered = [m for m in covered_from_store(args.db, args.build) if m in set(types)]
    not_covered = not_covered_from_store(args.db, args.build, types)
    made = "a CPU sweep of the full selection"
    if args.update:
        pinned = expected()   # NoPin when there is nothing to update
        ran = set(types) - {name for name, why in not_covered.items() if why == NOT_RUN}
        if not ran:
            raise UserError(f"build {args.build!r} ran no hf model type; sweep some with --models, or drop --update")
        merged, changed = merge_update(pinned, covered, not_covered, ran)
        covered, not_covered = merged["covered"], merged["not_covered"]
        made = f"{pinned.get('made', made)}, then {len(ran)} types swept again"
        for name, (before, after) in sorted(changed.items()):
            print(f"  {name}: {before} -> {after}")
    data = {"transformers": hf.version(), "torch": torch.__version__.split("+")[0],
            "model_types": len(types),
            "runs": "eval, train on cpu", "made": made, "covered": covered,
            # why each other type is not covered: covered + not_covered = model_types
            "not_covered": not_covered}
    with open(path_for(hf.version()), "w", encoding="utf-8") as fh:
        fh.write("# Generated by python -m torchconform.suites.models.coverage; see that module.\n")
        yaml.safe_dump(data, fh, sort_keys=False)
    print(f"{len(covered)} of {data['model_types']} model types covered, {len(not_covered)} not "
          f"-> {path_for(hf.version())}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
