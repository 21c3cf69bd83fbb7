"""Draft a truth file from probe evidence, for a person to check entry by entry.

Runs in the backend's environment (it asks that torch which overloads have a CPU
kernel). The draft is a starting point: every entry was then checked by hand (the
probe's sources agreeing, the driver's own trace where one exists, see docs/backends.md)
before it went into bench/backends/<backend>-truth.yaml; entries the sources disagree
on are marked ``REVIEW``.

    python draft_truth.py PROBE_DIR/probe.json FACTS.json > draft.yaml
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verdict import census_status, derive, expect_ops_quick  # noqa: E402

DATE = "2026-12-04"


def base(op: str) -> str:
    return op.split("::")[-1].split(".")[0]


def census_of(record: dict, evidence: dict) -> tuple[dict, str]:
    import torch

    fell_back = {base(o) for o in evidence.get("fallback_ops", [])}
    out, main = {}, ""
    for op in record["aten"]:
        slot = record["dispatch"].get(op, "none")
        cpu = torch._C._dispatch_has_kernel_for_dispatch_key(op, "CPU")
        status = census_status(slot, cpu)
        if status is None:
            continue
        if slot == "kernel" and base(op) in fell_back:
            status = "fallback"   # a kernel of its own that calls the CPU fallback (torch-opencl)
        if evidence["evidence"] == "missing" and op == evidence.get("missing_op"):
            status = "missing"    # a composite stub that raises (convolution_overrideable's ATen hook)
        out[op] = status
        if not main and status != "composite":
            main = op
    return out, main or (record["aten"][0] if record["aten"] else "")


def checked(record: dict, evidence: dict) -> str:
    how = ["probe.py: the call on device tensors under the profiler"]
    parents = record["call"].get("fallback_parents") or []
    how.append(f"aten::_to_cpu under {', '.join(parents)}" if parents else "no aten::_to_cpu")
    if record.get("strict"):
        s = record["strict"]
        how.append(f"{s['env']}: " + ("raised '" + s.get("message", "")[:90] + "'" if s["outcome"] == "raised" else "ran"))
    slots = ", ".join(f"{op} [{slot}]" for op, slot in record["dispatch"].items() if op in record["aten"])
    how.append(f"PrivateUse1 slot: {slots}")
    if "correct" in evidence:
        how.append("result " + ("equal to CPU's" if evidence["correct"] else "NOT equal to CPU's") +
                   f" ({record['call'].get('detail', '')})")
    return "; ".join(how)


def entry(record: dict) -> dict:
    ev = derive(record)
    census, main = census_of(record, ev)
    out = {"case": record["case"], "aten": record["aten"], "evidence": ev["evidence"]}
    for key in ("correct", "fallback_ops", "missing_op", "message"):
        if key in ev:
            out[key] = ev[key]
    if record["call"].get("outcome") == "raised" and "message" not in out:
        out["message"] = record["call"]["message"][:200]
    if record.get("opinfo"):
        out["opinfo"] = record["opinfo"]
        for where, key in (("device", "expect_ops_quick"), ("cpu", "expect_ops_quick_cpu_samples")):
            exp = expect_ops_quick(record, where)
            if exp:
                out[key] = exp
    out["census"] = census
    out["census_main"] = main
    out["checked"] = checked(record, ev)
    if ev.get("consistent") is False:
        out["REVIEW"] = "the profiler and the strict switch disagree"
    out["date"] = DATE
    return out


def main() -> int:
    import yaml

    records = json.loads(Path(sys.argv[1]).read_text())
    facts = json.loads(Path(sys.argv[2]).read_text())
    facts = {k: v for k, v in facts.items() if k != "own_kernel_names"}
    doc = {"facts": facts, "operators": [entry(r) for r in records.values() if "call" in r]}
    print(yaml.safe_dump(doc, sort_keys=False, width=160, allow_unicode=True, default_flow_style=None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
