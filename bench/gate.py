"""How long the gate takes on seed-scale builds (154,000 outcomes each).

Writes two synthetic builds (bench/gen_outcomes.py; the second drifts 2% from
the first, so there are thousands of regressions) into a SQLite file, then
times each stage of ``torchconform gate`` (flaky reruns off: they cost one
pytest process per attempt, measured by the e2e tests, not here):

    load both builds (ci.pipeline.load_records), evaluate the rules, render the
    Markdown + JUnit, and the whole gate_build; with the diff of the same pair
    (dashboard/arrays.diff, its one implementation: the test table and both builds
    read as arrays, then counted) for comparison.

    python bench/gate.py [--n 154000] [--db PATH]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gen_outcomes import SEED_TOTAL, write_builds  # noqa: E402

from torchconform.ci.config import load_config  # noqa: E402
from torchconform.ci.gate import evaluate, record_breakdown  # noqa: E402
from torchconform.ci.pipeline import gate_build, load_records  # noqa: E402
from torchconform.ci.report import junit_xml, markdown  # noqa: E402
from torchconform.db import arrays  # noqa: E402
from torchconform.dashboard.reads import READS  # noqa: E402
from torchconform.db.opening import open_store  # noqa: E402


# Issue 20's targets for two 154k builds (flaky reruns off).
GATE_TARGET_S = 1.0
DIFF_TARGET_S = 0.5


def arrays_diff(store, old: str, new: str) -> dict:
    """The diff of two stored builds as the site makes it (test table, both builds' arrays)."""
    tests = arrays.TestTable.read(store, READS)
    old_data, tests = arrays.BuildData.read(store, READS, old, tests)
    new_data, _ = arrays.BuildData.read(store, READS, new, tests)
    return arrays.diff(READS, old_data, new_data)


def timed(label: str, fn, results: dict):
    t0 = time.perf_counter()
    value = fn()
    results[label] = time.perf_counter() - t0
    print(f"  {label:<28} {results[label]:8.2f} s", flush=True)
    return value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=SEED_TOTAL, help=f"outcomes per build (default {SEED_TOTAL})")
    p.add_argument("--db", default=None, help="SQLite file to use (default: a temporary one)")
    args = p.parse_args(argv)
    tmp = tempfile.TemporaryDirectory(prefix="tc-bench-gate-")
    db = args.db or os.path.join(tmp.name, "bench.db")
    results: dict[str, float] = {}
    config = load_config()
    with open_store(db) as store:
        print(f"writing 2 builds x {args.n} outcomes into {db}", flush=True)
        old, new = timed("write builds (setup)", lambda: write_builds(store, 2, args.n, prefix="gatebench"), results)
        print("gate stages:")
        o = timed("load baseline", lambda: load_records(store, old), results)
        n = timed("load build", lambda: load_records(store, new), results)
        res = timed("evaluate rules", lambda: evaluate(o, n, config, old_name=old, new_name=new), results)

        def render():
            return markdown(res, record_breakdown(old, o), record_breakdown(new, n)), junit_xml(res)
        text, junit = timed("render markdown + junit", render, results)
        run = timed("gate_build (end to end)", lambda: gate_build(store, new, baseline=old, config=config, reruns=0),
                    results)
        timed("arrays.diff (reference)", lambda: arrays_diff(store, old, new), results)
    print("result:")
    print(f"  verdict {'PASSED' if run.result.passed else 'FAILED'}; "
          + ", ".join(f"{r.rule}={len(r.findings)}" for r in run.result.rules))
    print(f"  summary {len(text) / 1024:.0f} KiB (GitHub's step summary limit is 1024 KiB), junit {len(junit) / 1024:.0f} KiB")
    gate_s, diff_s = results["gate_build (end to end)"], results["arrays.diff (reference)"]
    print(f"  targets: gate_build {gate_s:.2f} s of <= {GATE_TARGET_S} s ({gate_s / GATE_TARGET_S:.2f}x), "
          f"arrays.diff {diff_s:.2f} s of <= {DIFF_TARGET_S} s ({diff_s / DIFF_TARGET_S:.2f}x); "
          f"load average {os.getloadavg()[0]:.1f}")
    per_k = results["gate_build (end to end)"] / (2 * args.n / 1000)
    print(f"  gate_build {results['gate_build (end to end)']:.2f} s = {per_k * 1000:.1f} ms per 1000 outcomes; "
          f"ratio to arrays.diff {results['gate_build (end to end)'] / results['arrays.diff (reference)']:.1f}x")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
