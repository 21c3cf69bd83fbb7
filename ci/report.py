"""What the gate tells people: a Markdown summary and a JUnit file of its verdicts.

The Markdown goes to ``--summary PATH`` and, when ``$GITHUB_STEP_SUMMARY`` is set,
is appended there (GitHub renders it on the run page).  The JUnit file has one
test case per rule (failure / skipped / passed) plus one per flaky test, for CI
systems that render JUnit but not Markdown.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from torchconform.ci.gate import GateResult, regressions_by_operator
from torchconform.core.breakdown import format_breakdown
from torchconform.core.outcome import BACKEND_SKIP_KINDS, OUTCOMES, repro_command

STATUS_MARK = {"pass": "pass", "warn": "WARN", "fail": "FAIL", "off": "off"}
RULE_TITLES = {
    "regression": "Regressions",
    "new_missing_op": "New missing operators",
    "coverage_drop": "Coverage drop",
    "new_test_failing": "New tests failing",
    "fallback_creep": "Fallback creep",
    "stale_expectations": "Stale expectations (xpass)",
    "missing_tests": "Missing tests",
}


MESSAGE_CHARS = 160


def _md(text) -> str:
    """Make a value safe inside a Markdown table cell / inline code."""
    return str(text).replace("|", "\\|").replace("\n", " ").replace("`", "'")


def _short(text: str, limit: int = MESSAGE_CHARS) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _more(n_total: int, shown: int) -> list[str]:
    return [f"- ... and {n_total - shown} more"] if n_total > shown else []


def _delta_table(old_b: dict, new_b: dict) -> list[str]:
    lines = ["| outcome | baseline | build | delta |", "|---|---:|---:|---:|"]
    rows = [("total", old_b["total"], new_b["total"])]
    rows += [(o, old_b["outcomes"][o], new_b["outcomes"][o]) for o in OUTCOMES]
    rows += [(f"skip_backend/{k}", old_b["backend_skip_kinds"][k], new_b["backend_skip_kinds"][k])
             for k in BACKEND_SKIP_KINDS]
    fail_kinds = sorted(set(old_b.get("fail_kinds") or {}) | set(new_b.get("fail_kinds") or {}))
    rows += [(f"fail/{k}", (old_b.get("fail_kinds") or {}).get(k, 0), (new_b.get("fail_kinds") or {}).get(k, 0))
             for k in fail_kinds]
    for name, a, b in rows:
        if name != "total" and a == 0 and b == 0:
            continue
        lines.append(f"| {name} | {a} | {b} | {b - a:+d} |")
    return lines


NAMES_SHOWN = 8   # operators / dtypes named per failure cluster


def _names(counts) -> str:
    names = sorted(counts, key=lambda k: (-counts[k], k))
    text = ", ".join(f"`{_md(n)}`" for n in names[:NAMES_SHOWN])
    return text + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def cluster_lines(clusters: list, limit: int, device: str = "") -> list[str]:
    """The failure clusters section (torchconform/core/clusters.py ``order``ed: new since the baseline first)."""
    if not clusters:
        return []
    n_new = sum(c.new for c in clusters)
    out = [f"## Failure clusters ({len(clusters)}, {n_new} new since the baseline)", "",
           "Failures grouped by message signature (numbers, shapes, addresses, test-specific names taken out) "
           "or user category; new ones first.", "",
           "| | signature | tests | operators | dtypes | example | repro |", "|---|---|---:|---|---|---|---|"]
    for c in clusters[:limit]:
        e = c.example
        outcomes = ", ".join(f"{o} {n}" for o, n in sorted(c.outcomes.items()))
        name = f"**{_md(c.category)}**" if c.category else f"`{_md(_short(c.signature))}`"
        repro = repro_command(e.repro, e.test_id, device)
        out.append(f"| {'**new**' if c.new else ''} | {name} | {c.tests} ({outcomes}) | {_names(c.ops)} | "
                   f"{_names(c.dtypes)} | `{_md(e.test_id)}`: `{_md(_short(e.message))}` | `{_md(repro)}` |")
    return out + _more(len(clusters), limit) + [""]


def trait_lines(changed: list) -> list[str]:
    """The summary's section on traits that changed since the baseline (readback.compare_traits rows)."""
    rows = [r for r in changed if r[3]]
    if not rows:
        return []
    out = [f"## Traits changed since the baseline ({len(rows)})", "",
           "Measured by the traits suite in both builds; see the build's evaluation page.", "",
           "| trait | baseline | build |", "|---|---|---|"]
    out += [f"| {_md(label)} | {_md(before)} | {_md(after)} |" for label, before, after, _ in rows]
    return out + [""]


