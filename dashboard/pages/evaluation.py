"""A build's evaluation page: what an honest evaluation reports beyond pass/fail.

From the build's one read (arrays.BuildData) and its baseline's:

- the traits the ``traits`` suite measured (db/readback.py's keys), each beside
  the baseline's value, a changed one marked;
- the environment the run really had (stored on every build; the traits suite's note
  when the build ran it);
- numerical error per operator x dtype over passing tests, largest relative error first,
  and its growth against the baseline over the tests passing in both (torchconform/core/numeric.py,
  what the gate's ``numeric_drift`` rule judges);
- execution cost per model and run: the device's and CPU's cold time (first call, compile
  included) and warm time (median of the calls after it), each with its device/CPU ratio,
  never one number mixing the two (the models suite's ``timing:`` notes).
"""
from __future__ import annotations

import numpy as np

from torchconform.core.notes import parse_timing_note
from torchconform.core.numeric import drift, op_dtype_max
from torchconform.core.outcome import PASSED
from torchconform.core.traitnotes import traits_from_messages
from torchconform.db.arrays import RESULT_COLUMNS
from torchconform.dashboard.tables import Table
from torchconform.db.readback import ENVIRONMENT_KEYS, SUITE as TRAITS_SUITE, compare_traits, value_text

# Rows shown at once in the drift tables (the downloads have them all).
DRIFT_ROWS = 100
_MESSAGE, _ABS, _REL = (RESULT_COLUMNS.index(c) for c in ("message", "max_abs_err", "max_rel_err"))
_OUTCOME = RESULT_COLUMNS.index("outcome")


def _suite_rows(data, suite: str) -> list[int]:
    levels = data.tests.levels["suite"]
    if suite not in levels:
        return []
    return np.flatnonzero(data.tests.index["suite"][data.pk] == levels.index(suite)).tolist()


def traits_of(data) -> tuple[dict, dict | None]:
    """(traits, environment note) of a build's traits suite results; ({}, None) without them."""
    if data is None:
        return {}, None
    messages = [data.rows[i][_MESSAGE] for i in _suite_rows(data, TRAITS_SUITE) if data.rows[i][_MESSAGE]]
    traits = traits_from_messages(messages)
    return traits, traits.pop("environment", None)


def traits_table(stem: str, traits: dict, base: dict | None) -> tuple[Table, list[str]]:
    """The traits beside the baseline's; returns the table and the labels that changed."""
    columns = ["trait", "value"] + (["baseline", "changed"] if base is not None else [])
    t = Table(stem, columns, title="Traits (suite traits)")
    changed = []
    for label, before, value, differs in compare_traits(base or {}, traits):
        row = [label, value]
        if base is not None:
            row += [before, "changed" if differs else ""]
            if differs:
                changed.append(label)
                t.classes.setdefault("changed", {})[len(t.rows)] = "failed"
        t.rows.append(row)
    return t, changed


def environment_table(stem: str, environment: dict | None) -> Table:
    t = Table(stem, ["what", "value"], title="Environment")
    if environment:
        keys = list(ENVIRONMENT_KEYS) + sorted(k for k in environment if k not in ENVIRONMENT_KEYS
                                               and not isinstance(environment[k], dict))
        t.rows = [[k, value_text(environment.get(k))] for k in keys if environment.get(k) not in (None, "")]
        evidence = environment.get("evidence")
        launch = evidence.get("launch") if isinstance(evidence, dict) else None
        if launch:
            t.rows.append(["launch", str(launch)])
    return t


def error_rows(data) -> dict[str, tuple]:
    """{test_id: (op, dtype, outcome, max_abs_err, max_rel_err)} of the rows that recorded errors."""
    if data is None:
        return {}
    # kept on the build's data: the next build's page reads it again as its baseline's
    cached = data.__dict__.get("_error_rows")
    if cached is not None:
        return cached
    values = data.tests.values
    test_id, op, dtype = values["test_id"], values["op"], values["dtype"]
    out = {}
    at = data.error_at
    for pk, row in zip(data.pk[at].tolist(), data.rows.take(at)):
        if row[_ABS] is not None:
            out[test_id[pk]] = (op[pk] or "", dtype[pk] or "", row[_OUTCOME], row[_ABS], row[_REL])
    data.__dict__["_error_rows"] = out
    return out


