"""Synthetic builds in the seed's proportions, as JUnit XML or straight into a store.

The seed build: 154,000 outcomes, 69,000 skipped (30,000 PyTorch eligibility,
39,000 backend-specific, of which 22,000 missing-operator over a few hundred
operators), the rest mostly passing.  Used by bench/ingest.py and, as a library,
by the site's bench (``write_builds``).

    python bench/gen_outcomes.py --out seed.xml [--n 154000] [--seed 0]
"""
from __future__ import annotations

import argparse
import os
import random
import sys

from torchconform.core.outcome import Outcome

SEED_TOTAL = 154_000
# Counts per (outcome, kind) at SEED_TOTAL; scaled for other sizes.
SEED_MIX = [
    (("pass", ""), 76_000),
    (("pass_fallback", ""), 3_000),
    (("fail", ""), 4_000),
    (("error", ""), 600),
    (("crash", ""), 100),
    (("timeout", ""), 100),
    (("xfail", ""), 1_000),
    (("xpass", ""), 200),
    (("skip_eligibility", ""), 30_000),
    (("skip_backend", "missing_op"), 22_000),
    (("skip_backend", "unsupported_dtype"), 9_000),
    (("skip_backend", "skiplist"), 6_000),
    (("skip_backend", "not_executed"), 2_000),
]
assert sum(n for _, n in SEED_MIX) == SEED_TOTAL
assert sum(n for (o, _), n in SEED_MIX if o.startswith("skip")) == 69_000

VARIANTS = ("forward", "gradient", "out", "compiled")
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "complex64", "bool")
N_OPS = 600            # OpInfo-like operators
# Every outcome the runner records carries its rerun command, like this one.
REPRO = ("/opt/venv/bin/python -m pytest /home/ci/pytorch/{test_id} --tc-device refdev "
         "--tc-profile /home/ci/torchconform/skiplists/refdev/profile.yaml --tc-ops {op}")
N_MISSING_OPS = 300    # "a few hundred" missing operator overloads
FILES = ("test/test_ops.py", "test/test_ops_gradients.py", "test/test_torch.py", "test/test_nn.py",
         "test/test_binary_ufuncs.py", "test/test_unary_ufuncs.py", "test/test_reductions.py")


def _mix(n: int) -> list[tuple[str, str]]:
    """Exactly ``n`` (outcome, kind) labels in the seed's proportions."""
    labels = []
    for label, count in SEED_MIX:
        labels.extend([label] * round(count * n / SEED_TOTAL))
    labels = labels[:n]
    labels.extend([("pass", "")] * (n - len(labels)))
    return labels