def markdown(result: GateResult, old_breakdown: dict, new_breakdown: dict, limit: int = 50,
             device: str = "", notes: list[str] | None = None, clusters: list | None = None,
             traits: list | None = None) -> str:
    """``clusters``: the build's failure clusters, new since the baseline first (torchconform/core/clusters.py);
    ``traits``: readback.compare_traits of the two builds."""
    verdict = "PASSED" if result.passed else "FAILED"
    out = [f"# torchconform gate: {verdict}", "",
           f"Build `{_md(result.new)}` against baseline `{_md(result.old)}`.", ""]
    for note in notes or ():
        out += [f"> {note}", ""]

    out += ["## Rules", "", "| rule | mode | result | detail |", "|---|---|---|---|"]
    for r in result.rules:
        out.append(f"| {r.rule} | {r.mode} | {STATUS_MARK[r.status]} | {_md(r.detail)} |")
    out.append("")

    out += ["## Breakdown", "", "```", format_breakdown(new_breakdown), "```", "",
            "### Delta against the baseline", ""] + _delta_table(old_breakdown, new_breakdown) + [""]
    out += trait_lines(traits or [])
    out += cluster_lines(clusters or [], limit, device)

    groups = regressions_by_operator(result)
    if groups:
        n = sum(len(v) for v in groups.values())
        out += [f"## Regressions by operator ({n} tests)", ""]
        shown = 0
        for op, findings in groups.items():
            out.append(f"### `{_md(op)}` ({len(findings)} tests)")
            for f in findings:
                if shown >= limit:
                    break
                msg = f": {_md(_short(f['message']))}" if f.get("message") else ""
                out.append(f"- `{_md(f['test_id'])}`: {f['old']} -> {f['new']}{msg}")
                shown += 1
            out.append("")
        out += _more(n, shown)

    new_ops = result.rule("new_missing_op").findings
    if new_ops:
        out += ["## New missing operators", "", "| operator | tests blocked | of which passed in the baseline |",
                "|---|---:|---:|"]
        out += [f"| `{_md(f['operator'])}` | {f['tests']} | {f['was_passing']} |" for f in new_ops[:limit]]
        out += _more(len(new_ops), limit) + [""]

    broken = result.rule("broken_claim").findings   # the support manifest (ci/claimsgate.py)
    if broken:
        out += [f"## Broken promises ({len(broken)} claims)", "", "| claim | what breaks it |", "|---|---|"]
        out += [f"| `{_md(f['claim'])}` | {_md(_short(f['message']))} |" for f in broken[:limit]]
        out += _more(len(broken), limit) + [""]

    creep = result.rule("fallback_creep").findings
    if creep:
        out += [f"## Fallback creep ({len(creep)} tests now pass only through CPU fallback)", "",
                "| test | operators on CPU fallback |", "|---|---|"]
        out += [f"| `{_md(f['test_id'])}` | {', '.join(f'`{_md(o)}`' for o in f['fallback_ops']) or '?'} |"
                for f in creep[:limit]]
        out += _more(len(creep), limit) + [""]

    for name in ("new_test_failing", "stale_expectations", "missing_tests"):
        r = result.rule(name)
        if not r.findings:
            continue
        out += [f"## {RULE_TITLES[name]} ({len(r.findings)})", ""]
        out += [f"- `{_md(f['test_id'])}`: {f['old']} -> {f['new']}" for f in r.findings[:limit]]
        out += _more(len(r.findings), limit) + [""]

    if result.flaky:
        out += [f"## Flaky tests ({len(result.flaky)}, not failing the gate)", "",
                "| test | attempts |", "|---|---|"]
        for f in result.flaky[:limit]:
            attempts = ", ".join(f"{a['attempt']}: {a['outcome']}" for a in f["attempts"])
            out.append(f"| `{_md(f['test_id'])}` | {_md(attempts)} |")
        out += _more(len(result.flaky), limit) + [""]

    if result.explained:
        out += [f"## Explained by declared traits ({len(result.explained)}, not failing the gate)", "",
                "The trait is declared by both builds; the failure was attributed to it (see its message).", ""]
        out += [f"- `{_md(f['test_id'])}`: {f['old']} -> {f['new']}" for f in result.explained[:limit]]
        out += _more(len(result.explained), limit) + [""]

    fx = result.fixes or {}
    if any(fx.get(k) for k in ("tests", "now_native", "ops_implemented")):
        out += ["## Fixes", ""]
        if fx.get("ops_implemented"):
            out.append("Operators no longer missing: " +
                       ", ".join(f"`{_md(o['operator'])}` ({o['tests']} tests)" for o in fx["ops_implemented"][:limit]))
            out.append("")
        if fx.get("tests"):
            out.append(f"{len(fx['tests'])} tests fixed:")
            out += [f"- `{_md(f['test_id'])}`: {f['old']} -> {f['new']}" for f in fx["tests"][:limit]]
            out += _more(len(fx["tests"]), limit) + [""]
        if fx.get("now_native"):
            out.append(f"{len(fx['now_native'])} tests back from CPU fallback to native:")
            out += [f"- `{_md(f['test_id'])}` (was on fallback: {', '.join(f['fallback_ops']) or '?'})"
                    for f in fx["now_native"][:limit]]
            out += _more(len(fx["now_native"]), limit) + [""]

    failing = failing_findings(result)
    if failing:
        out += ["## Repro commands", "", "One per failing test:", "", "```sh"]
        out += [repro_command(f.get("repro"), f["test_id"], device) for f in failing[:limit]]
        out += ["```"]
        if len(failing) > limit:
            out.append(f"... and {len(failing) - limit} more")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def failing_findings(result: GateResult) -> list[dict]:
    """Findings that make the gate fail and name a test that was run (one repro each)."""
    seen, out = set(), []
    for r in result.rules:
        if r.status != "fail" or r.rule in ("missing_tests", "coverage_drop", "new_missing_op"):
            continue
        for f in r.findings:
            if f.get("test_id") and f["test_id"] not in seen:
                seen.add(f["test_id"])
                out.append(f)
    return out


