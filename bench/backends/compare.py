"""bench/backends.py's comparison: the stored records and census rows of the truth sample
against the truth file (docs/backends.md)."""
from __future__ import annotations

import json
from pathlib import Path


def log(msg: str) -> None:
    print(msg, flush=True)


def ops_record(records: list[dict], opinfo: str, device: str) -> dict | None:
    for r in records:
        if r.get("op") == opinfo and r.get("variant") == "compare_cpu" and r.get("dtype") == "float32":
            return r
    return None


def base(op: str) -> str:
    return op.split(".")[0] if op.count(".") else op


NUMERIC = ("are not close", "are not equal")


def agrees(expect: dict, rec: dict) -> tuple[str, str]:
    """("right" | "wrong" | "numeric" | "not comparable", what the stored record says).

    numeric: the truth says the operator ran (natively or through the fallback), the tool
    says fail with a closeness message: its tolerances, not the evidence, decided; not
    comparable: OpInfo itself skipped the test (skip_eligibility)."""
    said = rec["outcome"] + (f"/{rec['kind']}" if rec.get("kind") else "")
    if rec.get("missing_op"):
        said += f" {rec['missing_op']}"
    if rec.get("fallback_ops"):
        said += f" fallback {','.join(rec['fallback_ops'])}"
    if rec["outcome"] == "skip_eligibility":
        return "not comparable", said
    want_outcome = expect["outcome"]
    if (want_outcome in ("pass", "pass_fallback") and rec["outcome"] == "fail"
            and any(m in (rec.get("message") or "") for m in NUMERIC)):
        return "numeric", said
    if rec["outcome"] != want_outcome.split("/")[0]:
        return "wrong", said
    if "/" in want_outcome and rec.get("kind") != want_outcome.split("/")[1]:
        return "wrong", said
    if expect.get("missing_op") and rec.get("missing_op") != expect["missing_op"]:
        return "wrong", said
    if want_outcome == "pass" and rec.get("kind") == "host_only":
        return "wrong", said
    if expect.get("fallback_ops"):
        got = {base(o) for o in rec.get("fallback_ops") or []}
        if not {base(o) for o in expect["fallback_ops"]} <= got:
            return "wrong", said
    return "right", said


def census_rows(logs: Path) -> dict:
    path = logs / "census.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {r["op"]: r for r in data.get("rows", [])}


class Tally:
    """Per expected class: checked, wrong, numeric, not comparable."""

    def __init__(self):
        self.classes: dict[str, dict[str, int]] = {}

    def add(self, cls: str, state: str) -> None:
        row = self.classes.setdefault(cls, {"checked": 0, "wrong": 0, "numeric": 0, "not comparable": 0})
        if state == "not comparable":
            row[state] += 1
            return
        row["checked"] += 1
        if state != "right":
            row[state] += 1

    def total(self, key: str) -> int:
        return sum(r[key] for r in self.classes.values())


def want_text(expect: dict) -> str:
    return expect["outcome"] + (f" {expect['missing_op']}" if expect.get("missing_op") else "") + (
        f" fallback {','.join(expect['fallback_ops'])}" if expect.get("fallback_ops") else "")


def compare_ops(b, records: list[dict], truth: dict, key: str, label: str, tally: Tally) -> None:
    log(f"    {label}: test_compare_cpu_<op>_{b.device}_float32 against the truth's {key}:")
    for entry in truth.get("operators", []):
        expect = entry.get(key)
        if not expect or not entry.get("opinfo"):
            continue
        rec = ops_record(records, entry["opinfo"], b.device)
        state, said = ("wrong", "no stored record") if rec is None else agrees(expect, rec)
        tally.add(f"{label} {expect['outcome']}", state)
        if state in ("wrong", "numeric"):
            log(f"      {state.upper():7s} {entry['opinfo']:28s} truth {want_text(expect)}; tool {said}")


def step_compare(b, logs: Path, db: str, builds: dict, truth: dict, export, StepError) -> str:
    tally = Tally()
    stored = {}
    for step, key in (("ops", "expect_ops_quick"), ("ops-cpu", "expect_ops_quick_cpu_samples")):
        if step == "ops-cpu" and not b.cpu_samples:
            continue
        try:
            stored[step] = export(b, logs, db, builds[step])
        except StepError as exc:
            log(f"    {step}: not compared ({exc})")
            continue
        compare_ops(b, stored[step], truth, key, step, tally)
    rows = census_rows(logs)
    if rows:
        log("    census rows of the sampled overloads against the truth:")
    for entry in truth.get("operators", []) if rows else ():
        for op, status in (entry.get("census") or {}).items():
            row = rows.get(op)
            got = "no row" if row is None else row["status"] + (f" ({row['via']})" if row.get("via") else "")
            state = "right" if row is not None and row["status"] == status.split(" ")[0] else "wrong"
            tally.add(f"census {status.split(' ')[0]}", state)
            if state == "wrong":
                log(f"      WRONG   {op:40s} truth {status}; census {got}")
    try:
        modules = export(b, logs, db, builds["modules"]) if truth.get("modules") else []
    except StepError as exc:
        modules = []
        log(f"    modules: not compared ({exc})")
    for module in truth.get("modules", []) if modules else ():
        # the modules suite stores ModuleInfo names formatted for test names (nn_GRUCell)
        recs = [r for r in modules if r.get("op") in (module["module"], module["module"].replace(".", "_"))]
        if not recs:
            log(f"    modules: no stored test of {module['module']}")
            continue
        for rec in recs:
            state, said = agrees(module["expect"], rec)
            tally.add(f"modules {module['expect']['outcome']}", state)
            if state in ("wrong", "numeric"):
                log(f"      {state.upper():7s} {rec['name']}: truth {want_text(module['expect'])}; tool {said}")
    for step in ("ops", "ops-cpu"):
        if step in stored and rows:
            agree = total = 0
            for entry in truth.get("operators", []):
                rec = ops_record(stored[step], entry.get("opinfo") or "", b.device)
                row = rows.get(entry.get("census_main") or "")
                if rec is None or row is None or rec["outcome"] == "skip_eligibility":
                    continue
                if step == "ops" and "sample creation" in (entry.get("expect_ops_quick") or {}).get("note", ""):
                    continue   # the operator under test never ran
                total += 1
                ran = rec["outcome"] in ("pass", "pass_fallback", "fail", "xfail", "xpass")
                works = row["status"] in ("native", "autograd", "fallback") or (
                    row["status"] == "composite" and row.get("covered") is not False)
                agree += ran == works
                if ran != works:
                    log(f"      census/run disagree ({step}): {entry['opinfo']}: census {row['op']} {row['status']}, "
                        f"run {rec['outcome']} {rec.get('missing_op') or ''}")
            log(f"    census vs run ({step}): {agree} of {total} sampled operators agree")
    for cls, r in sorted(tally.classes.items()):
        extra = "".join(f", {r[k]} {k}" for k in ("numeric", "not comparable") if r[k])
        log(f"    {cls:36s} {r['checked']:3d} checked, {r['wrong']} wrong{extra}")
    return (f"{tally.total('checked')} checked, {tally.total('wrong')} wrong "
            f"({tally.total('numeric')} numeric only, {tally.total('not comparable')} not comparable)")
