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


def unobservable(op: str, status: str, row, truth: dict, records: list[dict]) -> bool:
    """A census row the truth calls fallback that no census can know: the backend's own
    kernel calls the CPU fallback (the truth's per_op_fallback_kernels), the dispatcher shows
    a kernel, and no test of the census's build ran it through the fallback (which the
    census would have joined: census/take.py)."""
    if status.split(" ")[0] != "fallback" or row is None or row["status"] != "native":
        return False
    if op not in (truth.get("facts") or {}).get("per_op_fallback_kernels", ()):
        return False
    return not any(op in (r.get("fallback_ops") or ()) for r in records)


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
        row = self.classes.setdefault(cls, {"checked": 0, "wrong": 0, "numeric": 0, "not comparable": 0,
                                            "blocked": 0})
        if state in ("not comparable", "blocked"):
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
    # the records of the build the census joined (bench/backends.py: the ops run's)
    joined = stored.get("ops-cpu" if b.cpu_samples else "ops") or []
    for entry in truth.get("operators", []) if rows else ():
        for op, status in (entry.get("census") or {}).items():
            row = rows.get(op)
            got = "no row" if row is None else row["status"] + (f" ({row['via']})" if row.get("via") else "")
            state = "right" if row is not None and row["status"] == status.split(" ")[0] else "wrong"
            if state == "wrong" and unobservable(op, status, row, truth, joined):
                state = "blocked"
                log(f"      BLOCKED {op:40s} truth {status}; census {got}: its own kernel calls the CPU fallback "
                    "and no test of the census's build ran it (a census sees inside a kernel only through tests)")
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
    for step, key in (("ops", "expect_ops_quick"), ("ops-cpu", "expect_ops_quick_cpu_samples")):
        if step in stored and rows:
            agree = total = explained = 0
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
                expect = entry.get(key) or {}
                if ran and not works and rec["outcome"] == "fail" and expect.get("outcome") == "fail":
                    # the test failed on the backend's own error before it reached the operator the
                    # census calls missing (the truth says so: torch-opencl's as_strided)
                    explained += 1
                    log(f"      census/run explained ({step}): {entry['opinfo']}: census {row['op']} {row['status']}; "
                        f"the test failed before reaching it: {expect.get('note', '')}")
                    continue
                agree += ran == works
                if ran != works:
                    log(f"      census/run disagree ({step}): {entry['opinfo']}: census {row['op']} {row['status']}, "
                        f"run {rec['outcome']} {rec.get('missing_op') or ''}")
            log(f"    census vs run ({step}): {agree} of {total - explained} sampled operators agree"
                + (f", {explained} explained (failed before reaching the operator)" if explained else ""))
    for cls, r in sorted(tally.classes.items()):
        extra = "".join(f", {r[k]} {k}" for k in ("numeric", "not comparable", "blocked") if r[k])
        log(f"    {cls:36s} {r['checked']:3d} checked, {r['wrong']} wrong{extra}")
    return (f"{tally.total('checked')} checked, {tally.total('wrong')} wrong "
            f"({tally.total('numeric')} numeric only, {tally.total('not comparable')} not comparable, "
            f"{tally.total('blocked')} blocked)")


# How a test ended, whatever evidence the tool had: the dispatcher observer only adds
# evidence (pass -> pass_fallback or host_only, fail -> skip_backend/missing_op where it
# names the operator), so with and without it every test must end the same way.
ENDED = {"pass": "passed", "pass_fallback": "passed", "xpass": "passed", "fail": "raised", "error": "raised",
         "xfail": "raised", "skip_backend": "raised", "skip_eligibility": "skipped", "crash": "crashed",
         "timeout": "timed out"}


def same_without_watch(with_watch: list[dict], without: list[dict], show: int = 20) -> str:
    """Per test of both runs: did it end the same way (ENDED)?  Prints each that did not."""
    a = {r["test_id"]: r for r in with_watch}
    b = {r["test_id"]: r for r in without}
    both = sorted(set(a) & set(b))
    differ = [t for t in both if ENDED.get(a[t]["outcome"], a[t]["outcome"]) != ENDED.get(b[t]["outcome"],
                                                                                          b[t]["outcome"])]
    evidence = sum(1 for t in both if t not in differ and (a[t]["outcome"], a[t].get("kind")) !=
                   (b[t]["outcome"], b[t].get("kind")))
    for t in differ[:show]:
        log(f"      DIFFERS {t}: with the observer {a[t]['outcome']}, without {b[t]['outcome']} "
            f"({(b[t].get('message') or '')[:120]})")
    return (f"{len(both)} tests in both runs, {len(differ)} ended differently without the dispatcher observer "
            f"({evidence} differ only in evidence: pass_fallback/host_only/missing_op named by it)"
            + (f"; {len(set(a) ^ set(b))} in one run only" if set(a) ^ set(b) else ""))


def same_records(shipped: list[dict], generated: list[dict], show: int = 20) -> str:
    """Per test of both runs: the same outcome, kind and missing operator?  (The ops run with
    the shipped profile against the one with the profile `backend init` wrote.)"""
    key = lambda r: (r["outcome"], r.get("kind") or "", r.get("missing_op") or "")   # noqa: E731
    a = {r["test_id"]: r for r in shipped}
    b = {r["test_id"]: r for r in generated}
    both = sorted(set(a) & set(b))
    differ = [t for t in both if key(a[t]) != key(b[t])]
    for t in differ[:show]:
        log(f"      DIFFERS {t}: shipped profile {key(a[t])}, init's profile {key(b[t])}")
    return (f"{len(both)} tests in both runs, {len(differ)} recorded differently from the shipped profile's run"
            + (f"; {len(set(a) ^ set(b))} in one run only" if set(a) ^ set(b) else ""))