def errors_table(stem: str, rows: dict) -> Table:
    cells = op_dtype_max((tid, op, dtype, a, r) for tid, (op, dtype, outcome, a, r) in rows.items() if outcome in PASSED)
    t = Table(stem, ["op", "dtype", "tests", "max abs error", "max rel error", "test with the largest rel error"],
              title="Numerical error per operator and dtype (passing tests)")
    ordered = sorted(cells.items(), key=lambda kv: (-kv[1]["rel"], kv[0]))
    t.rows = [[op, dtype, c["tests"], c["abs"], c["rel"], c["rel_test"]] for (op, dtype), c in ordered]
    return t


def drift_table(stem: str, old: dict, new: dict) -> Table:
    t = Table(stem, ["op", "dtype", "tests", "baseline abs", "abs", "abs growth", "baseline rel", "rel", "rel growth",
                     "test"], title="Drift against the baseline (tests passing in both)")
    t.rows = [[d["op"], d["dtype"], d["tests"], d["old_abs"], d["new_abs"], round(d["abs_growth"], 3), d["old_rel"],
               d["new_rel"], round(d["rel_growth"], 3), d["test_id"]]
              for d in drift(old, new) if max(d["abs_growth"], d["rel_growth"]) > 1.0]
    return t


def _ratio(device, cpu):
    return round(device / cpu, 3) if device is not None and cpu else None


def cost_table(stem: str, data) -> Table:
    """Cold and warm time per model run on the device and on CPU, each with its ratio."""
    t = Table(stem, ["model", "run", "device cold s", "CPU cold s", "cold ratio", "device warm s", "CPU warm s",
                     "warm ratio", "warm calls", "compiles"], title="Execution cost per model (cold and warm apart)")
    values = data.tests.values
    rows = []
    for i in data.models_rows():
        timing = parse_timing_note(data.rows[i][_MESSAGE])
        if timing is None:
            continue
        pk = int(data.pk[i])
        rows.append([values["op"][pk] or values["test_id"][pk], values["variant"][pk] or "",
                     timing["device_cold_s"], timing["cpu_cold_s"], _ratio(timing["device_cold_s"], timing["cpu_cold_s"]),
                     timing["device_warm_s"], timing["cpu_warm_s"], _ratio(timing["device_warm_s"], timing["cpu_warm_s"]),
                     timing["warm_calls"], timing["compiles"]])
    t.rows = sorted(rows, key=lambda r: (r[0], r[1]))
    return t


def render(site, build, data, baseline, generated: str) -> list[str]:
    """Write ``builds/<slug>/evaluation.html``; returns the traits that changed since the baseline."""
    base = f"builds/{build.slug}/"
    traits, env_note = traits_of(data)
    base_traits = traits_of(baseline)[0] if baseline is not None else None
    traits_t, changed = traits_table(base + "traits", traits, base_traits)
    stored_env = (build.meta.get("metadata") or {}).get("environment") if isinstance(build.meta.get("metadata"), dict) else None
    env_t = environment_table(base + "environment", env_note or stored_env)
    new_errors = error_rows(data)
    errors_t = errors_table(base + "numeric-errors", new_errors)
    drift_t = drift_table(base + "drift", error_rows(baseline), new_errors) if baseline is not None else None
    cost_t = cost_table(base + "model-cost", data)
    tables = [t for t in (traits_t, env_t, errors_t, drift_t, cost_t) if t is not None]
    site.page(base + "evaluation.html", "evaluation.html", title=f"Evaluation of build {build.name}", build=build,
              has_traits=bool(traits), traits_table=traits_t, changed=changed, environment_table=env_t,
              errors_table=errors_t, drift_table=drift_t, cost_table=cost_t, limit=DRIFT_ROWS,
              downloads=tables, generated=generated)
    return changed