def synthetic_outcomes(n: int = SEED_TOTAL, seed: int = 0, drift: float = 0.0, suite: str = "ops") -> list[Outcome]:
    """``n`` outcomes in the seed's proportions.

    Test ids depend only on the index, so two builds share tests; ``seed`` picks
    which test gets which outcome and ``drift`` (0..1) reshuffles that share of
    tests relative to seed 0, so consecutive builds differ a little, like real ones.
    """
    base = random.Random(0)
    labels = _mix(n)
    base.shuffle(labels)
    if seed and drift:
        rng = random.Random(seed)
        moved = rng.sample(range(n), int(n * drift))
        values = [labels[i] for i in moved]
        rng.shuffle(values)
        for i, v in zip(moved, values):
            labels[i] = v
    # Zipf-like: a few operators block most tests, like real backends.
    weights = [1.0 / (k + 1) for k in range(N_MISSING_OPS)]
    missing_names = [f"aten::op{k:03d}.out" if k % 3 == 0 else f"aten::op{k:03d}" for k in range(N_MISSING_OPS)]
    # Chosen per test index, not per build: a test blocked by an operator stays blocked by
    # the same one in every build, as on a real backend.
    missing_for = random.Random(1000).choices(missing_names, weights, k=n)
    out = []
    for i, (outcome, kind) in enumerate(labels):
        op = f"op{i % N_OPS:03d}"
        variant = VARIANTS[(i // N_OPS) % len(VARIANTS)]
        dtype = DTYPES[(i // (N_OPS * len(VARIANTS))) % len(DTYPES)]
        rep = i // (N_OPS * len(VARIANTS) * len(DTYPES))
        file_ = FILES[i % len(FILES)]
        cls = "TestCommonREFDEV"
        name = f"test_{variant}_{op}_refdev_{dtype}" + (f"_{rep}" if rep else "")
        test_id = f"{file_}::{cls}::{name}"
        o = dict(test_id=test_id, outcome=outcome, kind=kind, suite=suite, file=file_, cls=cls,
                 name=name, op=op, variant=variant, dtype=dtype, device="refdev:0",
                 duration=round(0.001 + (i % 97) * 0.0005, 4), repro=REPRO.format(test_id=test_id, op=op))
        if kind == "missing_op":
            mop = missing_for[i]
            o.update(missing_op=mop, message=f"NotImplementedError: Could not run '{mop}' with arguments from the 'PrivateUse1' backend.")
        elif kind == "skiplist":
            o.update(skiplist_entry=f"refdev-{i % 40}", message=f"torchconform skiplist: refdev-{i % 40} known numerics issue")
        elif kind == "unsupported_dtype":
            o.update(message=f"torchconform unsupported dtype: {dtype}")
        elif kind == "not_executed":
            o.update(message="torchconform not executed: run stopped before this test")
        elif outcome == "pass_fallback":
            o.update(fallback_ops=[f"aten::op{(i * 7) % N_OPS:03d}"])
        elif outcome in ("fail", "error"):
            o.update(message=f"AssertionError: Tensor-likes are not close! Mismatched elements: {i % 50 + 1} / 100")
        # Tolerance tiers per test (not per build, as a real kernel's): the compare variant's
        # passes are exact or within PyTorch's tolerance, its fails now and then near misses.
        if variant == VARIANTS[0] and outcome in ("pass", "pass_fallback", "fail"):
            o.update(tier=("exact" if i % 3 else "default") if outcome != "fail" else ("loose" if i % 5 == 0 else "beyond"))
        elif outcome == "skip_eligibility":
            o.update(message="Skipped: test doesn't currently work on this dtype")
        elif outcome == "crash":
            o.update(message="worker 'gw1' crashed while running test")
        elif outcome == "timeout":
            o.update(message="torchconform timeout: exceeded 300 s")
        out.append(Outcome(**o))
    return out


def write_junit_file(path: str, outcomes: list[Outcome], build: str = "synthetic", suite: str = "ops") -> None:
    """JUnit XML exactly as the runner's sink writes it (tc attributes, suite defaults)."""
    from torchconform.db.junit.write import write_junit_stream

    with open(path, "w", encoding="utf-8") as out:
        write_junit_stream(out, {"build": build, "suite": suite, "device": "refdev", "profile": "young-backend"},
                           outcomes)


def write_plain_junit_file(path: str, outcomes: list[Outcome]) -> None:
    """The same outcomes as plain pytest --junitxml output (no tc attributes):
    ingest must classify these from their messages."""
    from xml.sax.saxutils import quoteattr

    with open(path, "w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="pytest">\n')
        for o in outcomes:
            head = (f'<testcase classname={quoteattr(o.file[:-3].replace("/", ".") + "." + o.cls)} '
                    f'name={quoteattr(o.name)} time="{o.duration:.3f}"')
            msg = quoteattr(o.message)
            if o.outcome in ("pass", "xpass"):
                out.write(head + " />\n")
            elif o.outcome == "pass_fallback":
                warn = (f"UserWarning: The operator '{o.fallback_ops[0]}' is not currently supported on the refdev "
                        "backend and will fall back to run on the CPU.")
                out.write(head + f"><system-err>{warn}</system-err></testcase>\n")
            elif o.outcome == "fail":
                out.write(head + f"><failure message={msg}>{quoteattr(o.message)[1:-1]}</failure></testcase>\n")
            elif o.outcome in ("error", "crash", "timeout"):
                out.write(head + f"><error message={msg}>{quoteattr(o.message)[1:-1]}</error></testcase>\n")
            elif o.outcome == "xfail":
                out.write(head + f'><skipped type="pytest.xfail" message={msg} /></testcase>\n')
            else:
                out.write(head + f'><skipped type="pytest.skip" message={msg} /></testcase>\n')
        out.write("</testsuite></testsuites>\n")


def write_builds(store, n_builds: int, n_outcomes: int = SEED_TOTAL, prefix: str = "synthetic",
                 drift: float = 0.02, batch: int = 20_000, branch: str = "main", start: int = 0) -> list[str]:
    """Write ``n_builds`` synthetic builds straight into ``store``; returns their names (oldest first).
    ``start``: the number of the first (a series written a build at a time)."""
    names = []
    for b in range(start, start + n_builds):
        name = f"{prefix}-{b:03d}"
        outcomes = synthetic_outcomes(n_outcomes, seed=b, drift=drift if b else 0.0)
        store.ensure_build(name, torch_version="2.13.0", backend="refdev", device="refdev", profile="young-backend",
                           branch=branch, commit=f"{b:040x}")
        run_id = store.start_run(name, suite="ops", selection="synthetic", host="bench")
        for i in range(0, len(outcomes), batch):
            store.add_outcomes(run_id, outcomes[i:i + batch])
        store.finish_run(run_id, 0)
        names.append(name)
    return names


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="JUnit XML file to write")
    p.add_argument("--n", type=int, default=SEED_TOTAL, help=f"outcomes (default {SEED_TOTAL})")
    p.add_argument("--seed", type=int, default=0, help="build seed (0 = the reference build)")
    p.add_argument("--drift", type=float, default=0.02, help="share of tests reshuffled for seed != 0")
    p.add_argument("--plain", action="store_true", help="plain pytest JUnit (no tc attributes)")
    args = p.parse_args(argv)
    outcomes = synthetic_outcomes(args.n, seed=args.seed, drift=args.drift)
    if args.plain:
        write_plain_junit_file(args.out, outcomes)
    else:
        write_junit_file(args.out, outcomes, build=f"synthetic-{args.seed}")
    print(f"wrote {len(outcomes)} outcomes to {args.out} ({os.path.getsize(args.out) / 1e6:.1f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