def _finding_line(f: dict) -> str:
    if f.get("test_id"):
        return f"{f['test_id']}: {f['old']} -> {f['new']}"
    if f.get("claim"):   # broken_claim (ci/claimsgate.py)
        return f"{f['claim']}: broken promise ({f['message']})"
    if f.get("operator"):
        return f"{f['operator']}: blocks {f['tests']} tests"
    if f.get("direction"):   # perf_regression (ci/perfgate.py)
        return f"{f['op']} {f['dtype']}: {f['message']}"
    return ", ".join(f"{k} {v}" for k, v in f.items())


def junit_xml(result: GateResult, limit: int = 50) -> str:
    """One testsuite ``torchconform-gate``: a case per rule, and one per flaky test."""
    suite = ET.Element("testsuite", name="torchconform-gate")
    failures = skipped = 0
    for r in result.rules:
        case = ET.SubElement(suite, "testcase", classname="torchconform.gate", name=r.rule, time="0")
        props = ET.SubElement(case, "properties")
        for key, value in (("mode", r.mode), ("status", r.status), ("count", r.count), ("threshold", r.threshold),
                           ("build", result.new), ("baseline", result.old)):
            ET.SubElement(props, "property", name=key, value=str(value))
        lines = [_finding_line(f) for f in r.findings[:limit]]
        body = "\n".join([r.detail, *lines])
        if r.status == "fail":
            failures += 1
            ET.SubElement(case, "failure", message=r.detail, type="gate").text = body
        elif r.status == "off":
            skipped += 1
            ET.SubElement(case, "skipped", message="rule is off in the gate config")
        elif r.status == "warn":
            ET.SubElement(case, "system-out").text = "WARNING: " + body
    for f in result.flaky:
        case = ET.SubElement(suite, "testcase", classname="torchconform.gate.flaky", name=f["test_id"], time="0")
        attempts = ", ".join(f"{a['attempt']}: {a['outcome']}" for a in f["attempts"])
        ET.SubElement(case, "system-out").text = f"flaky (not failing the gate); attempts {attempts}"
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_outputs(text: str, junit: str, summary_path: str | None = None, junit_path: str | None = None,
                  environ=os.environ) -> list[str]:
    """Write the Markdown and JUnit where asked; returns the paths written."""
    written = []
    if summary_path:
        with open(summary_path, "w", encoding="utf-8") as fh:
            fh.write(text)
        written.append(summary_path)
    step = environ.get("GITHUB_STEP_SUMMARY")
    if step:
        # GitHub collects what every step appends to this file.
        with open(step, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
        written.append(step)
    if junit_path:
        with open(junit_path, "w", encoding="utf-8") as fh:
            fh.write(junit)
        written.append(junit_path)
    return written
